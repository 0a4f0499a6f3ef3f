package crawl

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Chain is a parsed chain file: named steps, each running one task, wired by `from`.
type Chain struct {
	File     string
	Name     string
	Tenant   string
	Robots   bool // obey robots.txt (default true)
	Priority int
	Quota    Quota
	// MaxOutage ends a run that waited this long on one unreachable dependency (0: wait).
	MaxOutage time.Duration
	// Middlewares wrap the fetcher of every step (outermost first), before the step's own.
	Middlewares []MiddlewareRef
	Defaults    Defaults
	// OnViolation is what a broken expectation does to a run of a step that does not
	// say: mark (default) or fail.
	OnViolation string
	Steps       []Step
	// Notify are the webhooks the chain's events go to (`notify: {webhooks: …}`).
	Notify []Notify
	// Secrets are the credentials browser actions type, by name, and where the workers
	// read each (secrets.go).
	Secrets map[string]SecretRef
}

// Affinity ties a step to the workers that reach its site well: each worker fetches
// Probe every few seconds and polls the site's task queue only while the answer comes
// within MaxLatency and at MinKBps or faster (0: no such threshold).
type Affinity struct {
	Probe      string        `json:"probe"`
	MaxLatency time.Duration `json:"max_latency,omitempty"`
	MinKBps    int           `json:"min_kbps,omitempty"`
}

// Quota is a cost budget; 0 leaves a limit off. Pages and Items bound one run,
// PagesPerDay and ItemsPerDay all runs of the chain (or tenant) in a UTC day. A run
// that reaches one stops cleanly with status quota_reached.
type Quota struct {
	Pages       int `json:"pages,omitempty"`
	Items       int `json:"items,omitempty"`
	PagesPerDay int `json:"pages_per_day,omitempty"`
	ItemsPerDay int `json:"items_per_day,omitempty"`
}

// Defaults apply to every step that does not set its own value.
type Defaults struct {
	Timeout     time.Duration  // per input; 0 = the task's own
	Retries     int            // -1 = the task's own
	Batch       int            // inputs per activity
	Concurrency int            // inputs fetched at once inside one batch
	Parallel    int            // batches in flight per workflow
	Store       []string       // sinks
	Params      map[string]any // applied to every step whose task declares the param
	Dedup       string         // new | changed | off
	Politeness  *Politeness    // per-host limits of every step (nil: none declared)
	Archive     *Archive       // WARC archive of every step's pages (nil: none)
}

// Step is one node of the chain's DAG.
type Step struct {
	// ID names the step to `from:` and in status; left out, it is the task's name after
	// its site (`task: demo.feed` is step feed), so a chain need not say it twice.
	ID   string
	Task string
	// idFromTask: ID was left out and taken from Task.
	idFromTask bool
	// Biz is what the step's records are stored under, `site.task` shaped (the `biz:`
	// key; see StepBiz for the default).
	Biz         string
	BizLine     int
	Params      map[string]any
	From        []string
	Each        string
	MaxDepth    int
	Store       []string
	Timeout     time.Duration
	Retries     int // -1 = unset
	Batch       int
	Concurrency int
	Parallel    int
	Priority    int    // 1 (most urgent) … 5; 0 = the chain's
	Dedup       string // new | changed | off; "" = the chain default
	// Changes is where the step's change events go (ChangesKafka; "": nowhere).
	Changes     string
	ChangesLine int
	// Shared makes the step a shared source: identical inputs of the same task and
	// params, in any chain of any tenant, are fetched once per this interval.
	Shared time.Duration
	// Affinity sends the step's batches only to workers whose probe of the site meets
	// its thresholds.
	Affinity *Affinity
	// Middlewares wrap this step's fetcher inside the chain's (see RegisterMiddleware).
	Middlewares []MiddlewareRef
	// Follow lets a batch of a step feeding this one run its inputs for it (PlanStep.Follow).
	Follow     bool
	FollowLine int
	// Revisit lets the step fetch an input again within a run (PlanStep.Revisit).
	Revisit bool
	// Recrawl plans each record's next visit from its change history; the step's
	// inputs are then the records due now and the ones nobody has seen yet.
	Recrawl *Recrawl
	// Render renders the step's pages in a headless browser (nil: never).
	Render *Render
	// Politeness is the step's own `politeness:` (over the chain's defaults).
	Politeness *Politeness
	// URLsFile adds start URLs from a file to the step's `urls` param.
	URLsFile *URLsFile
	// Expect is what the step's data must look like (`expect:`); ExpectLines are the
	// lines of the fields it names.
	Expect      *Expect
	ExpectLines map[string]int
	// Archive keeps the step's raw responses as WARC files (nil: the chain default's).
	Archive *Archive
	// Needs are pooled resources every request of the step borrows besides its task's
	// (`needs: [cookie]`): how a generic step leases the session a login stored.
	Needs     []string
	NeedsLine int
	// PoolSite names the site whose pools the step leases from and stores into
	// (`pool_site:`), for steps whose task crawls any site; "": the task's own.
	PoolSite     string
	PoolSiteLine int
	Line         int
	ParamLines   map[string]int // line of each param in the file, and of its keys (fields.title)
}

