package crawl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

func renderRegistry() *crawl.Registry {
	r := testRegistry()
	noop := func(context.Context, *crawl.Env, crawl.Input) (crawl.Result, error) { return crawl.Result{}, nil }
	r.Register(crawl.TaskFunc(crawl.TaskSpec{Name: "news.page", HTML: true, Params: []crawl.Param{{Name: "query", Type: crawl.String}, {Name: "pages", Type: crawl.Int}}, Output: []crawl.Field{{Name: "title", Type: crawl.String}}}, noop))
	return r
}

// `render:` reads as a mode alone or a mapping of options, and reaches the plan
// with its defaults; `never` leaves the step without one.
func TestRenderReachesThePlan(t *testing.T) {
	reg := renderRegistry()
	src := `name: news
steps:
  - id: a
    task: news.page
    render: auto
  - id: b
    task: news.page
    render: {mode: always, wait_for: '#list li', idle: false, timeout: 5s, block: [], viewport: 800x600, script: 'window.scrollTo(0, 1e6)', screenshot: true}
  - id: c
    task: news.page
    render: never
  - id: d
    task: news.page
    render: {mode: auto, wait_for: '#list li'}
`
	c, err := crawl.Load("news.yaml", []byte(src), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := p.Steps[0].Render, p.Steps[1].Render
	if a == nil || a.Mode != "auto" || a.Timeout != crawl.DefaultRenderWait || !a.Idle || len(a.Block) != 3 || a.Viewport != "1280x800" {
		t.Errorf("a: %+v", a)
	}
	if b == nil || b.Mode != "always" || b.WaitFor != "#list li" || b.Idle || b.Timeout != 5*time.Second || len(b.Block) != 0 || !b.Screenshot || b.Script == "" {
		t.Errorf("b: %+v", b)
	}
	if w, h := b.ViewportSize(); w != 800 || h != 600 {
		t.Errorf("viewport %dx%d", w, h)
	}
	if d := p.Steps[3].Render; d.Idle || d.WaitFor != "#list li" {
		t.Errorf("d: with wait_for, no idle wait unless asked: %+v", d)
	}
	if p.Steps[2].Render != nil {
		t.Errorf("never: %+v", p.Steps[2].Render)
	}
}

// Every mistake in `render:` is reported on its line with the fix.
func TestRenderProblems(t *testing.T) {
	src := `name: news
steps:
  - id: a
    task: news.page
    render: sometimes
  - id: b
    task: news.page
    render: {mode: auto, timeout: 10}
  - id: c
    task: news.page
    render: {mode: always, wait: '#x'}
  - id: d
    task: news.story
    render: always
  - id: e
    task: news.page
    render: {mode: always, block: [images], viewport: big}
  - id: f
    task: news.page
    render: {mode: always, timeout: 1m}
`
	_, err := crawl.Load("news.yaml", []byte(src), crawl.LoadOptions{Registry: renderRegistry()})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`news.yaml:5: step 1: render "sometimes": use never (plain HTTP), always (every page in a browser) or auto`,
		"news.yaml:8: `render.timeout`: bad duration \"10\": give a unit, e.g. 10s or 10m",
		"news.yaml:11: step 3.render: unknown field `wait`; valid fields: mode, wait_for, idle, timeout,",
		`news.yaml:12: step "d": render: task news.story does not read HTML pages; render applies to HTML steps`,
		`news.yaml:17: step 5: render.block: "images" is not a resource type (did you mean "image"?)`,
		`news.yaml:17: step 5: render.viewport "big": write WIDTHxHEIGHT in pixels`,
		`news.yaml:18: step "f": render.timeout 1m0s leaves no time in the step's timeout 30s`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// `render.actions` reaches the plan in order, a repeat with its loop and an optional
// click with its own timeout.
func TestRenderActionsReachThePlan(t *testing.T) {
	reg := renderRegistry()
	src := `name: shop
secrets:
  shop_user: {env: SHOP_USER}
  shop_password: {file: /run/secrets/shop-password}
steps:
  - id: list
    task: news.page
    params: {query: boots}
    render:
      mode: always
      har: true
      actions:
        - click: "#consent .accept"
          optional: true
          timeout: 1s
        - fill: {"#q": "boots"}
        - fill: {"#password": {secret_file: /run/secrets/shop}}
        - select: {"select[name=size]": "42"}
        - press: Enter
        - wait_for: ".item"
        - wait: 500ms
        - scroll: bottom
        - scroll: "#footer"
        - script: "window.x = 1"
        - repeat:
            do: [click: "button.more"]
            until: {count: ".item", at_least: 35}
            max: 10
        - fill: {"#user": {secret: shop_user}}
        - fill: {"#password": {secret: shop_password}}
        - fill: {"#q": {param: query}}
        - repeat: {do: [scroll: bottom], until: {no_change: true}, max: 50}
        - repeat: {do: [scroll: bottom], until: {no_change: 3s}, max: 50}
`
	c, err := crawl.Load("shop.yaml", []byte(src), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Steps[0].Render.HAR {
		t.Errorf("har: true did not reach the plan")
	}
	acts := p.Steps[0].Render.Actions
	var got []string
	for _, a := range acts {
		got = append(got, a.String())
	}
	want := `click "#consent .accept"|fill "#q"|fill "#password"|select "select[name=size]"|press Enter|wait_for ".item"|wait 500ms|scroll bottom|scroll "#footer"|script|repeat|fill "#user"|fill "#password"|fill "#q"|repeat|repeat`
	if strings.Join(got, "|") != want {
		t.Fatalf("actions %q\nwant %q", strings.Join(got, "|"), want)
	}
	if a := acts[0]; !a.Optional || a.Timeout != time.Second {
		t.Errorf("optional click: %+v", a)
	}
	if a := acts[1]; a.Value != "boots" || a.Timeout != 0 {
		t.Errorf("fill: %+v", a)
	}
	if a := acts[2]; a.SecretFile != "/run/secrets/shop" || a.Value != "" {
		t.Errorf("fill from a secret file: %+v", a)
	}
	if r := acts[10]; r.Max != 10 || r.Until == nil || r.Until.Count != ".item" || r.Until.AtLeast != 35 || len(r.Do) != 1 || r.Do[0].Selector != "button.more" {
		t.Errorf("repeat: %+v", r)
	}
	// A named secret travels as where the worker reads it, never as a value; a param
	// is typed as the step's value.
	if a := acts[11]; a.Secret != "shop_user" || a.SecretEnv != "SHOP_USER" || a.SecretFile != "" || a.Value != "" {
		t.Errorf("fill from a secret in the environment: %+v", a)
	}
	if a := acts[12]; a.Secret != "shop_password" || a.SecretFile != "/run/secrets/shop-password" || a.SecretEnv != "" || a.Value != "" {
		t.Errorf("fill from a secret in a file: %+v", a)
	}
	if a := acts[13]; a.Value != "boots" {
		t.Errorf("fill from a param: %+v", a)
	}
	// A round that changes nothing ends a loop once nothing changes for a second, or as
	// long as no_change says.
	if u := acts[14].Until; u == nil || !u.NoChange || u.NoChangeFor != time.Second {
		t.Errorf("no_change: true: %+v", u)
	}
	if u := acts[15].Until; u == nil || !u.NoChange || u.NoChangeFor != 3*time.Second {
		t.Errorf("no_change: 3s: %+v", u)
	}
}

// Every mistake in `render.actions` is reported on its line with the fix.
func TestRenderActionProblems(t *testing.T) {
	src := `name: shop
secrets:
  shop_password: {file: /run/secrets/shop-password}
  Bad: {file: relative/path}
  both: {file: /a, env: B}
  dashed: {env: SHOP-PASSWORD}
steps:
  - id: list
    task: news.page
    params: {query: boots}
    render:
      mode: always
      timeout: 10s
      actions:
        - klick: "#more"
        - wait: 5
        - repeat: {do: [click: "#more"]}
        - repeat: {do: [click: "#more"], until: {count: ".item"}, max: 3}
        - fill: "#q"
        - press: Entr
        - click: "#x"
          timeout: 20s
        - scroll: ""
        - fill: {"#password": {secret: shop_pasword}}
        - fill: {"#password": {secret_file: secrets/shop}}
        - fill: {"#q": {param: qurey}}
        - fill: {"#q": {param: query, secret: shop_password}}
        - fill: {"#q": {value: boots}}
        - repeat: {do: [scroll: bottom], until: {no_change: 5}, max: 9}
        - repeat: {do: [scroll: bottom], until: {no_change: 10s}, max: 9}
`
	_, err := crawl.Load("shop.yaml", []byte(src), crawl.LoadOptions{Registry: renderRegistry()})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"shop.yaml:4: secrets.Bad: a secret's name uses lowercase letters, digits, - and _",
		"shop.yaml:4: secrets.Bad.file \"relative/path\": write the absolute path of the file on the workers, e.g. /run/secrets/Bad",
		"shop.yaml:5: secrets.both takes one of {file: /absolute/path} (a file on every worker holding the secret, one line) or {env: VARIABLE}",
		"shop.yaml:6: secrets.dashed.env \"SHOP-PASSWORD\" is not a variable name; write e.g. env: SHOP_PASSWORD",
		"shop.yaml:15: step 1: render.actions[0]: unknown action `klick` (did you mean \"click\"?); actions: click, fill, select, press, scroll, wait_for, wait, script, repeat",
		"shop.yaml:16: `render.actions[1].wait`: bad duration \"5\": give a unit, e.g. 5s or 5m",
		"shop.yaml:17: step 1: render.actions[2].repeat needs until: {count: SELECTOR, at_least: N}, {gone: SELECTOR} or {no_change: true}",
		"shop.yaml:17: step 1: render.actions[2].repeat needs max: N (1 to 1000)",
		"shop.yaml:18: step 1: render.actions[3].repeat.until.count needs at_least: N",
		"shop.yaml:19: step 1: render.actions[4].fill takes one `SELECTOR: value`, e.g. fill: {\"#email\": \"me@example.com\"}",
		"shop.yaml:20: step 1: render.actions[5].press \"Entr\" is not a key (did you mean \"Enter\"?)",
		"shop.yaml:21: step 1: render.actions[6] click \"#x\": its timeout 20s is longer than render.timeout 10s",
		"shop.yaml:23: step 1: render.actions[7].scroll needs a CSS selector",
		"shop.yaml:24: step \"list\": render.actions[8] fill \"#password\": no secret \"shop_pasword\" (did you mean \"shop_password\"?); declared: Bad, both, dashed, shop_password; or declare it at the top of the chain file: secrets: {shop_pasword: {file: /run/secrets/shop_pasword}} (or {env: VARIABLE})",
		"shop.yaml:25: step 1: render.actions[9].fill: secret_file \"secrets/shop\": write the absolute path of the file the workers read the secret from",
		"shop.yaml:26: step \"list\": render.actions[10] fill \"#q\": the step has no param \"qurey\" (did you mean \"query\"?); its params: query",
		"shop.yaml:27: step 1: render.actions[11].fill: write a value, or one of {secret: NAME} (a secret the chain's secrets: declares), {param: NAME} (one of the step's params) or {secret_file: /absolute/path}",
		"shop.yaml:28: step 1: render.actions[12].fill value: unknown field `value`; valid fields: secret, param, secret_file",
		"shop.yaml:29: `render.actions[13].repeat.until.no_change`: bad duration \"5\": give a unit, e.g. 5s or 5m",
		"shop.yaml:30: step 1: render.actions[14].repeat.until.no_change 10s leaves no time to scroll within render.timeout 10s; shorten it or raise render.timeout",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
