// Package monitor measures what workers do, for operators: Prometheus metrics (pages,
// items per sink, dedup verdicts, failures by cause, per-host fetch latency, backlog)
// on the default registry, and a few Redis records every worker writes so that
// `trawler status` can show rates and worker liveness across the whole fleet: pages per
// minute per tenant and chain, and each worker's last heartbeat.
package monitor

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/capacity"
)

// Metrics on the default Prometheus registry, served at /metrics by `trawler worker
// --metrics ADDR`, `trawler dev` and `trawler console`.
var (
	Pages = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_pages_total", Help: "Inputs a task processed successfully.",
	}, []string{"tenant", "chain", "step"})
	Items = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_items_total", Help: "Items written, per sink.",
	}, []string{"tenant", "chain", "sink"})
	Dedup = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_dedup_verdicts_total", Help: "Dedup verdicts: stored (new or changed) and unchanged.",
	}, []string{"tenant", "task", "verdict"})
	Failures = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_failures_total", Help: "Inputs given up on, by cause.",
	}, []string{"tenant", "chain", "cause"})
	Retries = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_retries_total", Help: "Failed attempts re-queued for another try, by cause.",
	}, []string{"tenant", "chain", "cause"})
	QuotaStops = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_quota_skipped_total", Help: "Inputs left unrun because a budget ran out.",
	}, []string{"tenant", "chain"})
	// RenderPages counts the pages of steps with `render:`, by how they were read:
	// rendered, or plain when `auto` found what it needed without a browser.
	RenderPages = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_render_pages_total", Help: "Pages of rendering steps, rendered in a browser or read plain (auto).",
	}, []string{"task", "how"})
	FetchSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "trawler_fetch_seconds", Help: "Time to fetch a page, per host.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"host"})
	Backlog = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trawler_backlog", Help: "Inputs queued or in flight in running chains.",
	}, []string{"tenant", "chain"})
	// Host budgets: labelled by outcome and status only, never by host, so a crawl over
	// a million hosts adds no series; per-host detail is in `trawler status`.
	HostWaitSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "trawler_host_wait_seconds", Help: "Time a request waited for its host's politeness budget, by outcome (granted, held, unavailable, canceled).",
		Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"outcome"})
	HostBackoffs = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_host_backoffs_total", Help: "Pauses of a host for every worker, by what caused them (429, 503, connection).",
	}, []string{"cause"})
)

// Batch records a finished batch in the metrics.
func Batch(b crawl.Batch, res crawl.BatchResult) {
	tenant := cmp.Or(b.Tenant, crawl.DefaultTenant)
	Pages.WithLabelValues(tenant, b.Chain, b.Step.ID).Add(float64(res.Pages))
	for _, sink := range b.Step.Store {
		Items.WithLabelValues(tenant, b.Chain, sink).Add(float64(res.Items))
	}
	if b.Step.Dedup != crawl.DedupOff {
		Dedup.WithLabelValues(tenant, b.Step.Task, "stored").Add(float64(res.Items))
		Dedup.WithLabelValues(tenant, b.Step.Task, "unchanged").Add(float64(res.Unchanged))
	}
	for _, f := range res.Failed {
		Failures.WithLabelValues(tenant, b.Chain, string(cmp.Or(f.Class, crawl.CauseOther))).Inc()
	}
	for _, w := range res.Retry {
		Retries.WithLabelValues(tenant, b.Chain, string(cmp.Or(w.Class, crawl.CauseOther))).Inc()
	}
	if res.QuotaSkipped > 0 {
		QuotaStops.WithLabelValues(tenant, b.Chain).Add(float64(res.QuotaSkipped))
	}
}

// Recorder writes the fleet-wide records of one worker into Redis.
type Recorder struct {
	rdb redis.UniversalClient
	now func() time.Time

	mu sync.Mutex
	// listed holds when this recorder last added a task to the task list, and expiring
	// when it set a rate counter's expiry: each takes a command now and then, not once per
	// batch. A task is listed again every relist, in case Redis lost the list.
	listed   map[string]time.Time
	expiring map[string]time.Time
}