// Engine defaults used when neither the chain nor the task says otherwise.
const (
	DefaultBatch       = 50
	DefaultConcurrency = 16
	DefaultParallel    = 4
	DefaultRetries     = 3
	DefaultTimeout     = 30 * time.Second
	MaxBatch           = 1000
	// MaxConcurrency is MaxBatch: a batch holds no more inputs than that to fetch at once.
	MaxConcurrency = MaxBatch
	// MaxParallel keeps a run's batches in flight far below Temporal's 2,000 pending
	// activities per workflow, with room for every step of a chain.
	MaxParallel = 100
	// DefaultPriority is Temporal's middle priority, for chains that set none.
	DefaultPriority = 3
	// DefaultTenant owns chains that name no tenant.
	DefaultTenant = "default"
)

// IsDefaultTenant reports whether tenant is the default one; items and code that name no
// tenant ("") belong to it too. The stores keep the default tenant's records under their
// bare keys, as before tenants had their own.
func IsDefaultTenant(tenant string) bool { return tenant == "" || tenant == DefaultTenant }

// IsTenantName reports whether name can be a tenant's: lowercase letters, digits, - and
// _, starting with a letter or digit, as a chain's tenant: line takes it. Stores build
// names from it (the Elasticsearch alias trawler.<tenant>), so a tenant never holds a
// dot, a slash or a pattern.
func IsTenantName(name string) bool { return nameRE.MatchString(name) }

// Dedup modes: which items a step stores and passes downstream.
const (
	DedupChanged = "changed" // new items and items whose content changed (default)
	DedupNew     = "new"     // new items only
	DedupOff     = "off"     // every item
)

// LoadOptions say what a chain file is checked against.
type LoadOptions struct {
	Registry *Registry // default: Default
	Sinks    []string  // sink names `store` may use (the worker's stores and pools); default: jsonl
	// Sets are `step.param=value` or `param=value` overrides (the CLI's --set).
	Sets []string
	// Vars fill `${name}` and `${name:-default}` in the file's values: the addresses
	// of the running stack (`demo_site`, `redis` … from its endpoints.json), so an
	// example chain follows the stack wherever its ports are.
	Vars map[string]string
	// ReadFile reads a file a chain names (a step's urls_file), by the path written in the
	// chain; nil where chains do not come from files (the console), which refuses them.
	ReadFile func(path string) ([]byte, error)
}

// Problem is one thing wrong with a chain file, with the place and the fix.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// Problems is every problem found in one file; it is the error Load returns.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

var (
	chainKeys    = []string{"name", "tenant", "robots", "priority", "quota", "max_outage", "middlewares", "defaults", "on_violation", "steps", "notify", "secrets"}
	quotaKeys    = []string{"pages", "items", "pages_per_day", "items_per_day"}
	defaultsKeys = []string{"timeout", "retries", "batch", "concurrency", "parallel", "store", "params", "dedup", "politeness", "archive"}
	stepKeys     = []string{"id", "task", "biz", "params", "from", "each", "max_depth", "store", "dedup", "changes", "timeout", "retries", "batch", "concurrency", "parallel", "priority", "shared", "affinity", "middlewares", "follow", "revisit", "recrawl", "render", "politeness", "urls_file", "expect", "archive", "needs", "pool_site"}
	affinityKeys = []string{"probe", "max_latency", "min_kbps"}
	dedupModes   = []string{DedupChanged, DedupNew, DedupOff}
	nameRE       = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
)

// Load parses and validates a chain file. On failure the error is Problems listing
// everything wrong, each with its line and the fix.
func Load(file string, data []byte, opts LoadOptions) (*Chain, error) {
	if opts.Registry == nil {
		opts.Registry = Default
	}
	if opts.Sinks == nil {
		opts.Sinks = []string{"jsonl"}
	}
	l := &loader{file: file, opts: opts, lines: map[string]int{}}
	c := l.parse(l.expand(data))
	if c != nil {
		for i := range c.Steps {
			if s := &c.Steps[i]; s.ID == "" && s.Task != "" {
				s.ID, s.idFromTask = StepIDOf(s.Task), true
			}
		}
		l.applySets(c)
		for i := range c.Steps {
			s := &c.Steps[i]
			if t, ok := l.opts.Registry.Get(s.Task); ok && s.URLsFile != nil {
				l.addURLsFile(s, t.Spec(), fmt.Sprintf("step %q", s.ID))
			}
		}
		l.validate(c)
	}
	if len(l.problems) > 0 {
		return nil, l.problems
	}
	return c, nil
}

// StepIDOf is the id of a step that gives none: its task's name after the site
// (demo.feed → feed), or the whole name when it has no site.
func StepIDOf(task string) string {
	return task[strings.LastIndexByte(task, '.')+1:]
}

