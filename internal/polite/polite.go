// Package polite keeps the fleet's host budgets in Redis, so every worker of a fleet
// holds a host to one limit: the limit a site sees is the limit declared, whether one
// worker or fifty fetch from it. It implements fetch.Budgets and fetch.RobotsStore.
//
// Each budget (a host, a domain or an address) lives in one Redis Cluster slot (its key
// is the hash tag of its Redis keys):
//
//	trawler:polite:{KEY}:slots  sorted set: one member per request in flight, scored
//	                            by when its lease ends, so a dead worker's slots expire
//	trawler:polite:{KEY}:st     hash: the next start (GCRA's theoretical arrival time),
//	                            the pause and its reason, the limit last applied and
//	                            its source, a decaying count of starts (the rate)
//
// One Lua script takes a slot and a start time at once, on Redis's clock, so workers'
// clocks do not matter. A worker keeps a slot it got for reuseWindow and hands it to
// its own next request to the host (only for budgets without a pace), so a busy host
// with a generous limit costs about two Redis calls a second per slot, not two per
// page. Pauses are also published, so workers that reuse slots learn of one within a
// round trip.
package polite

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

const (
	prefix      = "trawler:polite:"
	hostsKey    = prefix + "hosts" // sorted set of budget keys by last use (ms), for status
	pauseTopic  = prefix + "pause"
	robotsKey   = "trawler:robots:"
	reuseWindow = time.Second
	// idleHold is how long a slot waits for this worker's next request before it goes
	// back to the fleet.
	idleHold = 50 * time.Millisecond
	// pollEvery is how often a worker asks again for a full host's slot.
	pollEvery = 20 * time.Millisecond
	stateTTL  = 24 * time.Hour
	listEvery = 10 * time.Second
	maxHosts  = 5000 // the hosts index keeps the newest this many
	// dependency names the outage in run status.
	dependency = "redis (politeness)"
)

var (
	//go:embed take.lua
	takeSrc    string
	takeScript = redis.NewScript(takeSrc)
	//go:embed give.lua
	giveSrc    string
	giveScript = redis.NewScript(giveSrc)
	//go:embed pause.lua
	pauseSrc    string
	pauseScript = redis.NewScript(pauseSrc)
)

// Fleet is the fleet's host budgets in one Redis (or Redis Cluster).
type Fleet struct {
	rdb    redis.UniversalClient
	id     string // this worker's prefix of slot tokens
	seq    atomic.Uint64
	cancel context.CancelFunc

	mu   sync.Mutex
	keys map[string]*budget
}

// budget is what this worker knows and holds of one budget.
type budget struct {
	slots string // Redis keys
	state string

	gate    chan struct{} // held by the one goroutine asking Redis for a slot
	mu      sync.Mutex
	idle    []*lease      // slots this worker holds and no request uses
	wake    chan struct{} // closed and replaced when a slot becomes idle
	waiting int           // requests of this worker waiting for a slot
	urgent  int           // urgent ones among them (fetch.Budget.Urgent)
	// held counts the slots this worker holds, in use or idle: while they are all of
	// the budget's, only one of them can come free, so no one asks Redis for a slot.
	held   int
	until  time.Time // paused until (local clock), as last heard
	reason string
	listed time.Time
	used   time.Time
}

type lease struct {
	token      string
	reuseUntil time.Time
	leaseEnd   time.Time // when Redis lets the slot go (as this worker's clock sees it)
	interval   bool      // the budget has a pace: every start goes through Redis
	uncounted  int       // starts on the slot Redis has not counted yet
	idled      int       // times released idle (budget.mu): a hold ends only its own idle spell
}

// New returns the budgets kept in rdb. Close stops listening for pauses.
func New(rdb redis.UniversalClient, worker string) *Fleet {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{rdb: rdb, id: worker + "/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/", cancel: cancel, keys: map[string]*budget{}}
	go f.listen(ctx)
	go f.sweep(ctx)
	return f
}

// Close stops the Fleet's background work; slots still held expire with their leases.
func (f *Fleet) Close() { f.cancel() }

var _ fetch.Budgets = (*Fleet)(nil)

// tag makes a budget key safe as a Redis Cluster hash tag.
func tag(key string) string {
	return strings.NewReplacer("{", "%7B", "}", "%7D").Replace(key)
}