const relist = 10 * time.Minute

// NewRecorder returns a recorder over rdb.
func NewRecorder(rdb redis.UniversalClient) *Recorder {
	return &Recorder{rdb: rdb, now: time.Now, listed: map[string]time.Time{}, expiring: map[string]time.Time{}}
}

// due reports whether key was not noted in set within every, and notes it now; a set
// past 10,000 keys (a long-lived worker's old minutes) starts over.
func (r *Recorder) due(set map[string]time.Time, key string, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if at, ok := set[key]; ok && now.Sub(at) < every {
		return false
	}
	if len(set) > 10_000 {
		clear(set)
	}
	set[key] = now
	return true
}

// forget drops a note of due whose command failed, so the next batch sends it again.
func (r *Recorder) forget(set map[string]time.Time, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(set, key)
}

// rateKey counts pages of a tenant's chain in one minute.
func rateKey(tenant, chain string, minute int64) string {
	return fmt.Sprintf("trawler:rate:%s:%s:%d", tenant, chain, minute)
}

const workersKey = "trawler:workers"

// Pages adds a batch's pages to its chain's per-minute counter.
func (r *Recorder) Pages(ctx context.Context, tenant, chain string, pages int) error {
	if pages == 0 {
		return nil
	}
	key := rateKey(cmp.Or(tenant, crawl.DefaultTenant), chain, r.now().Unix()/60)
	if !r.due(r.expiring, key, time.Hour) {
		return r.rdb.IncrBy(ctx, key, int64(pages)).Err()
	}
	pipe := r.rdb.Pipeline()
	pipe.IncrBy(ctx, key, int64(pages))
	pipe.Expire(ctx, key, time.Hour)
	if _, err := pipe.Exec(ctx); err != nil {
		r.forget(r.expiring, key)
		return err
	}
	return nil
}

// PerMinute is a chain's pages in the last full minute.
func (r *Recorder) PerMinute(ctx context.Context, tenant, chain string) (int, error) {
	n, err := r.rdb.Get(ctx, rateKey(tenant, chain, r.now().Unix()/60-1)).Int()
	if err == redis.Nil {
		return 0, nil
	}
	return n, err
}

// WorkerBeat is one worker's last sign of life.
type WorkerBeat struct {
	Identity  string   `json:"identity"`
	TaskQueue string   `json:"task_queue"`
	Sites     []string `json:"sites,omitempty"` // site queues it polls (its probes pass)
	// Tasks are the tasks it runs; absent from workers that do not say (any task).
	Tasks []string `json:"tasks,omitempty"`
	// Capacity is the CPU and memory the worker places batches in, and its batch
	// slots (see internal/capacity); absent from workers that do not say.
	Capacity *capacity.Resources `json:"capacity,omitempty"`
	Slots    int                 `json:"slots,omitempty"`
	At       time.Time           `json:"at"`
	AgeS     float64             `json:"age_s"`
}

// Beat records that a worker is alive, with its capacity. Workers beat every few
// seconds; status shows the age of each one's last beat, so a stuck or dead worker
// stands out.
func (r *Recorder) Beat(ctx context.Context, identity, queue string, sites, tasks []string, capa *capacity.Resources, slots int) error {
	b, _ := json.Marshal(WorkerBeat{Identity: identity, TaskQueue: queue, Sites: sites, Tasks: tasks, Capacity: capa, Slots: slots, At: r.now().UTC()})
	return r.rdb.HSet(ctx, workersKey, beatField(identity, queue), b).Err()
}

// Forget removes a worker that stopped cleanly.
func (r *Recorder) Forget(ctx context.Context, identity, queue string) error {
	return r.rdb.HDel(ctx, workersKey, beatField(identity, queue)).Err()
}

// beatField names one worker: several workers of one process (one identity) poll
// different task queues, and one stopping must not hide the others.
func beatField(identity, queue string) string {
	return identity + " " + queue
}