type loader struct {
	file     string
	opts     LoadOptions
	problems Problems
	// lines are where the chain-level keys are ("priority", "defaults") and those
	// under defaults ("defaults.batch" …), so their problems point at them.
	lines map[string]int
}

// lineOf is the line of a chain-level or defaults key, else of its parent, else 1.
func (l *loader) lineOf(keys ...string) int {
	for _, k := range keys {
		if n := l.lines[k]; n > 0 {
			return n
		}
	}
	return 1
}

func (l *loader) add(line int, format string, args ...any) {
	l.problems = append(l.problems, Problem{File: l.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// varRef is `${name}` or `${name:-default}` in a chain file.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expand fills the variables of every line but comment lines; a variable that is not
// set and has no default is a problem on its line.
func (l *loader) expand(data []byte) []byte {
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || !strings.Contains(line, "${") {
			continue
		}
		lines[i] = varRef.ReplaceAllStringFunc(line, func(ref string) string {
			m := varRef.FindStringSubmatch(ref)
			if v, ok := l.opts.Vars[m[1]]; ok && v != "" {
				return v
			}
			if m[2] != "" {
				return m[3]
			}
			known := slices.Sorted(maps.Keys(l.opts.Vars))
			if len(known) == 0 {
				l.add(i+1, "`${%s}` is not set: run with --data DIR of a running `trawler dev` (its endpoints.json sets the stack's addresses), or write `${%s:-value}` with a default", m[1], m[1])
			} else {
				l.add(i+1, "`${%s}` is not set%s; set: %s", m[1], Suggest(m[1], known), strings.Join(known, ", "))
			}
			return ref
		})
	}
	return []byte(strings.Join(lines, "\n"))
}

func (l *loader) parse(data []byte) *Chain {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			n, _ := strconv.Atoi(m[1])
			l.add(n, "YAML syntax: %s (check indentation and quoting from this line on)", m[2])
		} else {
			l.add(0, "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
		}
		return nil
	}
	if len(doc.Content) == 0 {
		l.add(0, "file is empty; a chain needs `name:` and `steps:` (see examples/demo.yaml)")
		return nil
	}
	root := doc.Content[0]
	for k, n := range keyLines(root) {
		l.lines[k] = n
	}
	if root.Kind != yaml.MappingNode {
		l.add(root.Line, "a chain file is a mapping with `name:` and `steps:`, not a %s", kindName(root))
		return nil
	}
	c := &Chain{File: l.file, Robots: true, Tenant: DefaultTenant, Defaults: Defaults{Retries: -1}}
	var stepsNode *yaml.Node
	l.fields(root, "chain", chainKeys, func(key string, v *yaml.Node) {
		switch key {
		case "name":
			c.Name = l.str(v, "name")
		case "tenant":
			c.Tenant = l.str(v, "tenant")
		case "robots":
			c.Robots = l.boolean(v, "robots")
		case "priority":
			c.Priority = l.integer(v, "priority")
		case "quota":
			l.fields(v, "quota", quotaKeys, func(key string, v *yaml.Node) {
				n := l.integer(v, "quota."+key)
				if n < 0 {
					l.add(v.Line, "quota.%s %d: use a positive number, or leave it out for no limit", key, n)
				}
				switch key {
				case "pages":
					c.Quota.Pages = n
				case "items":
					c.Quota.Items = n
				case "pages_per_day":
					c.Quota.PagesPerDay = n
				case "items_per_day":
					c.Quota.ItemsPerDay = n
				}
			})
		case "max_outage":
			c.MaxOutage = l.duration(v, "max_outage")
		case "middlewares":
			c.Middlewares = l.middlewares(v, "middlewares")
		case "defaults":
			for k, n := range keyLines(v) {
				l.lines["defaults."+k] = n
			}
			l.fields(v, "defaults", defaultsKeys, func(key string, v *yaml.Node) {
				switch key {
				case "timeout":
					c.Defaults.Timeout = l.duration(v, "defaults.timeout")
				case "retries":
					c.Defaults.Retries = l.integer(v, "defaults.retries")
				case "batch":
					c.Defaults.Batch = l.bounded(v, "defaults", key)
				case "concurrency":
					c.Defaults.Concurrency = l.bounded(v, "defaults", key)
				case "parallel":
					c.Defaults.Parallel = l.bounded(v, "defaults", key)
				case "store":
					c.Defaults.Store = l.strList(v, "defaults.store")
				case "params":
					c.Defaults.Params = l.mapping(v, "defaults.params")
				case "dedup":
					c.Defaults.Dedup = l.str(v, "defaults.dedup")
				case "politeness":
					c.Defaults.Politeness = l.politeness(v, "defaults", true)
				case "archive":
					c.Defaults.Archive = l.archive(v, "defaults")
				}
			})
		case "on_violation":
			c.OnViolation = l.onViolation(v, "chain")
		case "steps":
			stepsNode = v
		case "notify":
			c.Notify = l.notify(v)
		case "secrets":
			c.Secrets = l.secrets(v)
		}
	})
	if stepsNode == nil {
		l.add(root.Line, "chain has no `steps:`; add a list of steps, each with `id:` and `task:`")
		return c
	}
	if stepsNode.Kind != yaml.SequenceNode {
		l.add(stepsNode.Line, "`steps` must be a list (each entry starts with `- id: ...`), not a %s", kindName(stepsNode))
		return c
	}
	for i, sn := range stepsNode.Content {
		s := Step{Retries: -1, Line: sn.Line}
		where := fmt.Sprintf("step %d", i+1)
		l.fields(sn, where, stepKeys, func(key string, v *yaml.Node) {
			switch key {
			case "id":
				s.ID = l.str(v, "id")
			case "task":
				s.Task = l.str(v, "task")
			case "biz":
				s.Biz, s.BizLine = l.str(v, "biz"), v.Line
			case "params":
				s.Params = l.mapping(v, "params")
				s.ParamLines = map[string]int{}
				addKeyLines(s.ParamLines, "", v)
			case "from":
				if v.Kind == yaml.SequenceNode {
					s.From = l.strList(v, "from")
				} else {
					s.From = []string{l.str(v, "from")}
				}
			case "each":
				s.Each = l.str(v, "each")
			case "max_depth":
				if s.MaxDepth = l.integer(v, "max_depth"); s.MaxDepth < 1 && v.Kind == yaml.ScalarNode {
					l.add(v.Line, "`max_depth: %s`: use 1 or more, the number of times the step may follow its own outputs", v.Value)
					s.MaxDepth = -1 // said; the checks below stay quiet
				}
			case "store":
				s.Store = l.strList(v, "store")
			case "needs":
				s.Needs, s.NeedsLine = l.strList(v, "needs"), v.Line
			case "pool_site":
				s.PoolSite, s.PoolSiteLine = l.str(v, "pool_site"), v.Line
			case "dedup":
				s.Dedup = l.str(v, "dedup")
			case "changes":
				s.Changes, s.ChangesLine = l.changes(v, where)
			case "affinity":
				a := &Affinity{}
				l.fields(v, where+".affinity", affinityKeys, func(key string, v *yaml.Node) {
					switch key {
					case "probe":
						a.Probe = l.str(v, "affinity.probe")
					case "max_latency":
						a.MaxLatency = l.duration(v, "affinity.max_latency")
					case "min_kbps":
						a.MinKBps = l.integer(v, "affinity.min_kbps")
					}
				})
				if a.Probe == "" {
					l.add(v.Line, "%s: affinity needs `probe: URL`, the page a worker fetches to decide whether it serves this site (params expand: {base_url}/robots.txt)", where)
				}
				if a.MaxLatency <= 0 && a.MinKBps <= 0 {
					l.add(v.Line, "%s: affinity needs a threshold: max_latency (e.g. 300ms) and/or min_kbps (e.g. 500)", where)
				}
				s.Affinity = a
			case "shared":
				if s.Shared = l.duration(v, "shared"); s.Shared > 0 && s.Shared < time.Second {
					l.add(v.Line, "%s: shared %s: use an interval of 1s or more, e.g. shared: 10m", where, s.Shared)
				}
			case "timeout":
				s.Timeout = l.duration(v, "timeout")
			case "retries":
				s.Retries = l.integer(v, "retries")
			case "batch":
				s.Batch = l.bounded(v, where, key)
			case "concurrency":
				s.Concurrency = l.bounded(v, where, key)
			case "parallel":
				s.Parallel = l.bounded(v, where, key)
			case "priority":
				s.Priority = l.integer(v, "priority")
			case "middlewares":
				s.Middlewares = l.middlewares(v, where+".middlewares")
			case "follow":
				s.Follow, s.FollowLine = l.boolean(v, "follow"), v.Line
			case "revisit":
				s.Revisit = l.boolean(v, "revisit")
			case "recrawl":
				s.Recrawl = l.recrawl(v, where)
			case "render":
				s.Render = l.render(v, where)
			case "politeness":
				s.Politeness = l.politeness(v, where, true)
			case "urls_file":
				s.URLsFile = l.urlsFile(v, where)
			case "expect":
				s.ExpectLines = map[string]int{}
				s.Expect = l.expect(v, where, s.ExpectLines)
			case "archive":
				s.Archive = l.archive(v, where)
			}
		})
		c.Steps = append(c.Steps, s)
	}
	return c
}

// fields walks a mapping node, reporting unknown keys with a suggestion.
func (l *loader) fields(n *yaml.Node, where string, known []string, set func(key string, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		l.add(n.Line, "%s must be a mapping of `key: value` lines, not a %s", where, kindName(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			l.add(k.Line, "%s: `%s` is set twice; keep one", where, k.Value)
			continue
		}
		seen[k.Value] = true
		if !slices.Contains(known, k.Value) {
			l.add(k.Line, "%s: unknown field `%s`%s; valid fields: %s", where, k.Value, Suggest(k.Value, known), strings.Join(known, ", "))
			continue
		}
		set(k.Value, v)
	}
}

func (l *loader) str(v *yaml.Node, field string) string {
	if v.Kind != yaml.ScalarNode {
		l.add(v.Line, "`%s` must be a single value, not a %s", field, kindName(v))
		return ""
	}
	return v.Value
}

func (l *loader) integer(v *yaml.Node, field string) int {
	if v.Kind == yaml.ScalarNode {
		if n, err := strconv.Atoi(v.Value); err == nil {
			return n
		}
	}
	l.add(v.Line, "`%s` must be a whole number, got %q", field, v.Value)
	return 0
}

// sizeLimits are the allowed ranges of the sizing keys, with what they count.
var sizeLimits = map[string]struct {
	max  int
	unit string
}{
	"batch":       {MaxBatch, "inputs per activity"},
	"concurrency": {MaxConcurrency, "inputs fetched at once inside one batch"},
	"parallel":    {MaxParallel, "batches in flight per step"},
}

// bounded reads batch, concurrency or parallel, which must be from 1 to their maximum
// when given; left out, the chain's default or the engine's applies.
func (l *loader) bounded(v *yaml.Node, where, key string) int {
	field := key
	if where == "defaults" {
		field = "defaults." + key
	}
	n := l.integer(v, field)
	_, err := strconv.Atoi(v.Value) // else integer said what is wrong
	if lim := sizeLimits[key]; v.Kind == yaml.ScalarNode && err == nil && (n < 1 || n > lim.max) {
		l.add(v.Line, "%s: %s %d: use 1 to %d %s", where, key, n, lim.max, lim.unit)
	}
	return n
}

func (l *loader) boolean(v *yaml.Node, field string) bool {
	var b bool
	if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
		l.add(v.Line, "`%s` must be true or false, got %q", field, v.Value)
		return true
	}
	return b
}

func (l *loader) duration(v *yaml.Node, field string) time.Duration {
	if v.Kind == yaml.ScalarNode {
		d, err := ParseDuration(v.Value)
		if err == nil && d > 0 {
			return d
		}
		if _, numErr := strconv.ParseFloat(v.Value, 64); numErr == nil {
			l.add(v.Line, "`%s`: bad duration %q: give a unit, e.g. %ss or %sm", field, v.Value, v.Value, v.Value)
			return 0
		}
	}
	l.add(v.Line, "`%s`: bad duration %q: write it like 30s, 2m, 1h30m or 7d", field, v.Value)
	return 0
}

func (l *loader) strList(v *yaml.Node, field string) []string {
	if v.Kind == yaml.ScalarNode {
		return []string{v.Value}
	}
	if v.Kind != yaml.SequenceNode {
		l.add(v.Line, "`%s` must be a list like [a, b], not a %s", field, kindName(v))
		return nil
	}
	out := make([]string, 0, len(v.Content))
	for _, e := range v.Content {
		out = append(out, l.str(e, field))
	}
	return out
}

func (l *loader) mapping(v *yaml.Node, field string) map[string]any {
	if v.Kind != yaml.MappingNode {
		l.add(v.Line, "`%s` must be a mapping of `name: value` lines, not a %s", field, kindName(v))
		return nil
	}
	var m map[string]any
	if err := v.Decode(&m); err != nil {
		l.add(v.Line, "`%s`: %v", field, err)
	}
	return m
}

// middlewares reads a `middlewares:` list. Each entry is a registered middleware's
// name, or a one-key mapping from the name to its params:
//
//	middlewares:
//	  - count_statuses
//	  - header: {X-Team: news}
func (l *loader) middlewares(v *yaml.Node, field string) []MiddlewareRef {
	if v.Kind != yaml.SequenceNode {
		l.add(v.Line, "`%s` must be a list of middleware names, e.g. [header], not a %s", field, kindName(v))
		return nil
	}
	var out []MiddlewareRef
	for _, e := range v.Content {
		switch {
		case e.Kind == yaml.ScalarNode:
			out = append(out, MiddlewareRef{Name: e.Value, Line: e.Line})
		case e.Kind == yaml.MappingNode && len(e.Content) == 2 && e.Content[0].Kind == yaml.ScalarNode:
			ref := MiddlewareRef{Name: e.Content[0].Value, Line: e.Line}
			if p := e.Content[1]; !(p.Kind == yaml.ScalarNode && p.Tag == "!!null") {
				ref.Params = l.mapping(p, field+"."+ref.Name)
			}
			out = append(out, ref)
		default:
			l.add(e.Line, "`%s`: an entry is a middleware name, or `name: {param: value}` for one with params; got a %s", field, kindName(e))
		}
	}
	return out
}

// checkMiddlewares builds every middleware a list names, so an unknown name or bad
// params are reported with their line before a run starts.
func (l *loader) checkMiddlewares(where string, refs []MiddlewareRef) {
	for _, ref := range refs {
		if _, err := buildMiddleware(ref); err != nil {
			l.add(ref.Line, "%s: %v", where, err)
		}
	}
}

// applySets applies `step.param=value` and `param=value` overrides.
func (l *loader) applySets(c *Chain) {
	for _, set := range l.opts.Sets {
		lhs, value, ok := strings.Cut(set, "=")
		if !ok || lhs == "" {
			l.add(0, "--set %s: write it as step.param=value (or param=value for every step)", set)
			continue
		}
		var v any = value
		_ = yaml.Unmarshal([]byte(value), &v) // numbers and booleans keep their YAML type
		if v == nil {
			v = value
		}
		stepID, param, scoped := strings.Cut(lhs, ".")
		if !scoped {
			if c.Defaults.Params == nil {
				c.Defaults.Params = map[string]any{}
			}
			c.Defaults.Params[lhs] = v
			continue
		}
		found := false
		for i := range c.Steps {
			if c.Steps[i].ID == stepID {
				if c.Steps[i].Params == nil {
					c.Steps[i].Params = map[string]any{}
				}
				c.Steps[i].Params[param] = v
				found = true
			}
		}
		if !found {
			l.add(0, "--set %s: no step `%s`%s; steps: %s", set, stepID, Suggest(stepID, stepIDs(c)), strings.Join(stepIDs(c), ", "))
		}
	}
}

func (l *loader) validate(c *Chain) {
	if c.Name == "" {
		l.add(1, "chain has no name; add `name: my-chain` (lowercase letters, digits, - and _)")
	} else if !nameRE.MatchString(c.Name) {
		l.add(1, "chain name %q: use lowercase letters, digits, - and _ (it becomes part of workflow ids)", c.Name)
	}
	if c.Tenant != "" && !IsTenantName(c.Tenant) {
		l.add(1, "tenant %q: use lowercase letters, digits, - and _", c.Tenant)
	}
	if c.Priority < 0 || c.Priority > 5 {
		l.add(l.lineOf("priority"), "priority %d: use 1 (highest) to 5 (lowest), or leave it out", c.Priority)
	}
	l.checkMiddlewares("middlewares", c.Middlewares)
	l.checkSinks(l.lineOf("defaults.store", "defaults"), "defaults.store", c.Defaults.Store)
	l.checkDedup(l.lineOf("defaults.dedup", "defaults"), "defaults", c.Defaults.Dedup)
	ids := map[string]int{}
	for i, s := range c.Steps {
		if s.ID == "" {
			l.add(s.Line, "step %d has no `id`; add `id: some_name` so other steps can refer to it", i+1)
		} else if prev, dup := ids[s.ID]; dup && (s.idFromTask || c.Steps[prev].idFromTask) {
			l.add(s.Line, "step id %q is already used by the step on line %d (a step without `id:` is named after its task); give one of them its own `id: some_name`", s.ID, c.Steps[prev].Line)
		} else if dup {
			l.add(s.Line, "step id %q is already used by the step on line %d; step ids must be unique", s.ID, c.Steps[prev].Line)
		} else {
			ids[s.ID] = i
		}
	}
	for _, s := range c.Steps {
		l.validateStep(c, s, ids)
	}
	l.checkCycles(c, ids)
	// defaults.params must be declared by at least one step's task. A step whose task
	// is unknown (reported above) may be the one that declares it: no verdict then.
	for name := range c.Defaults.Params {
		used := false
		for _, s := range c.Steps {
			t, ok := l.opts.Registry.Get(s.Task)
			if !ok {
				used = true
				break
			}
			if _, ok := t.Spec().Param(name); ok {
				used = true
			}
		}
		if !used {
			l.add(l.lineOf("defaults.params", "defaults"), "defaults.params: no step's task has a param `%s`; remove it or check the spelling", name)
		}
	}
}

func (l *loader) validateStep(c *Chain, s Step, ids map[string]int) {
	name := s.ID
	if name == "" {
		name = "?"
	}
	where := fmt.Sprintf("step %q", name)
	l.checkMiddlewares(where, s.Middlewares)
	var spec TaskSpec
	known := false
	if s.Task == "" {
		l.add(s.Line, "%s has no `task`; set one of: %s", where, strings.Join(l.opts.Registry.Names(), ", "))
	} else if t, ok := l.opts.Registry.Get(s.Task); !ok {
		l.add(s.Line, "%s: unknown task %q%s; registered tasks: %s", where, s.Task, Suggest(s.Task, l.opts.Registry.Names()), strings.Join(l.opts.Registry.Names(), ", "))
	} else {
		spec, known = t.Spec(), true
	}
	if known {
		names := make([]string, len(spec.Params))
		for i, p := range spec.Params {
			names[i] = p.Name
		}
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			line := s.Line
			if pl, ok := s.ParamLines[k]; ok {
				line = pl
			}
			p, ok := spec.Param(k)
			if !ok {
				l.add(line, "%s: task %s has no param `%s`%s; its params: %s", where, s.Task, k, Suggest(k, names), strings.Join(names, ", "))
				continue
			}
			if _, err := checkType(p.Type, s.Params[k]); err != nil {
				l.add(line, "%s: param `%s`: %v", where, k, err)
			}
		}
		params := Params{}
		for _, p := range spec.Params {
			if v, ok := s.Params[p.Name]; ok {
				params[p.Name] = v
			} else if v, ok := c.Defaults.Params[p.Name]; ok {
				params[p.Name] = v
			} else if p.Default != nil {
				params[p.Name] = p.Default
			}
		}
		if spec.Check != nil {
			for _, err := range spec.Check(params) {
				l.add(s.paramLine(err.Error()), "%s: %v", where, err)
			}
		}
		output := spec.Output
		if spec.Schema != nil {
			output = spec.Schema(params)
		}
		l.checkExpect(s, output, where)
		for _, p := range spec.Params {
			_, inStep := s.Params[p.Name]
			_, inDefaults := c.Defaults.Params[p.Name]
			if p.Required && !inStep && !inDefaults {
				l.add(s.Line, "%s: task %s needs param `%s` (%s); add it under `params:`", where, s.Task, p.Name, p.Doc)
			}
		}
	}
	l.checkBiz(c, s, spec, known, where)
	l.resolveFills(c, s, where)
	l.checkRender(s, spec, known, where)
	self := false
	for _, from := range s.From {
		if from == s.ID {
			self = true
			continue
		}
		if _, ok := ids[from]; !ok {
			l.add(s.Line, "%s: `from: %s` names no step%s; steps: %s", where, from, Suggest(from, stepIDs(c)), strings.Join(stepIDs(c), ", "))
		}
	}
	if self && s.MaxDepth == 0 {
		l.add(s.Line, "%s consumes its own outputs but has no `max_depth`; add `max_depth: N` to bound the recursion", where)
	}
	if !self && s.MaxDepth > 0 {
		l.add(s.Line, "%s: `max_depth` only applies to a step that lists itself in `from`", where)
	}
	if s.Follow && !slices.ContainsFunc(s.From, func(f string) bool { return f != s.ID }) {
		l.add(s.FollowLine, "%s: `follow: true` lets the batch of a step feeding this one run its inputs; list that step in `from`, or remove `follow`", where)
	}
	if len(s.From) == 0 && s.Each != "" {
		l.add(s.Line, "%s: `each: %s` needs `from:` naming the step whose items carry that list field", where, s.Each)
	}
	if s.Each != "" {
		for _, from := range s.From {
			up, ok := ids[from]
			if !ok {
				continue
			}
			t, ok := l.opts.Registry.Get(c.Steps[up].Task)
			if !ok {
				continue
			}
			f, ok := t.Spec().Field(s.Each)
			if !ok {
				l.add(s.Line, "%s: `each: %s`: task %s (step %q) has no output field `%s`; its fields: %s", where, s.Each, t.Spec().Name, from, s.Each, strings.Join(fieldNames(t.Spec()), ", "))
			} else if f.Type != List {
				l.add(s.Line, "%s: `each: %s`: field `%s` of task %s is a %s, not a list", where, s.Each, s.Each, t.Spec().Name, f.Type)
			}
		}
	}
	if s.Retries < -1 {
		l.add(s.Line, "%s: retries %d: use 0 or more", where, s.Retries)
	}
	l.checkSinks(s.Line, where+": store", s.Store)
	for _, st := range s.Store {
		if _, ok := spec.Field("value"); known && strings.HasPrefix(st, "pool:") && !ok {
			l.add(s.Line, "%s: store %s: task %s has no output field `value` to put in the pool; store a task that outputs one (e.g. demo.login)", where, st, s.Task)
		}
	}
	l.checkPools(s, spec, known, where)
	l.checkDedup(s.Line, where, s.Dedup)
	l.checkRecrawl(c, s, where)
	l.checkChanges(c, s, where)
	if s.Priority < 0 || s.Priority > 5 {
		l.add(s.Line, "%s: priority %d: use 1 (highest) to 5 (lowest), or leave it out to take the chain's", where, s.Priority)
	}
}

