// Package affinity lets work land where it runs well. A step with an `affinity:` sends
// its batches to its site's own task queue ("<queue>@<site>"); every worker probes each
// site it has been told about — one fetch of the site's probe URL, timed — and polls
// the site's queue only while the probe meets the site's thresholds. Runs tell the
// workers about their sites through a registry in Redis.
package affinity

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Site is one site queue and the thresholds a worker must meet to poll it.
type Site struct {
	crawl.SiteQueue           // "<base queue>@<site>" and its thresholds
	Until           time.Time `json:"until"` // registrations expire unless a run renews them
}

// key holds the registered sites: queue → Site as JSON.
const key = "trawler:sites"

// Registry is the set of site queues runs have asked for.
type Registry struct{ rdb redis.UniversalClient }

// NewRegistry returns the registry kept in rdb.
func NewRegistry(rdb redis.UniversalClient) *Registry { return &Registry{rdb: rdb} }

// Register records sites for a day (runs renew it each time they start or continue).
func (r *Registry) Register(ctx context.Context, sites []Site) error {
	vals := make([]any, 0, 2*len(sites))
	for _, s := range sites {
		s.Until = time.Now().Add(24 * time.Hour).UTC()
		b, _ := json.Marshal(s)
		vals = append(vals, s.Queue, b)
	}
	if len(vals) == 0 {
		return nil
	}
	if err := r.rdb.HSet(ctx, key, vals...).Err(); err != nil {
		return fmt.Errorf("register site queues: %w", err)
	}
	return nil
}

// Sites lists the unexpired site queues of a base task queue, by queue name.
func (r *Registry) Sites(ctx context.Context, base string) ([]Site, error) {
	all, err := r.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("read site queues: %w", err)
	}
	var out []Site
	for q, v := range all {
		var s Site
		if !strings.HasPrefix(q, base+"@") || json.Unmarshal([]byte(v), &s) != nil || time.Now().After(s.Until) {
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

// Result is one probe of a site.
type Result struct {
	Latency time.Duration `json:"latency"`
	KBps    float64       `json:"kbps"`
	OK      bool          `json:"ok"`
	Reason  string        `json:"reason,omitempty"` // why not OK
}

// Probe fetches the site's probe URL once and judges it against the thresholds. The
// request names the worker in X-Trawler-Worker, so a site (or a test) can tell who asks.
func Probe(ctx context.Context, hc *http.Client, s Site, worker string) Result {
	limit := s.MaxLatency
	if limit <= 0 {
		limit = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, 2*limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Probe, nil)
	if err != nil {
		return Result{Reason: fmt.Sprintf("probe %s: %v", s.Probe, err)}
	}
	req.Header.Set("X-Trawler-Worker", worker)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return Result{Latency: time.Since(start), Reason: fmt.Sprintf("probe %s: %v", s.Probe, err)}
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<20))
	took := time.Since(start)
	res := Result{Latency: took, KBps: float64(n) / 1024 / max(took.Seconds(), 1e-6)}
	switch {
	case err != nil:
		res.Reason = fmt.Sprintf("probe %s: reading the body: %v", s.Probe, err)
	case resp.StatusCode >= 400:
		res.Reason = fmt.Sprintf("probe %s answered HTTP %d", s.Probe, resp.StatusCode)
	case s.MaxLatency > 0 && took > s.MaxLatency:
		res.Reason = fmt.Sprintf("probe %s took %s, over max_latency %s", s.Probe, took.Round(time.Millisecond), s.MaxLatency)
	case s.MinKBps > 0 && res.KBps < float64(s.MinKBps):
		res.Reason = fmt.Sprintf("probe %s came at %.0f KB/s, under min_kbps %d", s.Probe, res.KBps, s.MinKBps)
	default:
		res.OK = true
	}
	return res
}
