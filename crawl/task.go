// Package crawl is the kernel every other Trawler package speaks: tasks, their inputs and
// items, the registry that names them, and chain specs. It performs no I/O of its own;
// everything a task needs from the outside world reaches it through Env.
package crawl

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Task is one per-site crawl step, such as "hackernews.item". A task is pure logic over
// an Input: it fetches through env.Fetch, parses, and returns the items to store and the
// inputs for downstream steps. Timeouts, retries, batching and storage are the engine's job.
type Task interface {
	Spec() TaskSpec
	Run(ctx context.Context, env *Env, in Input) (Result, error)
}

// TaskFunc adapts a spec and a function into a Task, so a small site needs no types.
func TaskFunc(spec TaskSpec, run func(ctx context.Context, env *Env, in Input) (Result, error)) Task {
	return funcTask{spec: spec, run: run}
}

// PreparedTaskFunc is TaskFunc with a Prepare step: prepare compiles a step's params once
// per batch (selectors, patterns, templates) into Env.Prepared; its error fails the batch's
// inputs as permanent (see Preparer).
func PreparedTaskFunc(spec TaskSpec, prepare func(Params) (any, error), run func(ctx context.Context, env *Env, in Input) (Result, error)) Task {
	return preparedFuncTask{funcTask{spec: spec, run: run}, prepare}
}

type preparedFuncTask struct {
	funcTask
	prepare func(Params) (any, error)
}

func (t preparedFuncTask) Prepare(p Params) (any, error) { return t.prepare(p) }

type funcTask struct {
	spec TaskSpec
	run  func(ctx context.Context, env *Env, in Input) (Result, error)
}

func (t funcTask) Spec() TaskSpec { return t.spec }
func (t funcTask) Run(ctx context.Context, env *Env, in Input) (Result, error) {
	return t.run(ctx, env, in)
}

// TaskSpec is what a task declares about itself. The chain validator checks chain files
// against it, and the engine uses its defaults when a chain does not override them.
type TaskSpec struct {
	Name    string  // "site.task"
	Doc     string  // one line shown by `trawler validate` and `trawler tasks`
	Params  []Param // parameters a chain step may set
	Output  []Field // the schema of Item.Data
	Timeout time.Duration
	Retries int
	// RateLimit is requests per second per host (0: the fetcher's default);
	// HostConcurrency bounds parallel requests per host (0: the fetcher's default).
	RateLimit       float64
	HostConcurrency int
	// HTML says the task reads HTML pages, so a step may render them in a browser
	// first (`render:`).
	HTML bool
	// Login says the task logs in in a browser (generic.login): its step must render,
	// and every fill of its render.actions types a declared secret, so no credential is
	// written in a chain file.
	Login bool
	// Needs lists external resources (proxy, user_agent, cookie, device_id, sign).
	Needs []string
	// Check, when set, validates a step's params beyond their types (compiles selectors,
	// paths, patterns) so `trawler validate` catches mistakes before a run. It gets the
	// params with defaults applied and returns one error per problem, each naming the
	// param and the fix.
	Check func(p Params) []error
	// Seeds, when set, splits a root step's start into one input per start URL (from
	// the params with defaults applied), so one bad URL fails alone and its siblings
	// are fetched and stored whatever it does. Nil: a root step starts from one empty
	// input.
	Seeds func(p Params) []Input
	// Schema, when set, is the item schema of one step from its params: the task is
	// config-driven (its items are whatever the chain file's `fields:` map), so each step
	// running it stores under a biz of its own (see Step.Biz) with this schema.
	Schema func(p Params) []Field
}

// Type is the type of a param or an output field.
type Type string

const (
	String Type = "string"
	Int    Type = "int"
	Float  Type = "float"
	Bool   Type = "bool"
	Time   Type = "time"
	URL    Type = "url"
	List   Type = "list"
	Object Type = "object"
)

// Param is a declared task parameter.
type Param struct {
	Name     string
	Type     Type
	Default  any
	Required bool
	Doc      string
}

// Field is a declared output field of a task's items.
type Field struct {
	Name string
	Type Type
	Doc  string
}

