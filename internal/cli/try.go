package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/archive"
	"github.com/trawlerhq/trawler/internal/stream"
)

func tryCmd(s *Settings) *cobra.Command {
	var (
		paramsFile string
		stepID     string
		sets       []string
		noRobots   bool
		timeout    time.Duration
		limit      int
		private    privateFlag
		renderPage bool
		shots      string
		archived   string // --from-archive
		archiveRun string
	)
	cmd := &cobra.Command{
		Use:   "try TASK [URL]",
		Short: "Run one task on one page and print what it extracts: the fast loop for writing selectors",
		Long: `Run one task on one live page and print what it extracts: every item with its typed
fields, the inputs it hands to the next step, and how many records it skipped. Nothing
is stored and no Temporal server is needed. It is the fast loop for writing a spider,
like ` + "`scrapy shell`" + `: change a selector, try it, read the typed values, repeat; then put
the params in a chain file and ` + "`trawler validate`" + ` it.

Params come from --params FILE, then --set:
  --params FILE   a YAML mapping of params, or a chain file: its step running TASK (or
                  --step ID) with the chain's defaults.params
  --set k=v       a YAML value; a dotted name sets a key inside a mapping param:
                  --set fields.title=h1.title --set 'fields.score={css: .score, type: int}'

The params are checked first, exactly as ` + "`trawler validate`" + ` checks them, so a broken
selector is reported with its fix instead of silently matching nothing. Without URL the
task runs its seed input (its urls param). The page is fetched with the real fetcher,
which obeys robots.txt unless --no-robots and, like a worker's, refuses link-local and
cloud metadata addresses always and loopback and private ones unless --allow-private;
with --data of a running ` + "`trawler dev`" + `, the stack's own demo site (its endpoints.json's
demo_site) is fetched without --allow-private. With --from-archive DIR_OR_URL (a
chain's archive.to) the page is not fetched: the task reads the response archived for
its URL (the newest, or run --run's), as ` + "`trawler reparse`" + ` does.
--json prints one object:
{"items":[...],"next":[...],"skipped":N}.`,
		Example: `  trawler try generic.html_detail http://127.0.0.1:8089/item/3 --allow-private --set fields.title=h1.title \
      --set 'fields.score={css: .meta .score, type: int, regex: "(\\d+)"}'
  trawler try generic.html_list --params examples/generic-html.yaml 'http://127.0.0.1:8089/news?p=2' --allow-private
  trawler try generic.json --params examples/generic-json.yaml 'http://127.0.0.1:8089/api/stories?per_page=3' --allow-private --json
  trawler try generic.sitemap https://example.com/sitemap.xml --set include='[/blog/]'
  trawler try generic.html_detail --params examples/render.yaml http://127.0.0.1:8089/js/item/4 --allow-private --render
  trawler try generic.html_list --params shop.yaml 'http://127.0.0.1:8089/js/more?total=35' --allow-private --render --screenshot shots`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			allowPrivate, err := private.resolve(cmd)
			if err != nil {
				return err
			}
			_ = s.Resolve() // with --data, the stack's addresses fill a params file's ${…}
			task, ok := crawl.Default.Get(args[0])
			if !ok {
				return fmt.Errorf("unknown task %q; registered tasks: %s", args[0], strings.Join(crawl.Default.Names(), ", "))
			}
			spec := task.Spec()
			params := map[string]any{}
			if paramsFile != "" {
				var err error
				if params, err = readTryParams(cmd.Context(), paramsFile, spec, stepID); err != nil {
					return err
				}
			}
			for _, set := range sets {
				if err := applyTrySet(params, set); err != nil {
					return err
				}
			}
			typed, problems := checkTryParams(spec.Name, params, !noRobots)
			if len(problems) > 0 {
				if s.JSON {
					_ = PrintJSON(map[string]any{"problems": problems})
				} else {
					for _, p := range problems {
						fmt.Fprintln(os.Stderr, p)
					}
					fmt.Fprintln(os.Stderr, "fix the params and try again (nothing was fetched)")
				}
				return exitError(1)
			}
			in := crawl.Input{}
			if len(args) == 2 {
				in.URL = args[1]
			}
			if timeout <= 0 {
				timeout = spec.Timeout
			}
			if timeout <= 0 {
				timeout = crawl.DefaultTimeout
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			f := fetch.New(fetch.Options{AllowPrivate: allowPrivate, AllowAddrs: s.stackSite()})
			opts := *crawl.DefaultRender(crawl.RenderAlways)
			var mws []crawl.Middleware
			if paramsFile != "" {
				// A chain file's `middlewares:` (the chain's, then the step's) apply as on a
				// worker, and its step's render: options and actions.
				step, err := tryStep(cmd.Context(), s, paramsFile, spec.Name, stepID)
				if err != nil {
					return err
				}
				if step != nil {
					if mws, err = crawl.BuildMiddlewares(step.Middlewares); err != nil {
						return err
					}
					f = f.With(mws...)
					if step.Render != nil {
						opts = *step.Render
						opts.Mode = crawl.RenderAlways
					}
				}
			}
			var fetcher crawl.Fetcher = tryFetcher{f: f, ignoreRobots: noRobots}
			if archived != "" {
				r, err := archive.OpenReader(ctx, crawl.Reparse{From: archived, Run: archiveRun}, "")
				if err != nil {
					return err
				}
				defer r.Close()
				fetcher = crawl.Wrap(r.Fetcher(nil), mws...)
			} else if archiveRun != "" {
				return errors.New("--run picks the run of --from-archive: add --from-archive DIR_OR_URL (the chain's archive.to)")
			}
			if renderPage {
				pool, err := render.NewPool(render.Options{Browsers: 1, Tabs: 1, Log: s.Logger()})
				if err != nil {
					return err
				}
				defer pool.Close()
				r := render.Renderer{Pool: pool, Inner: fetcher, Dial: f.Dial, Opts: opts, Observe: printAction(s.JSON)}
				if shots != "" {
					r.Opts.Screenshot, r.Screenshots, r.ActionShots = true, shots, shots
				}
				fetcher = r
			} else if shots != "" {
				return errors.New("--screenshot pictures a rendered page: add --render")
			}
			env := &crawl.Env{
				Params:  typed,
				Fetcher: fetcher,
				Log:     s.Logger(),
				Chain:   "try",
			}
			crawl.Provide(&env.Services, stream.HubService, stream.NewHub())
			res, err := task.Run(ctx, env, in)
			if err == nil && ctx.Err() != nil {
				err = fmt.Errorf("timed out after %s", timeout)
			}
			if err != nil {
				if s.JSON {
					_ = PrintJSON(map[string]any{"error": err.Error(), "permanent": crawl.IsPermanent(err)})
				} else {
					hint := "a retry may help"
					if crawl.IsPermanent(err) {
						hint = "permanent: a retry will not help"
					}
					fmt.Fprintf(os.Stderr, "%v\n(%s)\n", err, hint)
				}
				return exitError(1)
			}
			if s.JSON {
				return PrintJSON(tryJSON(res))
			}
			printTry(os.Stdout, spec.Name, in, res, limit)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&paramsFile, "params", "", "YAML file with the params: a mapping, or a chain file (its step running TASK)")
	f.StringVar(&stepID, "step", "", "with a chain file in --params: the step whose params to use")
	f.StringArrayVar(&sets, "set", nil, "set a param: name=value, or name.key=value inside a mapping (repeatable; values are YAML)")
	f.BoolVar(&noRobots, "no-robots", false, "ignore robots.txt")
	f.BoolVar(&renderPage, "render", false, "render the page in headless Chromium (Debian's chromium) first, as a step with render: always does, for pages built by JavaScript; with a chain file in --params, with its step's render: options and actions, each printed with its outcome and time")
	f.StringVar(&shots, "screenshot", "", "with --render: keep a PNG of the page after each action (and of a failed page) in `DIR`")
	f.DurationVar(&timeout, "timeout", 0, "give up after this long (default: the task's timeout)")
	f.StringVar(&archived, "from-archive", "", "read the page from the archive `DIR_OR_URL` (a chain's archive.to) instead of fetching it: the newest archived response of its URL")
	f.StringVar(&archiveRun, "run", "", "with --from-archive: the response the run `RUN_ID` archived")
	f.IntVar(&limit, "limit", 10, "items to print in full (0: all); --json prints all")
	private.add(cmd, "fetch loopback and private addresses (a local site); link-local and cloud metadata stay refused")
	return cmd
}

// tryStep is the step of a chain file in --params that runs task (or stepID), as a
// worker gets it; nil when the file is a plain mapping of params.
func tryStep(ctx context.Context, s *Settings, file, task, stepID string) (*crawl.PlanStep, error) {
	data, err := readChainFile(ctx, file)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if yaml.Unmarshal(data, &doc) != nil || doc["steps"] == nil {
		return nil, nil
	}
	plan, err := s.loadChainFile(ctx, file, nil)
	if err != nil {
		return nil, err
	}
	for i, st := range plan.Steps {
		if (stepID != "" && st.ID == stepID) || (stepID == "" && st.Task == task) {
			return &plan.Steps[i], nil
		}
	}
	return nil, nil
}

// printAction prints how each browser action went, one line each: on standard output,
// or on standard error beside --json.
func printAction(toStderr bool) func(render.ActionOutcome) {
	w := os.Stdout
	if toStderr {
		w = os.Stderr
	}
	return func(o render.ActionOutcome) {
		what := "ok"
		switch {
		case o.Err != nil:
			what = "failed: " + o.Err.Error()
		case o.Note != "":
			what = o.Note
		}
		fmt.Fprintf(w, "%-32s %-28s %8s  %s\n", o.Path, o.Action, o.Took.Round(time.Millisecond), what)
		if o.Screenshot != "" {
			fmt.Fprintf(w, "%-32s screenshot %s\n", "", o.Screenshot)
		}
	}
}

// tryFetcher applies --no-robots to every request.
type tryFetcher struct {
	f            crawl.Fetcher
	ignoreRobots bool
}

func (t tryFetcher) Fetch(ctx context.Context, req *crawl.Request) (*crawl.Response, error) {
	if t.ignoreRobots {
		r := *req
		r.IgnoreRobots = true
		req = &r
	}
	return t.f.Fetch(ctx, req)
}

// readTryParams reads --params: a mapping of params, or a chain file.
func readTryParams(ctx context.Context, file string, spec crawl.TaskSpec, stepID string) (map[string]any, error) {
	data, err := readChainFile(ctx, file)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if doc == nil {
		return map[string]any{}, nil
	}
	steps, isChain := doc["steps"].([]any)
	if !isChain {
		if stepID != "" {
			return nil, fmt.Errorf("--step %s: %s is not a chain file (it has no steps)", stepID, file)
		}
		return doc, nil
	}
	var ids []string
	var step map[string]any
	for _, raw := range steps {
		st, _ := raw.(map[string]any)
		id := fmt.Sprint(st["id"])
		ids = append(ids, fmt.Sprintf("%s (%v)", id, st["task"]))
		if step != nil {
			continue
		}
		if (stepID != "" && id == stepID) || (stepID == "" && st["task"] == spec.Name) {
			step = st
		}
	}
	if step == nil {
		want := "runs " + spec.Name
		if stepID != "" {
			want = "is " + stepID
		}
		return nil, fmt.Errorf("%s: no step %s; its steps: %s", file, want, strings.Join(ids, ", "))
	}
	if task := fmt.Sprint(step["task"]); task != spec.Name {
		return nil, fmt.Errorf("%s: step %s runs %s, not %s", file, stepID, task, spec.Name)
	}
	params := map[string]any{}
	if defaults, ok := doc["defaults"].(map[string]any); ok {
		if dp, ok := defaults["params"].(map[string]any); ok {
			for k, v := range dp {
				if _, declared := spec.Param(k); declared {
					params[k] = v
				}
			}
		}
	}
	if sp, ok := step["params"].(map[string]any); ok {
		for k, v := range sp {
			params[k] = v
		}
	}
	return params, nil
}

// applyTrySet applies name=value or name.key.key=value.
func applyTrySet(params map[string]any, set string) error {
	lhs, value, ok := strings.Cut(set, "=")
	if !ok || lhs == "" {
		return fmt.Errorf("--set %s: write it as name=value or name.key=value", set)
	}
	var v any = value
	if err := yaml.Unmarshal([]byte(value), &v); err != nil || v == nil {
		v = value
	}
	path := strings.Split(lhs, ".")
	m := params
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
	return nil
}

// checkTryParams validates the params as a one-step chain, exactly as `trawler
// validate` would, and returns them typed with the task's defaults.
func checkTryParams(task string, params map[string]any, robots bool) (crawl.Params, []string) {
	doc := map[string]any{
		"name":   "try",
		"robots": robots,
		"steps":  []any{map[string]any{"id": "try", "task": task, "params": params}},
	}
	data, err := yaml.Marshal(doc)
	if err != nil {
		return nil, []string{err.Error()}
	}
	c, err := crawl.Load("params", data, crawl.LoadOptions{Sinks: knownSinks, Vars: StackVars})
	if err != nil {
		var ps crawl.Problems
		if !errors.As(err, &ps) {
			return nil, []string{err.Error()}
		}
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = strings.TrimPrefix(p.Msg, `step "try": `)
		}
		return nil, out
	}
	plan, err := c.Compile(nil)
	if err != nil {
		return nil, []string{err.Error()}
	}
	return plan.Steps[0].Params, nil
}

