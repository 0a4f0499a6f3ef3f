package crawl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

func testRegistry() *crawl.Registry {
	r := crawl.NewRegistry()
	noop := func(context.Context, *crawl.Env, crawl.Input) (crawl.Result, error) { return crawl.Result{}, nil }
	r.Register(
		crawl.TaskFunc(crawl.TaskSpec{Name: "news.feed", Params: []crawl.Param{
			{Name: "base_url", Type: crawl.URL, Default: "http://example.test"},
			{Name: "pages", Type: crawl.Int, Default: 3, Doc: "feed pages to follow"},
		}}, noop),
		crawl.TaskFunc(crawl.TaskSpec{Name: "news.story", Timeout: 20 * time.Second, Retries: 5,
			Output: []crawl.Field{{Name: "title", Type: crawl.String}, {Name: "kids", Type: crawl.List}}}, noop),
		crawl.TaskFunc(crawl.TaskSpec{Name: "news.comment",
			Params: []crawl.Param{{Name: "token", Type: crawl.String, Required: true, Doc: "API token"}},
			Output: []crawl.Field{{Name: "text", Type: crawl.String}, {Name: "kids", Type: crawl.List}}}, noop),
	)
	return r
}

const good = `name: news
defaults:
  timeout: 10s
  retries: 2
  batch: 25
steps:
  - id: feed
    task: news.feed
    from: feed
    max_depth: 5
    params: {pages: 4}
  - id: story
    task: news.story
    from: feed
  - id: comments
    task: news.comment
    from: [story, comments]
    each: kids
    max_depth: 3
    params: {token: abc}
`