// Field returns the declared output field with this name.
func (s TaskSpec) Field(name string) (Field, bool) {
	for _, f := range s.Output {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Param returns the declared param with this name.
func (s TaskSpec) Param(name string) (Param, bool) {
	for _, p := range s.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Site is the part of the name before the dot ("hackernews" in "hackernews.item").
func (s TaskSpec) Site() string { site, _, _ := strings.Cut(s.Name, "."); return site }

// Input is one unit of work for a task. Inputs travel through workflow history, so they
// stay small: a URL, a value fanned out of a list field, or a few variables.
type Input struct {
	URL   string         `json:"url,omitempty"`
	Value any            `json:"value,omitempty"` // one element of the upstream list field named by `each`
	Vars  map[string]any `json:"vars,omitempty"`  // values the producing task hands to its consumer
	// Task routes an emitted input to consumers running this task only; empty means every
	// consumer. A paging feed emits its next page with Task set to itself.
	Task   string `json:"task,omitempty"`
	Parent string `json:"parent,omitempty"` // key of the item this input came from
	Depth  int    `json:"depth,omitempty"`  // hops of self-recursion so far
	// Claim is the batch whose claims in the run's seen-set this input's outputs are
	// claimed as: set when a batch that may have run the input hands it back unrun or
	// to be retried, so the batch that runs it finds those claims its own and hands the
	// outputs on (activities/seen.go). Never set by tasks; cleared on their outputs.
	Claim string `json:"claim,omitempty"`
}

// ClaimID names a batch as a claimer in the run's seen-set (Input.Claim): its workflow
// execution's run id and its activity id, the same in every attempt of the batch.
func ClaimID(workflowRunID, activityID string) string { return workflowRunID + "/" + activityID }

// Var returns a variable as a string, or "" when absent.
func (in Input) Var(name string) string {
	if v, ok := in.Vars[name]; ok && v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

// Describe names the input in errors and logs.
func (in Input) Describe() string {
	if in.URL != "" {
		return RedactURL(in.URL)
	}
	if in.Value != nil {
		return fmt.Sprint(in.Value)
	}
	if len(in.Vars) > 0 {
		keys := make([]string, 0, len(in.Vars))
		for k := range in.Vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%v", k, in.Vars[k])
		}
		return strings.Join(parts, ",")
	}
	return "(seed)"
}

// Result is what one task run over one input produced.
type Result struct {
	Items []Item  // to store
	Next  []Input // for downstream steps (and for this step, if it consumes itself)
	// Skipped counts records the source offered that are deliberately not stored
	// (deleted, dead, filtered); they are reported, not failed.
	Skipped int
	// OutOfScope counts links the task did not follow because the step's scope,
	// include/exclude patterns or page budget leave them out; Trapped those a crawler
	// trap rule dropped (an endless calendar, repeating paths …). Both are shown per
	// step in the run's status.
	OutOfScope int `json:",omitempty"`
	Trapped    int `json:",omitempty"`
	// TrapRules counts Trapped by the rule that dropped each link ("calendar": 12).
	TrapRules map[string]int `json:",omitempty"`
	// Notes say what the task noticed but stored anyway (a value that did not read as
	// its field's type, stored as null); the worker logs them and `trawler try` shows them.
	Notes []string `json:",omitempty"`
}

// Item is one stored record. A task fills Key, URL and Data; the engine fills the rest.
type Item struct {
	ID     int64          `json:"id,string"`
	Biz    string         `json:"biz"`
	Key    string         `json:"key"`
	URL    string         `json:"url,omitempty"`
	TS     time.Time      `json:"ts"`
	Hash   string         `json:"hash"`
	Flag   int            `json:"flag"`
	Chain  string         `json:"chain"`
	RunID  string         `json:"run_id"`
	Tenant string         `json:"tenant"`
	Data   map[string]any `json:"data"`
}

// Env is what a task may use while it runs.
type Env struct {
	Params  Params
	Fetcher Fetcher
	Log     *slog.Logger
	Chain   string
	Step    string
	RunID   string
	Tenant  string
	// Prepared is what the task's Prepare made of Params, once per batch (Preparer).
	Prepared any
	// Services are the worker's shared facilities beyond fetching (a stream hub …);
	// a task reads one with its ServiceKey.
	Services Services
}

// Services are the facilities a worker shares with the tasks it runs, each under its
// ServiceKey. The worker fills them once; every batch's Env carries them.
type Services struct{ m map[any]any }

// ServiceKey names one service and its type; the package that defines a service
// declares its key, so a task gets the service typed, with no assertion of its own.
type ServiceKey[T any] struct{ Name string }

// Provide adds v under k to s.
func Provide[T any](s *Services, k ServiceKey[T], v T) {
	if s.m == nil {
		s.m = map[any]any{}
	}
	s.m[k] = v
}

// Of is the service k names on env's worker, or an error saying the worker lacks it.
func (k ServiceKey[T]) Of(env *Env) (T, error) {
	if v, ok := env.Services.m[k].(T); ok {
		return v, nil
	}
	var zero T
	return zero, WithCause(Permanentf("step %s needs the worker's %s, and this worker has none; run it on a worker started by `trawler worker`, `dev` or `demo`", env.Step, k.Name), CauseConfig)
}

// Fetch performs an HTTP request through the engine's fetcher (politeness, robots.txt,
// retries on 429/5xx, size limits). An answer the request does not accept (see
// Request.Accept) comes back as an error naming its status.
func (e *Env) Fetch(ctx context.Context, req *Request) (*Response, error) {
	if e.Fetcher == nil {
		return nil, fmt.Errorf("no fetcher configured for step %s", e.Step)
	}
	return e.Fetcher.Fetch(ctx, req)
}

// Get is Fetch for a plain GET.
func (e *Env) Get(ctx context.Context, url string) (*Response, error) {
	return e.Fetch(ctx, &Request{Method: http.MethodGet, URL: url})
}

// Fetcher performs HTTP requests for tasks. The engine's fetcher (fetch.New) is a chain
// of Middlewares over one HTTP exchange; see Middleware.
type Fetcher interface {
	Fetch(ctx context.Context, req *Request) (*Response, error)
}

// Request is one HTTP request a task wants made.
type Request struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// Limits for this request; zero values take the fetcher's settings.
	RateLimit       float64
	HostConcurrency int
	// Politeness is the step's `politeness:` (the engine sets it); it wins over
	// RateLimit and HostConcurrency where it sets a limit.
	Politeness *Politeness
	// IgnoreRobots skips the robots.txt check (a chain's `robots: false`).
	IgnoreRobots bool
	// Accept says which statuses the task takes as an answer; nil takes DefaultAccept
	// (2xx and 304). The fetcher fails every other answer with its status as the cause,
	// after retrying those a retry may cure (see RetryableStatus); the task reads the
	// ones it accepts from Response.Status.
	Accept func(status int) bool
	// Login, on a request a browser renders, makes it a login: once the page's actions
	// ran, the page must show Login's success condition, and the browser's session
	// comes back in Response.Session (generic.login).
	Login *Login
	// NoRedirect answers a redirect as it is, unfollowed: a browser follows it itself
	// (keeping the cookies it sets).
	NoRedirect bool
}

// Login is the success condition of a login done in a browser, and what of its
// session to keep.
type Login struct {
	// Selector, when set, must match on the page; URL, when set, is a regular
	// expression the page's address must match.
	Selector, URL string
	// Storage names the localStorage entries kept with the cookies.
	Storage []string
}

// Session is what a browser keeps of a login: its cookies and localStorage entries.
type Session struct {
	Cookies []*http.Cookie
	Storage map[string]string
}

// Response is a fully read HTTP response. Inside the fetcher's chain it may carry any
// status; a task only gets the ones its request accepts.
type Response struct {
	URL    string // after redirects
	Status int
	Header http.Header
	Body   []byte
	// Attempts counts the requests sent for this answer, in-process retries included.
	Attempts int
	// Session is the browser's session after a login (Request.Login).
	Session *Session
}

// Registry maps task names to tasks.
type Registry struct {
	mu    sync.RWMutex
	tasks map[string]Task
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{tasks: map[string]Task{}} }

// Default is the registry site packages register into from their init functions.
var Default = NewRegistry()

var taskName = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$`)

// IsTaskName reports whether name can name a task: site.task, lowercase letters,
// digits and _ (demo.story). An item's biz is its task's name.
func IsTaskName(name string) bool { return taskName.MatchString(name) }

// Register adds tasks; it panics where Add returns an error (a malformed or duplicate
// name, or an item type whose field tags cannot work, see CheckTags), because from an
// init function that is a programming error in a site package, found the first time the
// binary starts (or its tests run).
func (r *Registry) Register(tasks ...Task) {
	if err := r.Add(tasks...); err != nil {
		panic("crawl: " + err.Error())
	}
}

// Add adds tasks, or none of them when one cannot be added: its name is not site.task,
// another task already has it, or its item's field tags cannot work. Adding the very task
// a name already holds (the same value, e.g. registered by its package's init and passed
// to cli.Main too) changes nothing.
func (r *Registry) Add(tasks ...Task) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	adding := map[string]Task{}
	for _, t := range tasks {
		name := t.Spec().Name
		if !IsTaskName(name) {
			return fmt.Errorf("task name %q must look like site.task (lowercase letters, digits, _)", name)
		}
		held, dup := r.tasks[name]
		if !dup {
			held, dup = adding[name]
		}
		if dup && !sameTask(held, t) {
			return fmt.Errorf("task %q registered twice: two different tasks have this name; rename one: a task's name is unique in a binary", name)
		}
		if c, ok := t.(interface{ tagError() error }); ok && c.tagError() != nil {
			return fmt.Errorf("task %s: its item's field tags cannot work:\n%v", name, c.tagError())
		}
		adding[name] = t
	}
	maps.Copy(r.tasks, adding)
	return nil
}

// sameTask reports whether a and b are one task value. Tasks built by TaskFunc hold a
// func and are never equal to anything, not even themselves.
func sameTask(a, b Task) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// Register adds tasks to the default registry.
func Register(tasks ...Task) { Default.Register(tasks...) }

// Get returns the named task.
func (r *Registry) Get(name string) (Task, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tasks[name]
	return t, ok
}

// Names lists the registered task names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.tasks))
	for n := range r.tasks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