type tryItem struct {
	Key  string         `json:"key"`
	URL  string         `json:"url,omitempty"`
	Data map[string]any `json:"data"`
}

func tryJSON(res crawl.Result) map[string]any {
	items := make([]tryItem, len(res.Items))
	for i, it := range res.Items {
		items[i] = tryItem{Key: it.Key, URL: it.URL, Data: it.Data}
	}
	next := res.Next
	if next == nil {
		next = []crawl.Input{}
	}
	notes := res.Notes
	if notes == nil {
		notes = []string{}
	}
	return map[string]any{"items": items, "next": next, "skipped": res.Skipped, "notes": notes}
}

func printTry(w io.Writer, task string, in crawl.Input, res crawl.Result, limit int) {
	fmt.Fprintf(w, "%s %s: %s, %s, %d skipped\n", task, in.Describe(), tryPlural(len(res.Items), "item"), tryPlural(len(res.Next), "next input"), res.Skipped)
	if len(res.Notes) > 0 {
		fmt.Fprintln(w, "\nnotes (stored anyway)")
		for _, n := range res.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	for i, it := range res.Items {
		if limit > 0 && i == limit {
			fmt.Fprintf(w, "\n… %d more items (--limit 0 prints all, --json prints them as JSON)\n", len(res.Items)-limit)
			break
		}
		fmt.Fprintf(w, "\nitem %d  key %s\n", i+1, it.Key)
		names := make([]string, 0, len(it.Data))
		width := 0
		for k := range it.Data {
			names = append(names, k)
			width = max(width, len(k))
		}
		sort.Strings(names)
		for _, k := range names {
			v := it.Data[k]
			fmt.Fprintf(w, "  %-*s  %-6s  %s\n", width, k, tryTypeOf(v), tryShow(v))
		}
	}
	if len(res.Next) > 0 {
		fmt.Fprintln(w, "\nnext inputs")
		for i, n := range res.Next {
			if i == 20 {
				fmt.Fprintf(w, "  … %d more (--json prints all)\n", len(res.Next)-20)
				break
			}
			to := n.Task
			if to == "" {
				to = "(every consumer)"
			}
			line := fmt.Sprintf("  → %s  %s", to, n.Describe())
			if len(n.Vars) > 0 {
				line += "  " + tryShow(n.Vars)
			}
			fmt.Fprintln(w, line)
		}
	}
	if len(res.Items) == 0 && len(res.Next) == 0 {
		fmt.Fprintln(w, "\nnothing extracted: check the items selector (or path) against the page source; a field's required: true reports what is missing")
	}
}

func tryPlural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// tryTypeOf names a field value's type as the chain file's types do.
func tryTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case int, int64, int32, uint, uint64:
		return "int"
	case float32, float64:
		return "float"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// tryShow renders a value on one line, shortened.
func tryShow(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = fmt.Sprintf("%q", x)
	case nil:
		return "-"
	default:
		b, err := json.Marshal(x)
		if err != nil {
			s = fmt.Sprint(x)
		} else {
			s = string(b)
		}
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:117]) + "…"
	}
	return s
}
