package crawl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Render modes of a step's `render:`.
const (
	RenderNever  = "never"  // plain HTTP only (the default)
	RenderAlways = "always" // every page in a browser
	// RenderAuto fetches over plain HTTP first and renders a page only when the task
	// found nothing on it, remembering the kind of page that needed it.
	RenderAuto = "auto"
)

// Render defaults.
const (
	DefaultRenderWait = 15 * time.Second
	DefaultViewport   = "1280x800"
)

// RenderBlockable are the resource types a step may keep the browser from loading.
var RenderBlockable = []string{"image", "font", "media", "stylesheet", "script", "xhr", "fetch", "websocket", "other"}

// DefaultRenderBlock is what a rendered page does without: nothing a task reads.
var DefaultRenderBlock = []string{"image", "font", "media"}

// Render says whether and how a step's pages are rendered in a headless browser
// before its task reads them. It travels in the plan, so it holds only data.
type Render struct {
	Mode string `json:"mode"`
	// WaitFor is a CSS selector the page must match before its HTML is taken.
	WaitFor string `json:"wait_for,omitempty"`
	// Idle waits, after the load (and WaitFor), until no request has been in flight
	// for half a second: the default without WaitFor.
	Idle bool `json:"idle,omitempty"`
	// Timeout bounds the waits; a page that does not get there fails (retryably).
	Timeout time.Duration `json:"timeout"`
	// Block lists resource types never loaded (RenderBlockable).
	Block []string `json:"block,omitempty"`
	// Viewport is the window, WIDTHxHEIGHT.
	Viewport string `json:"viewport"`
	// Script runs in the page after the waits, before the HTML is taken (scroll,
	// click "more", remove a cookie banner). Its result is ignored.
	Script string `json:"script,omitempty"`
	// Screenshot keeps a PNG of the page with a failure.
	Screenshot bool `json:"screenshot,omitempty"`
	// HAR keeps a HAR file of the page's requests with a failure.
	HAR bool `json:"har,omitempty"`
	// Actions run in order once the page settled, before Script and before the HTML
	// is taken: clicks, fills, scrolls, loops for "load more" (actions.go).
	Actions []Action `json:"actions,omitempty"`
}

// DefaultRender is `render: MODE` with every option at its default.
func DefaultRender(mode string) *Render {
	return &Render{Mode: mode, Timeout: DefaultRenderWait, Viewport: DefaultViewport, Block: DefaultRenderBlock, Idle: true}
}

// Renders reports whether a step may render pages at all (always or auto).
func (r *Render) Renders() bool { return r != nil && r.Mode != RenderNever }

// ViewportSize is Viewport as numbers.
func (r *Render) ViewportSize() (w, h int) {
	ws, hs, _ := strings.Cut(r.Viewport, "x")
	w, _ = strconv.Atoi(ws)
	h, _ = strconv.Atoi(hs)
	return w, h
}

var (
	renderModes = []string{RenderNever, RenderAlways, RenderAuto}
	renderKeys  = []string{"mode", "wait_for", "idle", "timeout", "block", "viewport", "script", "screenshot", "har", "actions"}
)