func keysOf(key string) (slots, state string) {
	base := prefix + "{" + tag(key) + "}"
	return base + ":slots", base + ":st"
}

func (f *Fleet) budget(key string) *budget {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.keys[key]
	if b == nil {
		slots, state := keysOf(key)
		b = &budget{slots: slots, state: state, gate: make(chan struct{}, 1), wake: make(chan struct{})}
		f.keys[key] = b
	}
	b.used = time.Now()
	return b
}

// Take implements fetch.Budgets.
func (f *Fleet) Take(ctx context.Context, bud fetch.Budget) (func(), error) {
	b := f.budget(bud.Key)
	b.mu.Lock()
	b.waiting++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
	}()
	deadline, hasDeadline := ctx.Deadline()
	yieldUntil := time.Now().Add(fetch.UrgentYield)
	// An urgent request is counted in b.urgent until it has a slot: meanwhile the others
	// leave the idle slots and the gate to it.
	waits := false
	stopWaiting := func() {
		if waits {
			waits = false
			b.mu.Lock()
			b.urgent--
			b.wakeAll()
			b.mu.Unlock()
		}
	}
	defer stopWaiting()
	for {
		b.mu.Lock()
		now := time.Now()
		if now.Before(b.until) {
			until, reason := b.until, b.reason
			b.mu.Unlock()
			if until.Sub(now) > bud.PauseWait || hasDeadline && deadline.Before(until) {
				return nil, &crawl.HeldError{Host: bud.Key, Wait: until.Sub(now), Reason: reason}
			}
			if err := fetch.Sleep(ctx, until.Sub(now)); err != nil {
				return nil, err
			}
			continue
		}
		yields := !bud.Urgent && b.urgent > 0 && now.Before(yieldUntil)
		var l *lease
		var stale []*lease
		if !yields {
			l, stale = b.reusable(now, bud)
		}
		if l == nil && bud.Urgent && !waits {
			waits = true
			b.urgent++
		}
		full := b.held >= max(bud.Concurrency, 1)
		wake := b.wake
		b.mu.Unlock()
		for _, s := range stale {
			go f.give(b, s)
		}
		if l != nil {
			stopWaiting()
			return f.releaser(b, l), nil
		}
		gate := b.gate
		var yielded <-chan time.Time // when it stops yielding to urgent requests
		if yields {
			gate = nil // waits for the urgent requests to be served
			yielded = time.After(time.Until(yieldUntil))
		}
		if full {
			gate = nil // waits for a slot of this worker's
		}
		select {
		case gate <- struct{}{}:
		case <-wake:
			continue
		case <-yielded:
			continue
		case <-ctx.Done():
			return nil, bud.Ended(ctx, "no slot came free before the input's deadline")
		}
		// A budget without a pace lets the one asking take a slot for each request of
		// this worker waiting for one, in one call: the others reuse them.
		want := 1
		if bud.Interval == 0 {
			b.mu.Lock()
			want = min(max(b.waiting, 1), max(bud.Concurrency, 1))
			b.mu.Unlock()
		}
		ls, wait, why, reason, err := f.take(ctx, b, bud, deadline, hasDeadline, want)
		if len(ls) > 0 || err != nil || why != "slots" {
			<-b.gate
		}
		switch {
		case err != nil:
			return nil, err
		case len(ls) > 0:
			l := ls[0]
			for _, x := range ls[1:] {
				f.keepIdle(b, x)
			}
			stopWaiting()
			if err := fetch.Sleep(ctx, wait); err != nil {
				f.give(b, l)
				return nil, err
			}
			// A pause heard while it waited for its turn holds this request too: the
			// turn was granted before the host asked every worker to wait.
			b.mu.Lock()
			paused := time.Now().Before(b.until)
			b.mu.Unlock()
			if paused {
				f.give(b, l)
				continue
			}
			return f.releaser(b, l), nil
		case why == "pause":
			b.mu.Lock()
			if until := time.Now().Add(wait); until.After(b.until) {
				b.until, b.reason = until, reason
			}
			b.mu.Unlock()
		case why == "turn":
			return nil, &crawl.HeldError{Host: bud.Key, Wait: wait, Reason: "its turn to start comes after the input's deadline (one start every " + bud.Interval.Round(time.Millisecond).String() + ", from " + bud.Source + ")"}
		case why == "slots":
			// This goroutine keeps the gate while it polls, so one request per worker
			// asks Redis; the others wait here for it or for a slot this worker frees
			// (an urgent one too: the others leave that slot to it).
			var err error
			if bud.Urgent {
				err = sleepOrWake(ctx, min(wait, pollEvery), wake)
			} else {
				err = fetch.Sleep(ctx, min(wait, pollEvery))
			}
			<-b.gate
			if err != nil {
				return nil, bud.Ended(ctx, fmt.Sprintf("no slot came free before the input's deadline (%d at a time across the fleet)", bud.Concurrency))
			}
		}
	}
}

