// Package recrawl plans when each page of a step with a `recrawl:` policy is visited
// again, from how often the records it yields have changed, and hands the due ones to
// the runs that visit them.
//
// # The plan of a page
//
// Per step (namespace "<tenant>:<site.task>", as dedup's), one Redis sorted set
// "rc:<namespace>:due". A member is the input that revisits the page: its URL, or for
// inputs that carry more than a URL, the input as JSON. Its score packs the whole plan
// into the 52 integer bits a double holds exactly:
//
//	bits 28–51  due: minute (since 2024-01-01 UTC) of the next visit, 24 bits (31 years)
//	bit  27     leased: a run claimed the page at due − lease and has not visited it yet
//	bits 23–26  changes seen (0–15)
//	bits  0–22  minutes observed (up to 16 years)
//
// Due is the high part, so the set's order is the order of due times: the most overdue
// page first. No other key holds state, so a page costs one sorted-set entry (see the
// README for the bytes measured) and its plan survives anything Redis survives.
//
// # The estimator and the interval
//
// A page's records change, we assume, as a Poisson process of rate λ. After observing
// C changes (visits that found a record new or changed) in T minutes, λ is estimated as
// (C + a) / (T + b), a gamma prior of a = 0.1 change in b minutes, with b chosen so a
// page never visited again starts at the policy's min. The next visit comes when the
// chance that the page has changed since the last one reaches target_miss:
//
//	interval = −ln(1 − target_miss) / λ, clamped to [min, max]
//
// So a visit that finds a change adds to C and shortens the interval; one that does
// not adds to T and lengthens it (by 2× per visit for a page that never changed, from
// min to max in about ten visits). Each page's next visit comes up to a tenth of its
// interval early, by a share fixed per page, so pages found together spread out. When C reaches 15 or T twice max, both are halved:
// old history weighs less, so a page that starts or stops changing is followed.
//
// # Claims
//
// A run claims up to per_run due pages, most overdue first: their score moves to
// now + lease with the leased bit set, so no other run gets them, and a visit replans
// them. A page whose run never visited it (failed, canceled, cut short) is due again
// when its lease ends. Claim and replan are compare-and-set Lua scripts per page, so
// two workers never both claim or both replan from one state.
package recrawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Planner keeps the plans of every recrawl step in Redis.
type Planner struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// New returns a planner over rdb. now is the clock plans are made against (nil: the
// wall clock); simulations and tests pass their own.
func New(rdb redis.UniversalClient, now func() time.Time) *Planner {
	if now == nil {
		now = time.Now
	}
	return &Planner{rdb: rdb, now: now}
}

// Now is the planner's clock.
func (p *Planner) Now() time.Time { return p.now() }

// DueKey is the sorted set of a namespace's plans.
func DueKey(ns string) string { return "rc:" + ns + ":due" }

// policiesKey maps every namespace with plans to its policy, for status.
const policiesKey = "rc:policies"

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	dueShift    = 28
	leasedBit   = 1 << 27
	changeShift = 23
	maxChanges  = 15
	maxObserved = 1<<changeShift - 1
)

// Plan is one page's plan, unpacked.
type Plan struct {
	Due      time.Time     `json:"due"`
	Leased   bool          `json:"leased,omitempty"`
	Changes  int           `json:"changes"`  // visits that found a change, halved with age
	Observed time.Duration `json:"observed"` // time watched, halved with age
}

func minuteOf(t time.Time) int64 { return max(int64(t.Sub(epoch)/time.Minute), 0) }

func (pl Plan) score() float64 {
	s := minuteOf(pl.Due)<<dueShift | int64(pl.Changes)<<changeShift | min(int64(pl.Observed/time.Minute), maxObserved)
	if pl.Leased {
		s |= leasedBit
	}
	return float64(s)
}

// Unpack reads the plan a score packs.
func Unpack(score float64) Plan {
	s := int64(score)
	return Plan{
		Due:      epoch.Add(time.Duration(s>>dueShift) * time.Minute),
		Leased:   s&leasedBit != 0,
		Changes:  int(s >> changeShift & maxChanges),
		Observed: time.Duration(s&maxObserved) * time.Minute,
	}
}

// prior is the estimator's a: a tenth of a change, so history soon outweighs it.
const prior = 0.1