// render reads a step's `render:`: a mode alone (`render: auto`) or a mapping with
// `mode:` and the options.
func (l *loader) render(v *yaml.Node, where string) *Render {
	r := DefaultRender(RenderAlways)
	if v.Kind == yaml.ScalarNode {
		r.Mode = v.Value
	} else {
		if _, set := keyLines(v)["idle"]; !set {
			// A selector to wait for is the sign the page is ready; without one, a
			// network that went quiet is.
			_, waits := keyLines(v)["wait_for"]
			r.Idle = !waits
		}
		l.fields(v, where+".render", renderKeys, func(key string, v *yaml.Node) {
			switch key {
			case "mode":
				r.Mode = l.str(v, "render.mode")
			case "wait_for":
				r.WaitFor = l.str(v, "render.wait_for")
			case "idle":
				r.Idle = l.boolean(v, "render.idle")
			case "timeout":
				r.Timeout = l.duration(v, "render.timeout")
			case "block":
				r.Block = []string{}
				if !(v.Kind == yaml.SequenceNode && len(v.Content) == 0) {
					r.Block = l.strList(v, "render.block")
				}
				for _, b := range r.Block {
					if !slices.Contains(RenderBlockable, b) {
						l.add(v.Line, "%s: render.block: %q is not a resource type%s; block some of: %s (or [] for none)", where, b, Suggest(b, RenderBlockable), strings.Join(RenderBlockable, ", "))
					}
				}
			case "viewport":
				r.Viewport = l.str(v, "render.viewport")
				if w, h := r.ViewportSize(); w < 100 || h < 100 || w > 8000 || h > 8000 {
					l.add(v.Line, "%s: render.viewport %q: write WIDTHxHEIGHT in pixels, each 100 to 8000, e.g. 1280x800", where, r.Viewport)
				}
			case "script":
				r.Script = l.str(v, "render.script")
			case "screenshot":
				r.Screenshot = l.boolean(v, "render.screenshot")
			case "har":
				r.HAR = l.boolean(v, "render.har")
			case "actions":
				r.Actions = l.actions(v, where, "render.actions")
			}
		})
		defer l.checkActions(r.Actions, r, where, "render.actions")
		if r.Mode == "" && v.Kind == yaml.MappingNode {
			l.add(v.Line, "%s: render needs `mode:` (never, always or auto)", where)
			return nil
		}
	}
	if !slices.Contains(renderModes, r.Mode) {
		l.add(v.Line, "%s: render %q%s: use never (plain HTTP), always (every page in a browser) or auto (a browser only for pages where the task finds nothing)", where, r.Mode, Suggest(r.Mode, renderModes))
		return nil
	}
	if r.Timeout > 10*time.Minute {
		l.add(v.Line, "%s: render.timeout %s: a page gets at most 10m to render; use e.g. 15s", where, r.Timeout)
	}
	return r
}

// checkRender says what is wrong with rendering a step's pages.
func (l *loader) checkRender(s Step, spec TaskSpec, known bool, where string) {
	if known && spec.Login {
		l.checkLogin(s, where)
	}
	if !s.Render.Renders() {
		return
	}
	if known && !spec.HTML {
		l.add(s.Line, "%s: render: task %s does not read HTML pages; render applies to HTML steps (generic.html_list, generic.html_detail, crawl.HTMLTask), remove it here", where, s.Task)
	}
	if s.Affinity != nil {
		l.add(s.Line, "%s: render and affinity cannot be combined yet: rendering steps run on the workers with a browser; remove one of them", where)
	}
	if timeout := firstDuration(s.Timeout, spec.Timeout, DefaultTimeout); known && s.Render.Timeout >= timeout {
		l.add(s.Line, "%s: render.timeout %s leaves no time in the step's timeout %s to fetch and parse; make render.timeout shorter or the step's `timeout:` longer", where, s.Render.Timeout, timeout)
	}
}

// checkLogin says what is wrong with a step that logs in (TaskSpec.Login): it must
// render, and no credential it types may be written in the chain file.
func (l *loader) checkLogin(s Step, where string) {
	if s.Render == nil || s.Render.Mode != RenderAlways {
		l.add(s.Line, "%s: task %s logs in in a browser; add render: {mode: always, actions: [...]} with the actions that fill and send the login form", where, s.Task)
		return
	}
	var walk func(acts []Action, path string)
	walk = func(acts []Action, path string) {
		for i, a := range acts {
			p := fmt.Sprintf("%s[%d]", path, i)
			if a.Kind == ActionFill && a.SecretFile == "" && a.SecretEnv == "" && a.Secret == "" {
				l.add(a.line, "%s: %s fill %q: a login types nothing written in the chain file; declare the credential under the chain's secrets: (NAME: {file: /run/secrets/NAME} or {env: VARIABLE}) and write fill: {%q: {secret: NAME}}", where, p, a.Selector, a.Selector)
			}
			walk(a.Do, p+".repeat.do")
		}
	}
	walk(s.Render.Actions, "render.actions")
}