// wakeAll wakes the requests of this worker waiting on the budget, to look again; b.mu
// held. With none waiting there is no one to wake: a request that comes later looks at
// the budget first (most releases of a busy host's slots meet none).
func (b *budget) wakeAll() {
	if b.waiting == 0 {
		return
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

// sleepOrWake sleeps for d, or until wake is closed (a slot of this worker came free).
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// reusable pops a slot this worker holds idle, when the budget allows reuse, and the
// idle slots that may no longer be reused (to give back); b.mu held.
func (b *budget) reusable(now time.Time, bud fetch.Budget) (use *lease, stale []*lease) {
	for len(b.idle) > 0 {
		l := b.idle[len(b.idle)-1]
		b.idle = b.idle[:len(b.idle)-1]
		// Reused only while its lease outlasts this request's life too: a lease that ran
		// out mid-request would let another worker take the slot.
		if bud.Interval == 0 && !l.interval && now.Before(l.reuseUntil) && !now.Add(bud.Lease).After(l.leaseEnd) {
			l.uncounted++
			return l, stale
		}
		stale = append(stale, l)
	}
	return nil, stale
}

// take asks Redis for up to want slots and a start time; it returns the leases and how
// long to wait for the start, or why not (pause, slots, turn) and for how long.
func (f *Fleet) take(ctx context.Context, b *budget, bud fetch.Budget, deadline time.Time, hasDeadline bool, want int) ([]*lease, time.Duration, string, string, error) {
	maxWait := int64(1) << 50
	if hasDeadline {
		maxWait = max(time.Until(deadline).Microseconds(), 0)
	}
	token := f.id + strconv.FormatUint(f.seq.Add(1), 36)
	conc := max(bud.Concurrency, 1)
	// A slot this worker may reuse is leased for the reuse window too, so a request
	// that reuses it within the window is covered to its end (see reusable).
	leaseFor := bud.Lease
	if bud.Interval == 0 {
		leaseFor += reuseWindow
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := takeScript.Run(rctx, f.rdb, []string{b.slots, b.state}, token, conc,
		bud.Interval.Microseconds(), bud.DrawJitter().Microseconds(), leaseFor.Microseconds(), maxWait, bud.Source, want).Slice()
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, "", "", bud.Ended(ctx, "waiting for Redis")
		}
		return nil, 0, "", "", crawl.Dependency(dependency, fmt.Errorf("take a slot of %s: %w", bud.Key, err))
	}
	granted, _ := res[0].(int64)
	waitUs, _ := res[1].(int64)
	why, _ := res[2].(string)
	reason, _ := res[3].(string)
	wait := time.Duration(max(waitUs, 0)) * time.Microsecond
	if granted > 0 {
		f.list(b, bud.Key)
		b.mu.Lock()
		b.held += int(granted)
		b.mu.Unlock()
		now := time.Now()
		ls := make([]*lease, granted)
		for i := range ls {
			t := token
			if i > 0 {
				t += "." + strconv.Itoa(i+1)
			}
			ls[i] = &lease{token: t, reuseUntil: now.Add(reuseWindow), leaseEnd: now.Add(wait + leaseFor), interval: bud.Interval > 0}
		}
		return ls, wait, "", "", nil
	}
	return nil, wait, why, reason, nil
}

// list records the budget in the hosts index, now and then.
func (f *Fleet) list(b *budget, key string) {
	b.mu.Lock()
	due := time.Since(b.listed) > listEvery
	if due {
		b.listed = time.Now()
	}
	b.mu.Unlock()
	if !due {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.rdb.ZAdd(ctx, hostsKey, redis.Z{Score: float64(time.Now().UnixMilli()), Member: key})
		f.rdb.ZRemRangeByRank(ctx, hostsKey, 0, -maxHosts-1)
	}()
}

// releaser returns the function that ends a request's use of l: the slot waits idleHold
// for this worker's next request to the host, else goes back to the fleet. It waits
// even when no request of this worker waits yet: a batch's next request to the host
// usually comes a moment after the last one ended (it parses the page first), and
// giving the slot back and taking another would cost two Redis calls per page
// (`trawler bench polite` measured 1.7 calls and 12% more CPU per page; now 0.1–0.2).
func (f *Fleet) releaser(b *budget, l *lease) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			keep := !l.interval && time.Now().Before(l.reuseUntil) && !time.Now().Before(b.until)
			b.mu.Unlock()
			if keep {
				f.keepIdle(b, l)
				return
			}
			f.give(b, l)
		})
	}
}