// logMiss is −ln(1 − target_miss): the expected changes at which a visit is due.
func logMiss(pol crawl.Recrawl) float64 { return -math.Log1p(-pol.TargetMiss) }

// Rate is the estimated changes per hour.
func (pl Plan) Rate(pol crawl.Recrawl) float64 {
	b := prior * pol.Min.Minutes() / logMiss(pol) // a never-revisited page starts at min
	return (float64(pl.Changes) + prior) / (pl.Observed.Minutes() + b) * 60
}

// Interval is how long after a visit the next one comes.
func (pl Plan) Interval(pol crawl.Recrawl) time.Duration {
	d := time.Duration(logMiss(pol) / pl.Rate(pol) * float64(time.Hour))
	return min(max(d, pol.Min), pol.Max).Round(time.Minute)
}

// Late is the estimated share of the page's changes that wait longer than min for a
// visit: with visits every I and changes at random times, 1 − min/I.
func (pl Plan) Late(pol crawl.Recrawl) float64 {
	return max(0, 1-pol.Min.Seconds()/pl.Interval(pol).Seconds())
}

// lease is how long a claimed page is kept from other runs.
func lease(pol crawl.Recrawl) time.Duration { return max(pol.Min, time.Hour) }

// visited is the plan after a visit at now that found a change or not.
func (pl Plan) visited(pol crawl.Recrawl, now time.Time, changed bool) Plan {
	last := pl.Due.Add(-pl.Interval(pol)) // when it was last visited
	if pl.Leased {
		last = pl.Due.Add(-lease(pol)) // the claim; what came before is counted already
	}
	next := pl
	next.Leased = false
	next.Observed += max(now.Sub(last), 0)
	if changed {
		next.Changes++
	}
	if next.Changes >= maxChanges || next.Observed > 2*pol.Max || next.Observed.Minutes() >= maxObserved {
		next.Changes, next.Observed = next.Changes/2, next.Observed/2
	}
	next.Due = now.Add(next.Interval(pol))
	return next
}

// spread moves a page's next visit up to a tenth of its interval earlier (never below
// min), by a share fixed per page, so pages found together do not all fall due in the
// same tick once their intervals grow alike.
func spread(member string, pl Plan, pol crawl.Recrawl, now time.Time) Plan {
	h := fnv.New32a()
	h.Write([]byte(member))
	iv := pl.Due.Sub(now)
	cut := time.Duration(float64(iv) * 0.1 * float64(h.Sum32()%1000) / 1000)
	pl.Due = now.Add(max(iv-cut, pol.Min))
	return pl
}

// fresh is the plan of a page seen for the first time at now.
func fresh(pol crawl.Recrawl, now time.Time) Plan {
	pl := Plan{}
	pl.Due = now.Add(pl.Interval(pol))
	return pl
}

// claimed is the plan of a page claimed at now: the time since its last visit is
// observed already, and the lease keeps it from other runs.
func (pl Plan) claimed(pol crawl.Recrawl, now time.Time) Plan {
	next := pl
	if !pl.Leased {
		next.Observed += max(now.Sub(pl.Due.Add(-pl.Interval(pol))), 0)
	}
	next.Observed = min(next.Observed, maxObserved*time.Minute)
	next.Leased = true
	next.Due = now.Add(lease(pol))
	return next
}

// Member is the set member that revisits the page of an input: its URL when that is
// all it carries, else the input as JSON (without its routing hints). The URL is its
// canonical form (crawl.URLKey), so two spellings of a page are one plan. It holds no
// user info: a plan keeps no password, and the page is the same page whichever password
// fetched it (the run that claims it gives it the chain's credentials again).
func Member(in crawl.Input) string {
	in.URL = crawl.URLKey(in.URL)
	return givenMember(in)
}

// givenMember is the member of an input as plans kept it before their URLs were
// canonical: the URL as the input gives it. adopt moves such plans to Member.
func givenMember(in crawl.Input) string {
	if in.Value == nil && len(in.Vars) == 0 && in.URL != "" && !strings.HasPrefix(in.URL, "{") {
		return crawl.StripUserinfo(in.URL)
	}
	b, _ := json.Marshal(crawl.Input{URL: in.URL, Value: in.Value, Vars: in.Vars})
	return crawl.StripUserinfo(string(b))
}