// Workers lists the workers' last beats, oldest first; beats older than a day are
// dropped from the list.
func (r *Recorder) Workers(ctx context.Context) ([]WorkerBeat, error) {
	all, err := r.rdb.HGetAll(ctx, workersKey).Result()
	if err != nil {
		return nil, err
	}
	var out []WorkerBeat
	for id, v := range all {
		var b WorkerBeat
		if json.Unmarshal([]byte(v), &b) != nil {
			continue
		}
		b.AgeS = math.Round(r.now().Sub(b.At).Seconds()*10) / 10
		if b.AgeS > 86400 {
			_ = r.rdb.HDel(ctx, workersKey, id).Err()
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgeS > out[j].AgeS })
	return out, nil
}

// TaskNeeds are what one input of a task costs, as running averages over its recent
// batches on every worker: wall time, bytes fetched (bandwidth) and CPU time (the
// worker's CPU during the batch, shared out between the batches running with it — an
// estimate).
type TaskNeeds struct {
	Task      string  `json:"task"`
	MSPerPage float64 `json:"ms_per_page"`
	KBPerPage float64 `json:"kb_per_page"`
	CPUMSPage float64 `json:"cpu_ms_per_page"`
	Pages     float64 `json:"weight"` // the decayed number of pages the averages stand on
}

// taskKey holds a task's decayed sums: pages, ms, bytes, cpu_ms.
func taskKey(task string) string { return "trawler:task:" + task }

const tasksKey = "trawler:tasks"

// decay weighs the past: every batch multiplies the sums by it before adding its own,
// so the averages follow a site that gets slower or heavier within ~50 batches.
var addCost = redis.NewScript(`
local names = {'pages', 'ms', 'bytes', 'cpu_ms'}
local old = redis.call('HMGET', KEYS[1], unpack(names))
local new = {}
for i, name in ipairs(names) do
  new[#new+1] = name
  new[#new+1] = tostring((tonumber(old[i]) or 0) * 0.98 + tonumber(ARGV[i]))
end
redis.call('HSET', KEYS[1], unpack(new))
return 1
`)

// ForgetNeeds drops what was learned of a task, so its needs are learned anew from the
// next batches (after a site was rebuilt, say).
func (r *Recorder) ForgetNeeds(ctx context.Context, task string) error {
	return r.rdb.Del(ctx, taskKey(task)).Err()
}

// TaskCost adds a batch's cost to its task's running averages.
func (r *Recorder) TaskCost(ctx context.Context, task string, pages int, wall, cpu time.Duration, bytes int64) error {
	if pages == 0 {
		return nil
	}
	// The script touches the task's own key only, and the task joins the list apart,
	// so the two need not share a Redis Cluster slot.
	if err := addCost.Run(ctx, r.rdb, []string{taskKey(task)}, pages, wall.Milliseconds(), bytes, cpu.Milliseconds()).Err(); err != nil {
		return err
	}
	if !r.due(r.listed, task, relist) {
		return nil
	}
	if err := r.rdb.SAdd(ctx, tasksKey, task).Err(); err != nil {
		r.forget(r.listed, task)
		return err
	}
	return nil
}

// Needs reads every task's running averages, by task name.
func (r *Recorder) Needs(ctx context.Context) ([]TaskNeeds, error) {
	tasks, err := r.rdb.SMembers(ctx, tasksKey).Result()
	if err != nil {
		return nil, err
	}
	sort.Strings(tasks)
	var out []TaskNeeds
	for _, task := range tasks {
		v, err := r.rdb.HGetAll(ctx, taskKey(task)).Result()
		if err != nil {
			return nil, err
		}
		f := func(k string) float64 { x, _ := strconv.ParseFloat(v[k], 64); return x }
		pages := f("pages")
		if pages <= 0 {
			continue
		}
		round := func(x float64) float64 { return math.Round(x*10) / 10 }
		out = append(out, TaskNeeds{Task: task, Pages: round(pages), MSPerPage: round(f("ms") / pages),
			KBPerPage: round(f("bytes") / 1024 / pages), CPUMSPage: round(f("cpu_ms") / pages)})
	}
	return out, nil
}