// keepIdle keeps l idle for idleHold, for this worker's next request to the host, and
// wakes those waiting for a slot.
func (f *Fleet) keepIdle(b *budget, l *lease) {
	b.mu.Lock()
	b.idle = append(b.idle, l)
	l.idled++
	spell := l.idled
	b.wakeAll()
	b.mu.Unlock()
	time.AfterFunc(idleHold, func() { f.giveIdle(b, l, spell) })
}

// giveIdle gives l back to the fleet if it has stayed idle since its release number
// spell: a slot reused and released again in the meantime gets its own full hold.
func (f *Fleet) giveIdle(b *budget, l *lease, spell int) {
	b.mu.Lock()
	for i, x := range b.idle {
		if x == l && l.idled == spell {
			b.idle = append(b.idle[:i], b.idle[i+1:]...)
			b.mu.Unlock()
			f.give(b, l)
			return
		}
	}
	b.mu.Unlock()
}

// give returns l's slot to the fleet, counting its starts; if Redis cannot be reached
// the slot comes back when its lease ends.
func (f *Fleet) give(b *budget, l *lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = giveScript.Run(ctx, f.rdb, []string{b.slots, b.state}, l.token, l.uncounted).Err()
	b.mu.Lock()
	b.held--
	b.wakeAll() // those waiting for a slot of this worker's ask Redis now
	b.mu.Unlock()
}

// Pause implements fetch.Budgets: the pause is kept in the budget's state, where every
// worker's next take meets it, and published to the workers reusing slots.
func (f *Fleet) Pause(ctx context.Context, key string, until time.Time, reason string) error {
	b := f.budget(key)
	d := time.Until(until)
	b.mu.Lock()
	if until.After(b.until) {
		b.until, b.reason = until, reason
	}
	b.mu.Unlock()
	if err := pauseScript.Run(ctx, f.rdb, []string{b.state}, d.Microseconds(), reason, stateTTL.Milliseconds()).Err(); err != nil {
		return crawl.Dependency(dependency, err)
	}
	return f.rdb.Publish(ctx, pauseTopic, key+"\x00"+strconv.FormatInt(d.Microseconds(), 10)+"\x00"+reason).Err()
}

// listen applies the pauses other workers publish, until ctx ends.
func (f *Fleet) listen(ctx context.Context) {
	sub := f.rdb.Subscribe(ctx, pauseTopic)
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			parts := strings.SplitN(m.Payload, "\x00", 3)
			if len(parts) != 3 {
				continue
			}
			us, err := strconv.ParseInt(parts[1], 10, 64)
			if err != nil {
				continue
			}
			b := f.budget(parts[0])
			until := time.Now().Add(time.Duration(us) * time.Microsecond)
			b.mu.Lock()
			if until.After(b.until) {
				b.until, b.reason = until, parts[2]
			}
			b.mu.Unlock()
		}
	}
}

// sweep forgets budgets nobody used for a while.
func (f *Fleet) sweep(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		for k, b := range f.keys {
			b.mu.Lock()
			unused := len(b.idle) == 0 && b.waiting == 0 && time.Since(b.used) > 10*time.Minute && time.Now().After(b.until)
			b.mu.Unlock()
			if unused {
				delete(f.keys, k)
			}
		}
		f.mu.Unlock()
	}
}