// adoptScript moves plans to new members: ARGV is (old member, new member)…; a plan
// under an old member takes the new one unless the new one has a plan already.
var adoptScript = redis.NewScript(`
for i = 1, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s then
    redis.call('ZADD', KEYS[1], 'NX', s, ARGV[i+1])
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return 0
`)

// adopt moves the plans of inputs kept under the URL as given (before members were
// canonical) to their canonical member, keeping their schedule. It costs nothing for
// inputs whose URL is canonical already.
func (p *Planner) adopt(ctx context.Context, ns string, inputs []crawl.Input) error {
	var args []any
	for _, in := range inputs {
		if old, m := givenMember(in), Member(in); old != m {
			args = append(args, old, m)
		}
	}
	if len(args) == 0 {
		return nil
	}
	if err := adoptScript.Run(ctx, p.rdb, []string{DueKey(ns)}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("recrawl: move %d plans of %s to canonical URLs: %w", len(args)/2, ns, err)
	}
	return nil
}

// InputOf is the input a member revisits.
func InputOf(member string) crawl.Input {
	if strings.HasPrefix(member, "{") {
		var in crawl.Input
		if json.Unmarshal([]byte(member), &in) == nil {
			return in
		}
	}
	return crawl.Input{URL: member}
}

// Visit is one page a batch visited: whether any record it yielded was new or changed.
type Visit struct {
	Input   crawl.Input
	Changed bool
}

// casScript sets each member's score only where it still holds the score read:
// ARGV is (member, old score or "", new score)…; it returns the members it skipped.
var casScript = redis.NewScript(`
local skipped = {}
for i = 1, #ARGV, 3 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[i])
  local same = (cur == false and ARGV[i+1] == '') or (cur ~= false and ARGV[i+1] ~= '' and tonumber(cur) == tonumber(ARGV[i+1]))
  if same then
    redis.call('ZADD', KEYS[1], ARGV[i+2], ARGV[i])
  else
    table.insert(skipped, ARGV[i])
  end
end
return skipped
`)

// Visited replans the pages a batch visited of the step's namespace.
func (p *Planner) Visited(ctx context.Context, ns string, pol crawl.Recrawl, visits []Visit) error {
	if len(visits) == 0 {
		return nil
	}
	changed := map[string]bool{}
	var members []string
	for _, v := range visits {
		m := Member(v.Input)
		if _, ok := changed[m]; !ok {
			members = append(members, m)
		}
		changed[m] = changed[m] || v.Changed
	}
	if err := p.remember(ctx, ns, pol); err != nil {
		return err
	}
	if err := p.adopt(ctx, ns, visitedInputs(visits)); err != nil {
		return err
	}
	now := p.now()
	return p.update(ctx, ns, members, func(m string, pl Plan, known bool) (Plan, bool) {
		if !known {
			return fresh(pol, now), true
		}
		return spread(m, pl.visited(pol, now, changed[m]), pol, now), true
	})
}

func visitedInputs(visits []Visit) []crawl.Input {
	ins := make([]crawl.Input, len(visits))
	for i, v := range visits {
		ins[i] = v.Input
	}
	return ins
}

// update reads the members' plans, lets next decide each new plan (or none), and sets
// them where nobody changed them meanwhile, reading those again.
func (p *Planner) update(ctx context.Context, ns string, members []string, next func(m string, pl Plan, known bool) (Plan, bool)) error {
	key := DueKey(ns)
	for attempt := 0; len(members) > 0; attempt++ {
		if attempt == 10 {
			return fmt.Errorf("recrawl: %d plans of %s keep changing under us", len(members), ns)
		}
		scores, known, err := p.scores(ctx, key, members)
		if err != nil {
			return err
		}
		var args []any
		for i, m := range members {
			old := ""
			if known[i] {
				old = strconv.FormatInt(int64(scores[i]), 10)
			}
			pl, ok := next(m, Unpack(scores[i]), known[i])
			if ok {
				args = append(args, m, old, strconv.FormatInt(int64(pl.score()), 10))
			}
		}
		if len(args) == 0 {
			return nil
		}
		skipped, err := casScript.Run(ctx, p.rdb, []string{key}, args...).StringSlice()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("recrawl: plan %d pages of %s: %w", len(members), ns, err)
		}
		members = skipped
	}
	return nil
}