func TestLoadGoodChain(t *testing.T) {
	reg := testRegistry()
	c, err := crawl.Load("news.yaml", []byte(good), crawl.LoadOptions{Registry: reg, Sets: []string{"feed.pages=9"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	feed, story, comments := p.Steps[0], p.Steps[1], p.Steps[2]
	if feed.Params.Int("pages") != 9 || feed.Params.String("base_url") != "http://example.test" {
		t.Errorf("feed params = %v", feed.Params)
	}
	if !feed.Root || story.Root || comments.Root {
		t.Errorf("roots: feed %v story %v comments %v", feed.Root, story.Root, comments.Root)
	}
	if story.Timeout != 10*time.Second || story.Retries != 2 || story.Batch != 25 {
		t.Errorf("defaults not applied to story: %+v", story)
	}
	if got := len(feed.Consumers); got != 2 {
		t.Fatalf("feed has %d consumers, want itself and story", got)
	}
	if c := story.Consumers[0]; c.Step != 2 || c.Each != "kids" || c.Self {
		t.Errorf("story consumer = %+v", c)
	}
	if c := comments.Consumers[0]; !c.Self || c.MaxDepth != 3 {
		t.Errorf("comments self consumer = %+v", c)
	}
	if len(story.Store) != 1 || story.Store[0] != "jsonl" {
		t.Errorf("story store = %v, want the jsonl default for a task with output", story.Store)
	}
}

func TestLoadRecrawlPolicy(t *testing.T) {
	reg := testRegistry()
	src := "name: x\nsteps:\n  - id: feed\n    task: news.feed\n  - id: story\n    task: news.story\n    from: feed\n    recrawl: {min: 15m, max: 2d, target_miss: 0.05}\n  - id: other\n    task: news.story\n    from: feed\n    recrawl: {}\n"
	c, err := crawl.Load("f.yaml", []byte(src), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	want := crawl.Recrawl{Min: 15 * time.Minute, Max: 48 * time.Hour, TargetMiss: 0.05, PerRun: crawl.DefaultRecrawlPerRun}
	if got := p.Steps[1].Recrawl; got == nil || *got != want {
		t.Errorf("story recrawl = %+v, want %+v", got, want)
	}
	def := crawl.Recrawl{Min: crawl.DefaultRecrawlMin, Max: crawl.DefaultRecrawlMax, TargetMiss: crawl.DefaultRecrawlTargetMiss, PerRun: crawl.DefaultRecrawlPerRun}
	if got := p.Steps[2].Recrawl; got == nil || *got != def {
		t.Errorf("other recrawl = %+v, want the defaults %+v", got, def)
	}
	if p.Steps[0].Recrawl != nil || !p.Steps[0].Consumers[0].Recrawl {
		t.Errorf("feed: recrawl %v, consumer %+v: want none on the feed, its consumer marked", p.Steps[0].Recrawl, p.Steps[0].Consumers[0])
	}
}

func TestLoadRevisit(t *testing.T) {
	reg := testRegistry()
	src := "name: x\nsteps:\n  - id: feed\n    task: news.feed\n  - id: story\n    task: news.story\n    from: feed\n    revisit: true\n  - id: other\n    task: news.story\n    from: feed\n"
	c, err := crawl.Load("f.yaml", []byte(src), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Steps[1].Revisit || p.Steps[2].Revisit || p.Steps[0].Revisit {
		t.Errorf("revisit: feed %v story %v other %v, want only story", p.Steps[0].Revisit, p.Steps[1].Revisit, p.Steps[2].Revisit)
	}
	if cs := p.Steps[0].Consumers; !cs[0].Revisit || cs[1].Revisit {
		t.Errorf("feed consumers = %+v, want story marked revisit and other not", cs)
	}
}

func TestLoadProblems(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		sets []string
		want []string
	}{
		{"yaml syntax", "name: x\nsteps:\n  - id: a\n   task: b\n", nil,
			[]string{"f.yaml:2: YAML syntax: did not find expected '-' indicator (check indentation and quoting from this line on)"}},
		{"empty", "", nil, []string{"f.yaml: file is empty; a chain needs `name:` and `steps:` (see examples/demo.yaml)"}},
		{"unknown chain field", "name: x\nstesp: []\n", nil, []string{
			"f.yaml:2: chain: unknown field `stesp` (did you mean \"steps\"?); valid fields: name, tenant, robots, priority, quota, max_outage, middlewares, defaults, on_violation, steps, notify, secrets",
			"f.yaml:1: chain has no `steps:`; add a list of steps, each with `id:` and `task:`"}},
		{"unknown task", "name: x\nsteps:\n  - id: a\n    task: news.stroy\n", nil, []string{
			"f.yaml:3: step \"a\": unknown task \"news.stroy\" (did you mean \"news.story\"?); registered tasks: news.comment, news.feed, news.story"}},
		{"unknown task with defaults.params", "name: x\ndefaults:\n  params: {base_url: http://x.test}\nsteps:\n  - id: a\n    task: news.stroy\n", nil, []string{
			"f.yaml:5: step \"a\": unknown task \"news.stroy\" (did you mean \"news.story\"?); registered tasks: news.comment, news.feed, news.story"}},
		{"unknown step field", "name: x\nsteps:\n  - id: a\n    task: news.feed\n    form: b\n", nil, []string{
			"f.yaml:5: step 1: unknown field `form` (did you mean \"from\"?); valid fields: id, task, biz, params, from, each, max_depth, store, dedup, changes, timeout, retries, batch, concurrency, parallel, priority, shared, affinity, middlewares, follow, revisit, recrawl, render, politeness, urls_file, expect, archive, needs, pool_site"}},
		{"unknown param", "name: x\nsteps:\n  - id: a\n    task: news.feed\n    params: {pagse: 2}\n", nil, []string{
			"f.yaml:5: step \"a\": task news.feed has no param `pagse` (did you mean \"pages\"?); its params: base_url, pages"}},
		{"bad param type", "name: x\nsteps:\n  - id: a\n    task: news.feed\n    params: {pages: many}\n", nil, []string{
			"f.yaml:5: step \"a\": param `pages`: want an integer, got \"many\""}},
		{"missing required param", "name: x\nsteps:\n  - id: a\n    task: news.comment\n", nil, []string{
			"f.yaml:3: step \"a\": task news.comment needs param `token` (API token); add it under `params:`"}},
		{"follow without a feeding step", "name: x\nsteps:\n  - id: feed\n    task: news.feed\n    from: feed\n    max_depth: 3\n    follow: true\n", nil, []string{
			"f.yaml:7: step \"feed\": `follow: true` lets the batch of a step feeding this one run its inputs; list that step in `from`, or remove `follow`"}},
		{"follow not a bool", "name: x\nsteps:\n  - id: feed\n    task: news.feed\n  - id: b\n    task: news.story\n    from: feed\n    follow: often\n", nil, []string{
			"f.yaml:8: `follow` must be true or false, got \"often\""}},
		{"revisit not a bool", "name: x\nsteps:\n  - id: feed\n    task: news.feed\n  - id: b\n    task: news.story\n    from: feed\n    revisit: twice\n", nil, []string{
			"f.yaml:8: `revisit` must be true or false, got \"twice\""}},
		{"unknown from", "name: x\nsteps:\n  - id: feed\n    task: news.feed\n  - id: b\n    task: news.story\n    from: fede\n", nil, []string{
			"f.yaml:5: step \"b\": `from: fede` names no step (did you mean \"feed\"?); steps: feed, b"}},
		{"cycle", "name: x\nsteps:\n  - id: a\n    task: news.story\n    from: b\n  - id: b\n    task: news.story\n    from: a\n", nil, []string{
			"f.yaml:3: steps b → a → b form a cycle; only a step consuming its own outputs (with max_depth) may loop"}},
		{"self without max_depth", "name: x\nsteps:\n  - id: a\n    task: news.feed\n    from: a\n", nil, []string{
			"f.yaml:3: step \"a\" consumes its own outputs but has no `max_depth`; add `max_depth: N` to bound the recursion"}},
		{"bad durations", "name: x\ndefaults:\n  timeout: 30\nsteps:\n  - id: a\n    task: news.feed\n    timeout: soon\n", nil, []string{
			"f.yaml:3: `defaults.timeout`: bad duration \"30\": give a unit, e.g. 30s or 30m",
			"f.yaml:7: `timeout`: bad duration \"soon\": write it like 30s, 2m, 1h30m or 7d"}},
		{"recrawl min above max", "name: x\nsteps:\n  - id: a\n    task: news.story\n    recrawl: {min: 7d, max: 10m}\n", nil, []string{
			"f.yaml:5: step 1: recrawl.min 7d is longer than recrawl.max 10m: min is the shortest interval between two visits of a record and max the longest, e.g. recrawl: {min: 10m, max: 7d}"}},
		{"recrawl bad keys and values", "name: x\nsteps:\n  - id: a\n    task: news.story\n    dedup: new\n    recrawl:\n      mni: 10m\n      max: a week\n      target_miss: 2\n", nil, []string{
			"f.yaml:7: step 1.recrawl: unknown field `mni` (did you mean \"min\"?); valid fields: min, max, target_miss, per_run",
			"f.yaml:8: `recrawl.max`: bad duration \"a week\": write it like 30s, 2m, 1h30m or 7d",
			"f.yaml:9: step 1: recrawl.target_miss \"2\": use a share between 0 and 1, e.g. 0.1 (at most a 10% chance that a record holds an unseen change when it is visited)",
			"f.yaml:3: step \"a\": recrawl plans from dedup's verdicts (new, changed, unchanged); set `dedup: changed` on the step, not new"}},
		{"each on a non-list field", "name: x\nsteps:\n  - id: s\n    task: news.story\n  - id: c\n    task: news.story\n    from: s\n    each: title\n", nil, []string{
			"f.yaml:5: step \"c\": `each: title`: field `title` of task news.story is a string, not a list"}},
		{"each on a missing field", "name: x\nsteps:\n  - id: s\n    task: news.story\n  - id: c\n    task: news.story\n    from: s\n    each: kid\n", nil, []string{
			"f.yaml:5: step \"c\": `each: kid`: task news.story (step \"s\") has no output field `kid`; its fields: title, kids"}},
		{"duplicate ids and unknown sink", "name: x\nsteps:\n  - id: a\n    task: news.feed\n  - id: a\n    task: news.story\n    store: [kafak]\n", nil, []string{
			"f.yaml:5: step id \"a\" is already used by the step on line 3; step ids must be unique",
			"f.yaml:5: step \"a\": store: unknown sink \"kafak\"; available: jsonl"}},
		{"bad set", "name: x\nsteps:\n  - id: a\n    task: news.feed\n", []string{"b.pages=2", "pages"}, []string{
			"f.yaml: --set b.pages=2: no step `b`; steps: a",
			"f.yaml: --set pages: write it as step.param=value (or param=value for every step)"}},
		{"bad dedup", "name: x\nsteps:\n  - id: a\n    task: news.feed\n    dedup: chnaged\n", nil, []string{
			"f.yaml:3: step \"a\": dedup \"chnaged\" (did you mean \"changed\"?): use changed (store new and changed items), new (new items only) or off"}},
		{"max_depth 0", "name: x\nsteps:\n  - id: a\n    task: news.feed\n    from: a\n    max_depth: 0\n", nil, []string{
			"f.yaml:6: `max_depth: 0`: use 1 or more, the number of times the step may follow its own outputs"}},
		{"problems under defaults point at their line", "name: x\npriority: 9\ndefaults:\n  retries: 2\n  batch: -5\n  dedup: nwe\n  store: [kafak]\n  params: {pagez: 2}\nsteps:\n  - id: a\n    task: news.feed\n", nil, []string{
			"f.yaml:5: defaults: batch -5: use 1 to 1000 inputs per activity",
			"f.yaml:2: priority 9: use 1 (highest) to 5 (lowest), or leave it out",
			"f.yaml:7: defaults.store: unknown sink \"kafak\"; available: jsonl",
			"f.yaml:6: defaults: dedup \"nwe\" (did you mean \"new\"?): use changed (store new and changed items), new (new items only) or off",
			"f.yaml:8: defaults.params: no step's task has a param `pagez`; remove it or check the spelling"}},
		{"sizes out of range", "name: x\ndefaults:\n  parallel: 0\nsteps:\n  - id: a\n    task: news.feed\n    batch: 0\n    concurrency: 1000000\n    parallel: 101\n", nil, []string{
			"f.yaml:3: defaults: parallel 0: use 1 to 100 batches in flight per step",
			"f.yaml:7: step 1: batch 0: use 1 to 1000 inputs per activity",
			"f.yaml:8: step 1: concurrency 1000000: use 1 to 1000 inputs fetched at once inside one batch",
			"f.yaml:9: step 1: parallel 101: use 1 to 100 batches in flight per step"}},
		{"bad politeness", "name: x\ndefaults:\n  politeness:\n    rate: fast\n    delay: -1s\n    concurrency: 0\n    group: hosts\n    robots: obeys\n    jiter: 1s\nsteps:\n  - id: a\n    task: news.feed\n    politeness:\n      rate: 3/d\n      autothrottle: {target: 0}\n      hosts:\n        \"http://a.test/x\": {rate: 1/s}\n        \"*.b.test\": {hosts: {}}\n", nil, []string{
			"f.yaml:4: defaults.politeness: rate \"fast\": write requests per unit of time, e.g. 2/s, 30/m or 100/h",
			"f.yaml:5: defaults.politeness: delay \"-1s\": use a duration from 0 to 10m, e.g. 250ms, 2s or 1m",
			"f.yaml:6: defaults.politeness: concurrency \"0\": use 1 to 1000, the requests in flight at one host across the whole fleet",
			"f.yaml:7: defaults.politeness: group \"hosts\" is not one of host, domain, ip (did you mean \"host\"?) (host gives each host its own budget; domain shares one among the hosts of a registrable domain; ip among the hosts on one address)",
			"f.yaml:8: defaults.politeness: robots \"obeys\" is not one of obey, ignore (did you mean \"obey\"?) (obey follows the host's robots.txt, its Crawl-delay and Request-rate; ignore fetches what it forbids too)",
			"f.yaml:9: defaults.politeness: unknown field `jiter` (did you mean \"jitter\"?); valid fields: rate, concurrency, delay, jitter, autothrottle, robots, group, hosts",
			"f.yaml:14: step 1.politeness: rate \"3/d\": the unit after / is s, m or h, e.g. 2/s, 30/m or 100/h",
			"f.yaml:15: step 1.politeness: autothrottle.target \"0\": use a number above 0, the requests in flight the host should see on average, e.g. 1 or 2.5",
			"f.yaml:17: step 1.politeness.hosts: \"http://a.test/x\" is not a host pattern: write a host name like example.com, or *.example.com for every host under it (no scheme, port or path)",
			"f.yaml:18: step 1.politeness.hosts[*.b.test]: hosts cannot nest; list every pattern under the one `hosts:` of the politeness block"}},
		{"bad expectations", "name: x\non_violation: stop\nsteps:\n  - id: a\n    task: news.feed\n  - id: s\n    task: news.story\n    from: a\n    expect:\n      min_items: {fraction: 0.5}\n      coverage: {title: 1.5, titel: 0.9}\n      fields:\n        title: {type: text, match: '(unclosed'}\n        kids: {min: 1}\n      max_new_shares: 0.2\n", nil, []string{
			"f.yaml:2: chain: on_violation \"stop\": use mark (the run ends completed_with_violations) or fail (the run fails)",
			"f.yaml:10: step 2.expect.min_items: a relative minimum needs both `fraction` and `of_last`, e.g. {fraction: 0.5, of_last: 5}",
			"f.yaml:11: step 2.expect.coverage.title 1.5: a share runs from 0 (none) to 1 (all); write 0.95 for 95%",
			"f.yaml:13: step 2.expect.fields.title.type \"text\": use one of string, number, int, bool, list, object",
			"f.yaml:13: step 2.expect.fields.title.match \"(unclosed\" is no regular expression: missing closing ): `(unclosed`; write it in Go's RE2 syntax and quote it in single quotes, e.g. '^https://'",
			"f.yaml:15: step 2.expect: unknown field `max_new_shares` (did you mean \"max_new_share\"?); valid fields: min_items, coverage, fields, max_failure_share, max_new_share, on_violation",
			"f.yaml:11: step \"s\": expect names field `titel`, which task news.story does not produce (did you mean \"title\"?); its fields: title, kids"}},
		{"bad name", "name: My Chain\nsteps:\n  - id: a\n    task: news.feed\n", nil, []string{
			"f.yaml:1: chain name \"My Chain\": use lowercase letters, digits, - and _ (it becomes part of workflow ids)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := crawl.Load("f.yaml", []byte(tc.yaml), crawl.LoadOptions{Registry: testRegistry(), Sets: tc.sets})
			if err == nil {
				t.Fatal("no error")
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestChangesOption: `changes: kafka` is the one way a step asks for change events, and
// they need what they are made from: the old versions HBase keeps, and dedup's changed
// verdicts.
func TestChangesOption(t *testing.T) {
	opts := crawl.LoadOptions{Registry: testRegistry(), Sinks: []string{"jsonl", "kafka", "hbase"}}
	step := "name: x\nsteps:\n  - id: a\n    task: news.story\n"
	c, err := crawl.Load("f.yaml", []byte(step+"    store: [jsonl, hbase]\n    changes: kafka\n"), opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(testRegistry())
	if err != nil || p.Steps[0].Changes != crawl.ChangesKafka {
		t.Fatalf("changes: kafka compiles to %+v (%v), want Changes kafka", p, err)
	}
	if c, _ := crawl.Load("f.yaml", []byte(step+"    store: [all]\n"), opts); c.Steps[0].Changes != "" {
		t.Errorf("a step without `changes:` has Changes %q", c.Steps[0].Changes)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown carrier", step + "    store: [hbase]\n    changes: carrier-pigeon\n",
			"f.yaml:6: step 1: changes \"carrier-pigeon\": the one carrier is kafka; write `changes: kafka` (change events go to the Kafka topic trawler.changes), or leave it out"},
		{"no hbase", step + "    store: [jsonl]\n    changes: kafka\n",
			"f.yaml:6: step \"a\": changes: kafka reads the old values of a changed record from its previous version in HBase; add hbase to the step's store (store: [jsonl, hbase]), or store: [all] on a worker with --hbase"},
		{"dedup new", step + "    store: [hbase]\n    dedup: new\n    changes: kafka\n",
			"f.yaml:7: step \"a\": changes: kafka reports the records dedup judges changed, and with dedup: new a changed record is not stored; set `dedup: changed` on the step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := crawl.Load("f.yaml", []byte(tc.yaml), opts)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

func TestRouteHonoursTaskHintsAndDepth(t *testing.T) {
	reg := testRegistry()
	c, err := crawl.Load("news.yaml", []byte(good), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Compile(reg)
	res := crawl.Result{Next: []crawl.Input{
		{URL: "/p2", Task: "news.feed"},
		{URL: "/s1", Task: "news.story"},
		{URL: "/s2", Task: "news.story"},
	}}
	out, limited := p.Steps[0].Route(crawl.Input{Depth: 4}, res)
	if len(out) != 3 || out[0].Step != 0 || out[0].Input.Depth != 5 || out[1].Step != 1 || out[1].Input.Depth != 0 || limited != 0 {
		t.Fatalf("route = %+v limited %d", out, limited)
	}
	out, limited = p.Steps[0].Route(crawl.Input{Depth: 5}, res)
	if len(out) != 2 || limited != 1 {
		t.Fatalf("at max depth: route = %+v limited %d, want the next page dropped", out, limited)
	}
	story := crawl.Result{Items: []crawl.Item{{Key: "s1", Data: map[string]any{"kids": []int64{7, 8}}}}}
	out, _ = p.Steps[1].Route(crawl.Input{}, story)
	if len(out) != 2 || out[0].Input.Value != int64(7) || out[0].Input.Parent != "s1" || out[0].Step != 2 {
		t.Fatalf("each route = %+v", out)
	}
}

// `${name}` in a chain file takes the running stack's value, `${name:-default}` its
// default without one, and an unset variable is a problem on its line.
func TestLoadFillsStackVariables(t *testing.T) {
	src := "name: x\n# the demo site: ${demo_site}\nsteps:\n  - id: a\n    task: news.feed\n    params: {base_url: '${demo_site:-http://127.0.0.1:8089}'}\n"
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{nil, "http://127.0.0.1:8089"},
		{map[string]string{"demo_site": "http://127.0.0.1:40001"}, "http://127.0.0.1:40001"},
	} {
		c, err := crawl.Load("f.yaml", []byte(src), crawl.LoadOptions{Registry: testRegistry(), Vars: tc.vars})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Steps[0].Params["base_url"]; got != tc.want {
			t.Errorf("vars %v: base_url %v, want %s", tc.vars, got, tc.want)
		}
	}
	bad := "name: x\nsteps:\n  - id: a\n    task: news.feed\n    params: {base_url: '${demo_sit}'}\n"
	_, err := crawl.Load("f.yaml", []byte(bad), crawl.LoadOptions{Registry: testRegistry()})
	if err == nil || !strings.Contains(err.Error(), "f.yaml:5: `${demo_sit}` is not set: run with --data DIR of a running `trawler dev`") {
		t.Errorf("unset variable: %v", err)
	}
	_, err = crawl.Load("f.yaml", []byte(bad), crawl.LoadOptions{Registry: testRegistry(), Vars: map[string]string{"demo_site": "http://x", "redis": "r"}})
	if err == nil || !strings.Contains(err.Error(), "f.yaml:5: `${demo_sit}` is not set (did you mean \"demo_site\"?); set: demo_site, redis") {
		t.Errorf("misspelt variable: %v", err)
	}
}

func TestArchiveOption(t *testing.T) {
	opts := crawl.LoadOptions{Registry: testRegistry()}
	chain := "name: x\ndefaults:\n  archive: {to: /var/warc}\nsteps:\n  - id: a\n    task: news.story\n  - id: b\n    task: news.story\n    archive: {to: \"s3://warc/news?region=eu-west-1\", max_mb: 100, max_age: 1m}\n"
	c, err := crawl.Load("f.yaml", []byte(chain), opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if a := p.Steps[0].Archive; a == nil || *a != (crawl.Archive{To: "/var/warc", MaxMB: crawl.DefaultArchiveMaxMB, MaxAge: crawl.DefaultArchiveMaxAge}) {
		t.Errorf("step a (the default's archive) compiles to %+v", a)
	}
	if a := p.Steps[1].Archive; a == nil || *a != (crawl.Archive{To: "s3://warc/news?region=eu-west-1", MaxMB: 100, MaxAge: time.Minute}) {
		t.Errorf("step b (its own archive) compiles to %+v", a)
	}
	step := "name: x\nsteps:\n  - id: a\n    task: news.story\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"ftp", step + "    archive: {to: \"ftp://x\"}\n",
			"f.yaml:5: step 1: archive.to: ftp://x: ftp:// is not a destination for WARC files; use an absolute directory, file:///DIR or s3://BUCKET/PREFIX (gs:// and azblob:// need their gocloud.dev driver built in)"},
		{"no bucket", step + "    archive: {to: \"s3://\"}\n",
			"f.yaml:5: step 1: archive.to: s3:// names no bucket; write s3://BUCKET/PREFIX?region=REGION"},
		{"relative", step + "    archive: {to: warc}\n",
			"f.yaml:5: step 1: archive.to: \"warc\" is a relative directory, and each worker would resolve it where it runs; write an absolute one, e.g. /var/lib/trawler/warc"},
		{"credentials", step + "    archive: {to: \"s3://warc?secret_access_key=abc\"}\n",
			"f.yaml:5: step 1: archive.to: the URL carries the credential parameter secret_access_key; credentials never go in a chain file: give the worker AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_SHARED_CREDENTIALS_FILE) in its environment"},
		{"no to", step + "    archive: {max_mb: 10}\n",
			"f.yaml:5: step 1: archive needs `to:`, where the WARC files go: an absolute directory, file:///DIR or s3://BUCKET/PREFIX"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := crawl.Load("f.yaml", []byte(tc.yaml), opts)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
}

// A step without `id:` is named after its task, so `from:` and --set can use that name;
// two such steps of one task are told to name themselves.
func TestStepIDTakenFromTask(t *testing.T) {
	reg := testRegistry()
	src := `name: news
steps:
  - task: news.feed
    from: feed
    max_depth: 5
  - task: news.story
    from: feed
`
	c, err := crawl.Load("news.yaml", []byte(src), crawl.LoadOptions{Registry: reg, Sets: []string{"feed.pages=7"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Steps[0].ID != "feed" || c.Steps[1].ID != "story" {
		t.Fatalf("step ids = %q, %q; want feed, story", c.Steps[0].ID, c.Steps[1].ID)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps[0].Params.Int("pages") != 7 || len(p.Steps[0].Consumers) != 2 {
		t.Errorf("feed: params %v, %d consumers; want pages=7 and 2 consumers", p.Steps[0].Params, len(p.Steps[0].Consumers))
	}

	twice := `name: news
steps:
  - task: news.feed
  - task: news.feed
`
	_, err = crawl.Load("twice.yaml", []byte(twice), crawl.LoadOptions{Registry: reg})
	want := `twice.yaml:4: step id "feed" is already used by the step on line 3 (a step without ` + "`id:`" + ` is named after its task); give one of them its own ` + "`id: some_name`"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %s", err, want)
	}
}
