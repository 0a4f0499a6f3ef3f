package recrawl

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Stats is what status shows of one recrawl namespace.
type Stats struct {
	Namespace string        `json:"namespace"`
	Policy    crawl.Recrawl `json:"policy"`
	Pages     int           `json:"pages"`  // pages with a plan
	Due       int           `json:"due"`    // due now, not claimed
	Leased    int           `json:"leased"` // claimed by a run, not visited yet
	// Intervals counts pages by planned interval, one bucket per bound in
	// IntervalBounds (the last holds everything longer).
	Intervals []IntervalCount `json:"intervals"`
	// Late is the estimated share of changes seen more than min after they happen:
	// each page's 1 − min/interval, weighed by its estimated change rate.
	Late float64 `json:"late"`
	// ChangesPerHour is the estimated changes per hour over all pages.
	ChangesPerHour float64 `json:"changes_per_hour"`
	// VisitsPerHour is the visits per hour the plans ask for.
	VisitsPerHour float64 `json:"visits_per_hour"`
}

// IntervalCount is how many pages are planned at most Upto apart ("" = longer).
type IntervalCount struct {
	Upto  string `json:"upto"`
	Pages int    `json:"pages"`
}

// IntervalBounds are the interval buckets of Stats.
var IntervalBounds = []time.Duration{15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// Stats reads every plan of every namespace (in pages of 10,000 entries).
func (p *Planner) Stats(ctx context.Context) ([]Stats, error) {
	pols, err := p.Policies(ctx)
	if err != nil {
		return nil, err
	}
	var out []Stats
	for ns, pol := range pols {
		st, err := p.stats(ctx, ns, pol)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, nil
}

func (p *Planner) stats(ctx context.Context, ns string, pol crawl.Recrawl) (Stats, error) {
	st := Stats{Namespace: ns, Policy: pol}
	counts := make([]int, len(IntervalBounds)+1)
	now := p.now()
	var lateRate float64
	const page = 10000
	for start := int64(0); ; start += page {
		zs, err := p.rdb.ZRangeWithScores(ctx, DueKey(ns), start, start+page-1).Result()
		if err != nil {
			return st, fmt.Errorf("recrawl: plans of %s: %w", ns, err)
		}
		for _, z := range zs {
			pl := Unpack(z.Score)
			st.Pages++
			switch {
			case pl.Leased:
				st.Leased++
			case !pl.Due.After(now):
				st.Due++
			}
			iv := pl.Interval(pol)
			k := sort.Search(len(IntervalBounds), func(i int) bool { return iv <= IntervalBounds[i] })
			counts[k]++
			rate := pl.Rate(pol)
			st.ChangesPerHour += rate
			lateRate += rate * pl.Late(pol)
			st.VisitsPerHour += float64(time.Hour) / float64(iv)
		}
		if len(zs) < page {
			break
		}
	}
	if st.ChangesPerHour > 0 {
		st.Late = lateRate / st.ChangesPerHour
	}
	for i, n := range counts {
		upto := ""
		if i < len(IntervalBounds) {
			upto = crawl.FormatDuration(IntervalBounds[i])
		}
		st.Intervals = append(st.Intervals, IntervalCount{Upto: upto, Pages: n})
	}
	return st, nil
}

// Bytes is the memory Redis reports for a namespace's plans (MEMORY USAGE, all
// entries sampled); servers without the command (miniredis) give an error.
func (p *Planner) Bytes(ctx context.Context, ns string) (int64, error) {
	return p.rdb.MemoryUsage(ctx, DueKey(ns), 0).Result()
}

// Forget drops a namespace's plans and policy.
func (p *Planner) Forget(ctx context.Context, ns string) error {
	_, err := p.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Del(ctx, DueKey(ns))
		pipe.HDel(ctx, policiesKey, ns)
		return nil
	})
	return err
}
