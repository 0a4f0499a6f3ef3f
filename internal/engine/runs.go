package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// KnownSinks are the sink names chain files may use: the stores, and the resource pools
// a farming chain fills (pool:cookie …).
var KnownSinks = append([]string{"jsonl", "file", "kafka", "mongo", "es", "hbase"}, external.SinkNames()...)

// LoadChain validates and compiles a chain file's content; file names it in errors.
// sets are `--set` overrides (step.param=value or param=value).
func LoadChain(file string, data []byte, sets []string) (*crawl.Plan, error) {
	return LoadChainVars(file, data, sets, nil)
}

// LoadChainVars is LoadChain with the running stack's addresses for the file's
// `${name}` variables (endpoints.Endpoints.Vars).
func LoadChainVars(file string, data []byte, sets []string, vars map[string]string) (*crawl.Plan, error) {
	c, err := crawl.Load(file, data, crawl.LoadOptions{Sinks: KnownSinks, Sets: sets, Vars: vars})
	if err != nil {
		return nil, err
	}
	return c.Compile(nil)
}

// LoadChainFile is LoadChainVars for a chain read from the file at path: the files it
// names (a step's urls_file) are read relative to the chain file's directory.
func LoadChainFile(path string, data []byte, sets []string, vars map[string]string) (*crawl.Plan, error) {
	read := func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(path), name)
		}
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		// One byte more than allowed, so the loader sees the file is too large.
		return io.ReadAll(io.LimitReader(f, crawl.MaxURLsFile+1))
	}
	c, err := crawl.Load(path, data, crawl.LoadOptions{Sinks: KnownSinks, Sets: sets, Vars: vars, ReadFile: read})
	if err != nil {
		return nil, err
	}
	return c.Compile(nil)
}

// runMemo is what a run records about itself in Temporal's visibility store, so a
// listing can show and filter chain and tenant without reading every run's input.
func runMemo(p *crawl.Plan) map[string]any {
	m := map[string]any{"chain": p.Chain, "tenant": p.Tenant}
	if steps := renderSteps(p); steps != "" {
		m["render_steps"] = steps // status explains their batches waiting for a browser
	}
	return m
}

// RunInfo is one run in a listing.
type RunInfo struct {
	RunID   string    `json:"run_id"`
	Chain   string    `json:"chain"`
	Tenant  string    `json:"tenant,omitempty"`
	State   string    `json:"state"`
	Started time.Time `json:"started"`
	Closed  time.Time `json:"closed,omitzero"`
	// Paused is who paused a running run and since when; RerunOf the run whose failed
	// inputs it re-runs.
	Paused  *workflows.Pause `json:"paused,omitempty"`
	RerunOf string           `json:"rerun_of,omitempty"`
}

// ListOptions filter a run listing; empty fields match everything.
type ListOptions struct {
	Chain, Tenant, State string
	Limit                int // default 20
}

// runIDShape is the id Start gives a run: <chain>-<yyyymmdd>-<hhmmss>-<hex>.
var runIDShape = regexp.MustCompile(`^(.+)-\d{8}-\d{6}-[0-9a-f]{6}$`)

// ListRuns lists chain runs, newest first. Partitions (child workflows) are left out.
// Chain and tenant come from the run's memo; runs started before runs carried one get
// the chain from their id.
func ListRuns(ctx context.Context, c client.Client, o ListOptions) ([]RunInfo, error) {
	if o.Limit <= 0 {
		o.Limit = 20
	}
	var out []RunInfo
	var token []byte
	for pages := 0; pages < 20 && len(out) < o.Limit; pages++ {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s'", workflows.ChainWorkflowName),
			PageSize:      int32(max(o.Limit*4, 100)),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if strings.Contains(id, "/") || e.GetParentExecution() != nil { // partitions of a run
				continue
			}
			r := RunInfo{RunID: id, State: stateName(e.GetStatus()), Started: e.GetStartTime().AsTime()}
			if e.GetCloseTime() != nil {
				r.Closed = e.GetCloseTime().AsTime()
			}
			r.Chain, r.Tenant = MemoString(e.GetMemo(), "chain"), MemoString(e.GetMemo(), "tenant")
			r.RerunOf = MemoString(e.GetMemo(), MemoRerunOf)
			if r.State == "running" {
				r.Paused = PausedOf(e.GetMemo())
			}
			if m := runIDShape.FindStringSubmatch(id); r.Chain == "" && m != nil {
				r.Chain = m[1]
			}
			if (o.Chain != "" && r.Chain != o.Chain) || (o.Tenant != "" && r.Tenant != o.Tenant) || (o.State != "" && r.State != o.State) {
				continue
			}
			out = append(out, r)
			if len(out) == o.Limit {
				break
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	return out, nil
}

// MemoString reads a string field of a run's or a schedule's memo; "" when absent.
func MemoString(m *commonpb.Memo, name string) string {
	p, ok := m.GetFields()[name]
	if !ok {
		return ""
	}
	var s string
	if converter.GetDefaultDataConverter().FromPayload(p, &s) != nil {
		return ""
	}
	return s
}

// RunStates are the states a run can be in, as Status and RunInfo name them.
var RunStates = []string{"running", "completed", "failed", "canceled", "terminated", "timed_out", "continued"}

// RunOptions configure one chain run.
type RunOptions struct {
	TaskQueue string
	ID        string // workflow id; default <chain>-<time>-<random>
	Tuning    workflows.Tuning
	// Queue, when set, is the work the run starts from in place of the chain's start
	// inputs; RerunOf names the run it re-runs (see Rerun).
	Queue   []workflows.Pending
	RerunOf string
}

// MemoRerunOf is the memo field a run re-running another's failures names it in.
const MemoRerunOf = "rerun_of"

// Start starts a chain run and returns its run id (the root workflow id).
func Start(ctx context.Context, c client.Client, plan *crawl.Plan, o RunOptions) (string, error) {
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.DefaultTaskQueue
	}
	id := o.ID
	if id == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		id = fmt.Sprintf("%s-%s-%s", plan.Chain, time.Now().UTC().Format("20060102-150405"), hex.EncodeToString(b[:]))
	}
	in := workflows.ChainInput{RunID: id, Plan: *plan, TaskQueue: o.TaskQueue, Tuning: o.Tuning}
	memo := runMemo(plan)
	if o.Queue != nil {
		in.Queue, in.Seeded = o.Queue, true
	}
	if o.RerunOf != "" {
		memo[MemoRerunOf] = o.RerunOf
	}
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                o.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: 0,
		Memo:                     memo,
	}, workflows.ChainWorkflowName, in)
	if err != nil {
		return "", fmt.Errorf("start chain %s on Temporal: %w", plan.Chain, err)
	}
	return id, nil
}