// checkBiz checks what the step's records are stored under: its `biz:`, or the
// `<chain>.<step>` a config-driven step gets.
func (l *loader) checkBiz(c *Chain, s Step, spec TaskSpec, known bool, where string) {
	if s.Biz != "" {
		if err := CheckBiz(s.Biz); err != nil {
			l.add(s.BizLine, "%s: biz: %v", where, err)
		} else if t, ok := l.opts.Registry.Get(s.Biz); ok && s.Biz != s.Task {
			l.add(s.BizLine, "%s: biz: %s is where task %s stores its records; pick a biz of this chain's own, e.g. %s.%s", where, s.Biz, t.Spec().Name, bizPart(c.Name), bizPart(s.ID))
		}
		return
	}
	if !known || spec.Schema == nil || c.Name == "" || s.ID == "" {
		return
	}
	if biz := StepBiz(c.Name, s, spec); CheckBiz(biz) != nil {
		l.add(s.Line, "%s stores its records under %s.<step id>, and %q is no biz part (lowercase letters, digits, - and _); rename the step, or set `biz: site.task` on it", where, bizPart(c.Name), s.ID)
	}
}

func (l *loader) checkDedup(line int, where, mode string) {
	if mode != "" && !slices.Contains(dedupModes, mode) {
		l.add(line, "%s: dedup %q%s: use changed (store new and changed items), new (new items only) or off", where, mode, Suggest(mode, dedupModes))
	}
}