// scores reads the members' scores in one round trip, and which members have one
// (ZMSCORE would read a missing member as 0).
func (p *Planner) scores(ctx context.Context, key string, members []string) ([]float64, []bool, error) {
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.FloatCmd, len(members))
	for i, m := range members {
		cmds[i] = pipe.ZScore(ctx, key, m)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("recrawl: read %d plans of %s: %w", len(members), key, err)
	}
	scores, known := make([]float64, len(members)), make([]bool, len(members))
	for i, c := range cmds {
		scores[i], known[i] = c.Val(), c.Err() == nil
	}
	return scores, known, nil
}

// Known reports which inputs already have a plan in the namespace: those are visited
// when due, not whenever an upstream step emits them again.
func (p *Planner) Known(ctx context.Context, ns string, inputs []crawl.Input) ([]bool, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	if err := p.adopt(ctx, ns, inputs); err != nil {
		return nil, err
	}
	members := make([]string, len(inputs))
	for i, in := range inputs {
		members[i] = Member(in)
	}
	_, known, err := p.scores(ctx, DueKey(ns), members)
	return known, err
}

// Claim leases up to limit pages of the namespace that are due now, most overdue
// first, and returns their inputs.
func (p *Planner) Claim(ctx context.Context, ns string, pol crawl.Recrawl, limit int) ([]crawl.Input, error) {
	now := p.now()
	upTo := strconv.FormatInt((minuteOf(now)+1)<<dueShift-1, 10)
	zs, err := p.rdb.ZRangeByScoreWithScores(ctx, DueKey(ns), &redis.ZRangeBy{Min: "-inf", Max: upTo, Count: int64(limit)}).Result()
	if err != nil {
		return nil, fmt.Errorf("recrawl: due pages of %s: %w", ns, err)
	}
	var members []string
	for _, z := range zs {
		members = append(members, z.Member.(string))
	}
	var lost []string
	err = p.update(ctx, ns, members, func(m string, pl Plan, known bool) (Plan, bool) {
		if !known || pl.Due.After(now) { // visited or claimed since we looked
			lost = append(lost, m)
			return pl, false
		}
		return pl.claimed(pol, now), true
	})
	if err != nil {
		return nil, err
	}
	var out []crawl.Input
	for _, m := range members {
		if !slices.Contains(lost, m) {
			out = append(out, InputOf(m))
		}
	}
	return out, nil
}

// Drop removes the plans of pages that are gone; a page found again starts afresh.
func (p *Planner) Drop(ctx context.Context, ns string, inputs []crawl.Input) error {
	var members []any
	for _, in := range inputs {
		members = append(members, Member(in))
		if old := givenMember(in); old != Member(in) {
			members = append(members, old)
		}
	}
	if err := p.rdb.ZRem(ctx, DueKey(ns), members...).Err(); err != nil {
		return fmt.Errorf("recrawl: drop %d plans of %s: %w", len(inputs), ns, err)
	}
	return nil
}

// Lookup returns the plan of the page an input revisits.
func (p *Planner) Lookup(ctx context.Context, ns string, in crawl.Input) (Plan, bool, error) {
	s, err := p.rdb.ZScore(ctx, DueKey(ns), Member(in)).Result()
	if old := givenMember(in); errors.Is(err, redis.Nil) && old != Member(in) {
		s, err = p.rdb.ZScore(ctx, DueKey(ns), old).Result()
	}
	if errors.Is(err, redis.Nil) {
		return Plan{}, false, nil
	}
	if err != nil {
		return Plan{}, false, fmt.Errorf("recrawl: plan of %s: %w", in.Describe(), err)
	}
	return Unpack(s), true, nil
}

// remember notes the namespace's policy for status.
func (p *Planner) remember(ctx context.Context, ns string, pol crawl.Recrawl) error {
	b, _ := json.Marshal(pol)
	if err := p.rdb.HSet(ctx, policiesKey, ns, b).Err(); err != nil {
		return fmt.Errorf("recrawl: note the policy of %s: %w", ns, err)
	}
	return nil
}

// Policies returns every namespace with plans and its policy.
func (p *Planner) Policies(ctx context.Context) (map[string]crawl.Recrawl, error) {
	all, err := p.rdb.HGetAll(ctx, policiesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("recrawl: policies: %w", err)
	}
	out := map[string]crawl.Recrawl{}
	for ns, s := range all {
		var pol crawl.Recrawl
		if json.Unmarshal([]byte(s), &pol) == nil {
			out[ns] = pol
		}
	}
	return out, nil
}