// StoreAll, alone in a step's `store:`, stores in every store the worker has (its
// pools aside): the chain then runs as it is on a dev stack with all of them and on a
// worker with jsonl alone.
const StoreAll = "all"

func (l *loader) checkSinks(line int, where string, sinks []string) {
	for _, s := range sinks {
		if s == StoreAll {
			if len(sinks) > 1 {
				l.add(line, "%s: `all` already means every store of the worker; list no other store with it", where)
			}
			continue
		}
		if !slices.Contains(l.opts.Sinks, s) {
			l.add(line, "%s: unknown sink %q%s; available: %s", where, s, Suggest(s, l.opts.Sinks), strings.Join(l.opts.Sinks, ", "))
		}
	}
}

// checkCycles reports cycles through two or more steps; a step consuming itself is the
// one allowed loop (bounded by max_depth).
func (l *loader) checkCycles(c *Chain, ids map[string]int) {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(c.Steps))
	var stack []int
	reported := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, from := range c.Steps[i].From {
			j, ok := ids[from]
			if !ok || j == i {
				continue
			}
			switch color[j] {
			case white:
				visit(j)
			case grey:
				// j … i is a cycle: report it once, in file order.
				var path []string
				start := 0
				for k, s := range stack {
					if s == j {
						start = k
					}
				}
				for _, s := range stack[start:] {
					path = append(path, c.Steps[s].ID)
				}
				sorted := append([]string(nil), path...)
				sort.Strings(sorted)
				if key := strings.Join(sorted, ","); !reported[key] {
					reported[key] = true
					// edges point from consumer to producer; print in data-flow order
					for a, b := 0, len(path)-1; a < b; a, b = a+1, b-1 {
						path[a], path[b] = path[b], path[a]
					}
					path = append(path, path[0])
					l.add(c.Steps[j].Line, "steps %s form a cycle; only a step consuming its own outputs (with max_depth) may loop", strings.Join(path, " → "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range c.Steps {
		if color[i] == white {
			visit(i)
		}
	}
}

// keyLines maps each key of a mapping node to its line.
func keyLines(n *yaml.Node) map[string]int {
	out := map[string]int{}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			out[n.Content[i].Value] = n.Content[i].Line
		}
	}
	return out
}

// addKeyLines records the line of every key of a mapping and of the mappings under
// it, by dotted path (fields, fields.title, fields.title.css).
func addKeyLines(out map[string]int, prefix string, n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		path := prefix + n.Content[i].Value
		out[path] = n.Content[i].Line
		addKeyLines(out, path+".", n.Content[i+1])
	}
}

// checkParamRE reads the param a task's Check error names: "param fields.score: …".
var checkParamRE = regexp.MustCompile(`^param ([\w.-]+)`)

// paramLine is the line of the param (or the key inside it) a task's Check error
// names, the nearest enclosing one that is in the file, else the step's.
func (s Step) paramLine(msg string) int {
	m := checkParamRE.FindStringSubmatch(msg)
	if m == nil {
		return s.Line
	}
	for path := m[1]; path != ""; {
		if line, ok := s.ParamLines[path]; ok {
			return line
		}
		i := strings.LastIndex(path, ".")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return s.Line
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return fmt.Sprintf("plain value (%q)", n.Value)
	}
	return "node"
}

func stepIDs(c *Chain) []string {
	out := make([]string, 0, len(c.Steps))
	for _, s := range c.Steps {
		if s.ID != "" {
			out = append(out, s.ID)
		}
	}
	return out
}

func fieldNames(s TaskSpec) []string {
	out := make([]string, len(s.Output))
	for i, f := range s.Output {
		out[i] = f.Name
	}
	return out
}

// Suggest returns ` (did you mean "x"?)` for the closest candidate within a small edit
// distance, or "": error messages about names use it to point at the likely fix.
func Suggest(got string, candidates []string) string {
	best := Closest(got, candidates)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// Closest is the candidate at most two edits from got (the nearest), or "", for a
// message that words its did-you-mean itself.
func Closest(got string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(got, c); d < bestD && d < len(c) {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
