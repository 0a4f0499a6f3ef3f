package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"

	"github.com/trawlerhq/trawler/fetch/charset"
)

// HTMLTask defines a task over HTML pages in one function: the engine fetches the
// input's page, parses it, and hands fn the page and an Out for items of type T. T's
// exported fields are the task's output schema (their `json` names, or the field name
// in lower case), and their `css`, `attr`, `regex` and `type` tags let Out.Scan fill
// them from the page:
//
//	type Story struct {
//		Title string `css:"h1.title"`
//		Score int    `css:".score" regex:"(\\d+)"`
//		URL   string `css:"a.url" attr:"href" type:"url"`
//	}
//
//	var StoryTask = crawl.HTMLTask("demo.story", func(p *crawl.Page, out *crawl.Out[Story]) error {
//		out.Item("demo:story:"+p.Match(`/item/(\d+)`), out.Scan(p))
//		p.Follow("a.comments-link", "comments")
//		return nil
//	})
//
// A page that answers outside 2xx fails with its status as the cause (retried when a
// retry can help) before fn runs, unless the task accepts the status with AcceptStatus.
func HTMLTask[T any](name string, fn func(p *Page, out *Out[T]) error, opts ...TaskOption) Task {
	return newPageTask(name, true, fn, opts)
}

// JSONTask defines a task over a JSON API in one function, as HTMLTask does over HTML:
// the engine fetches the input's URL and fn reads the body with Page.Decode into the
// types it chooses, then stores items of type T with Out and hands on inputs with
// Page.Emit or Page.FollowURL. T's exported fields are the output schema; a field tagged
// `json:",omitempty"` is left out of the stored item when it is zero, and a pointer field
// when it is nil, so "absent" and "zero" can differ:
//
//	type Post struct {
//		ID    int    `json:"id"`
//		Title string `json:"title,omitempty"`
//		Score *int   `json:"score,omitempty"`
//	}
//
//	var PostTask = crawl.JSONTask("api.post", func(p *crawl.Page, out *crawl.Out[Post]) error {
//		var v Post
//		if err := p.Decode(&v); err != nil {
//			return err
//		}
//		out.Item(fmt.Sprint("api:post:", v.ID), &v)
//		return nil
//	}, crawl.URLOf(postURL))
func JSONTask[T any](name string, fn func(p *Page, out *Out[T]) error, opts ...TaskOption) Task {
	return newPageTask(name, false, fn, opts)
}

func newPageTask[T any](name string, html bool, fn func(p *Page, out *Out[T]) error, opts []TaskOption) Task {
	spec := TaskSpec{Name: name, Output: FieldsOf[T](), Timeout: 30 * time.Second, Retries: 3, HTML: html}
	t := &htmlTask[T]{fn: fn, html: html, tagErr: CheckTags[T]()}
	for _, o := range opts {
		o(&spec, &t.hooks)
	}
	t.spec = spec
	return t
}

// TaskOption sets what a task declares beyond its name and output.
type TaskOption func(*TaskSpec, *taskHooks)

type taskHooks struct {
	prepare func(Params) (any, error)
	accept  func(status int) bool
	urlOf   func(Params, Input) (string, error)
}

// Doc is the one line `trawler validate` shows for the task.
func Doc(line string) TaskOption { return func(s *TaskSpec, _ *taskHooks) { s.Doc = line } }

// WithParams declares the params a chain step may set.
func WithParams(ps ...Param) TaskOption {
	return func(s *TaskSpec, _ *taskHooks) { s.Params = append(s.Params, ps...) }
}

// Limits sets the task's default timeout per page and retries.
func Limits(timeout time.Duration, retries int) TaskOption {
	return func(s *TaskSpec, _ *taskHooks) { s.Timeout, s.Retries = timeout, retries }
}

// Needs declares the external resources every request borrows (proxy, cookie …).
func Needs(kinds ...string) TaskOption {
	return func(s *TaskSpec, _ *taskHooks) { s.Needs = append(s.Needs, kinds...) }
}

// Prepare compiles a step's params once per batch (selectors, patterns, templates); its
// result is Page.Prepared on every page of the batch. An error fails every input of the
// batch as permanent and names the param, and `trawler validate` reports it too.
func Prepare(fn func(Params) (any, error)) TaskOption {
	return func(s *TaskSpec, h *taskHooks) {
		h.prepare = fn
		s.Check = func(p Params) []error {
			if _, err := fn(p); err != nil {
				return []error{err}
			}
			return nil
		}
	}
}

// AcceptStatus hands pages whose status accept allows to the task instead of failing
// them (a 404 that means "deleted", say), body included; Page.Status tells which it
// was. It widens the page request's Accept: 2xx and 304 stay accepted, and an accepted
// status is not retried.
func AcceptStatus(accept func(status int) bool) TaskOption {
	return func(_ *TaskSpec, h *taskHooks) { h.accept = accept }
}

// URLOf gives the page of an input that carries no URL: a root step's first page
// (base_url + "/news"), or a page built from an id handed over as the input's Value. Its
// error fails the input as permanent.
func URLOf(fn func(Params, Input) (string, error)) TaskOption {
	return func(_ *TaskSpec, h *taskHooks) { h.urlOf = fn }
}

// StartAt gives a root step its first page: the task declares a start_url param with u
// as its default (a chain may set another), and an input without a URL fetches it.
func StartAt(u string) TaskOption {
	return func(s *TaskSpec, h *taskHooks) {
		s.Params = append(s.Params, Param{Name: "start_url", Type: URL, Default: u, Doc: "the first page a root step fetches"})
		h.urlOf = func(p Params, _ Input) (string, error) { return fmt.Sprint(p["start_url"]), nil }
	}
}

// FollowTask defines an HTML task that stores nothing: fn hands on the page's links
// (Page.Follow, FollowAll …), as a list page's task does for its entries' pages.
func FollowTask(name string, fn func(p *Page) error, opts ...TaskOption) Task {
	return newPageTask(name, true, func(p *Page, _ *Out[struct{}]) error { return fn(p) }, opts)
}

// htmlTask runs an HTMLTask or, with html false, a JSONTask: the page is fetched the
// same way, and only an HTML page is parsed.
type htmlTask[T any] struct {
	spec  TaskSpec
	hooks taskHooks
	html  bool
	fn    func(*Page, *Out[T]) error
	// tagErr is what is wrong with T's field tags: Register refuses the task with it,
	// and Run fails with it where the task runs unregistered (a test, `trawler try`).
	tagErr error
}

func (t *htmlTask[T]) Spec() TaskSpec { return t.spec }

func (t *htmlTask[T]) tagError() error { return t.tagErr }

// Prepare implements Preparer: the engine calls it once per batch.
func (t *htmlTask[T]) Prepare(p Params) (any, error) {
	if t.hooks.prepare == nil {
		return nil, nil
	}
	v, err := t.hooks.prepare(p)
	if err != nil {
		return nil, WithCause(Permanentf("%s: %v", t.spec.Name, err), CauseConfig)
	}
	return v, nil
}

func (t *htmlTask[T]) Run(ctx context.Context, env *Env, in Input) (Result, error) {
	if t.tagErr != nil {
		return Result{}, WithCause(Permanentf("%s: %v", t.spec.Name, t.tagErr), CauseConfig)
	}
	params := t.withDefaults(env.Params)
	prepared := env.Prepared
	if prepared == nil && t.hooks.prepare != nil {
		// Run outside a batch (a test, `trawler try`): prepare for this page alone.
		var err error
		if prepared, err = t.Prepare(params); err != nil {
			return Result{}, err
		}
	}
	u := in.URL
	if s, ok := in.Value.(string); ok && u == "" && strings.Contains(s, "://") {
		u = s
	}
	if u == "" && t.hooks.urlOf != nil {
		var err error
		if u, err = t.hooks.urlOf(params, in); err != nil {
			return Result{}, WithCause(Permanentf("%s: %v", t.spec.Name, err), CauseConfig)
		}
	}
	if u == "" {
		return Result{}, WithCause(Permanentf("%s: input %s has no URL; give the step a `from:` whose inputs carry URLs", t.spec.Name, in.Describe()), CauseConfig)
	}
	req := &Request{Method: http.MethodGet, URL: u}
	if accept := t.hooks.accept; accept != nil {
		req.Accept = func(status int) bool { return DefaultAccept(status) || accept(status) }
	}
	resp, err := env.Fetch(ctx, req)
	if err != nil {
		return Result{}, err // the fetcher's errors name the method, URL and cause
	}
	// A JSON page gets an empty document, so links still resolve against its URL.
	doc := goquery.NewDocumentFromNode(&html.Node{Type: html.DocumentNode})
	if t.html {
		// Parsed as UTF-8, whatever the page's charset: selectors and fields read text.
		body, err := charset.HTML(resp.Body, resp.Header.Get("Content-Type"), nil)
		if err != nil {
			return Result{}, Permanentf("GET %s: %v", u, err)
		}
		root, err := ParseHTMLBytes(body)
		if err != nil {
			return Result{}, Permanentf("GET %s: parse HTML: %w", u, err)
		}
		doc = goquery.NewDocumentFromNode(root)
	}
	final := resp.URL
	if final == "" {
		final = u
	}
	base, err := url.Parse(final)
	if err != nil {
		return Result{}, Permanentf("GET %s: bad final URL %q: %v", u, final, err)
	}
	// A <base href> changes what relative links resolve against.
	if href, ok := doc.Find("base[href]").First().Attr("href"); ok {
		if b, err := base.Parse(strings.TrimSpace(href)); err == nil {
			base = b
		}
	}
	doc.Url = base
	p := &Page{URL: final, Status: resp.Status, Header: resp.Header, Body: resp.Body, Doc: doc, Input: in, Env: env,
		Params: params, Prepared: prepared, ctx: ctx, task: t.spec.Name}
	out := &Out[T]{page: p}
	if err := t.fn(p, out); err != nil {
		return Result{}, err
	}
	if p.err != nil {
		return Result{}, p.err
	}
	if out.err != nil {
		return Result{}, out.err
	}
	return Result{Items: out.items, Next: p.next, Skipped: out.skipped}, nil
}

// withDefaults is the step's params with the task's declared defaults filled in, for
// callers that did not apply them.
func (t *htmlTask[T]) withDefaults(p Params) Params {
	out := Params{}
	for _, d := range t.spec.Params {
		if d.Default != nil {
			out[d.Name] = d.Default
		}
	}
	for k, v := range p {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// Preparer is a task that compiles its params once per batch (see Prepare); the engine
// puts the result in Env.Prepared.
type Preparer interface {
	Prepare(Params) (any, error)
}

// Page is one fetched page, as an HTMLTask (parsed into Doc) or a JSONTask (read with
// Decode; Doc is empty) sees it.
type Page struct {
	URL      string // after redirects; links resolve against it (or the page's <base>)
	Status   int
	Header   http.Header
	Body     []byte // as fetched, in the page's own charset; Doc is decoded to UTF-8
	Doc      *goquery.Document
	Input    Input
	Env      *Env
	Params   Params // the step's params, with the task's declared defaults
	Prepared any    // what the task's Prepare made of the step's params, once per batch
	ctx      context.Context
	task     string
	next     []Input
	err      error
}

// Context is the page's context: cancelled when its step timeout passes.
func (p *Page) Context() context.Context { return p.ctx }

// Param is a step param (with its declared default applied).
func (p *Page) Param(name string) any { return p.Params[name] }

// Var is an input variable the producing step handed over, else the page URL's query
// parameter of that name, else "".
func (p *Page) Var(name string) string {
	if v := p.Input.Var(name); v != "" {
		return v
	}
	if u, err := url.Parse(p.URL); err == nil {
		return u.Query().Get(name)
	}
	return ""
}

// Match returns the first group of pattern in the page URL (the whole match when the
// pattern has no group), or "" when it does not match.
func (p *Page) Match(pattern string) string {
	m := regexp.MustCompile(pattern).FindStringSubmatch(p.URL)
	switch {
	case m == nil:
		return ""
	case len(m) > 1:
		return m[1]
	}
	return m[0]
}

// Decode reads the body as exactly one JSON value into v; numbers decoded into an `any`
// stay exact (json.Number). A body that is empty, not JSON, followed by more data or not
// of v's shape fails the page as a parse failure naming the task, the URL and what was
// wrong: return the error.
func (p *Page) Decode(v any) error {
	dec := json.NewDecoder(bytes.NewReader(p.Body))
	dec.UseNumber()
	err := dec.Decode(v)
	switch {
	case errors.Is(err, io.EOF):
		err = errors.New("empty body, want a JSON value")
	case err == nil:
		if _, more := dec.Token(); !errors.Is(more, io.EOF) {
			err = errors.New("trailing data after the JSON value")
		}
	}
	if err != nil {
		p.Fail("%v", err)
		return p.err
	}
	return nil
}

// Null reports whether the body is the JSON null (an API's "no such record").
func (p *Page) Null() bool { return string(bytes.TrimSpace(p.Body)) == "null" }

// Text is the trimmed text of the first element matching sel.
func (p *Page) Text(sel string) string { return strings.TrimSpace(p.Doc.Find(sel).First().Text()) }

// Abs resolves a link against the page; "" when it is not a usable http(s) link.
func (p *Page) Abs(href string) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := p.Doc.Url.Parse(href)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	u.Fragment = ""
	return u.String()
}

// Follow emits the first link matching sel (its href, made absolute) as an input for the
// consumer named to: a step id or a task name ("" for every consumer). vars travel with
// the input. It reports whether there was such a link.
func (p *Page) Follow(sel, to string, vars ...map[string]any) bool {
	return p.follow(p.Doc.Find(sel).First(), to, vars) > 0
}

// FollowAll emits every link matching sel, like Follow, and returns how many.
func (p *Page) FollowAll(sel, to string, vars ...map[string]any) int {
	return p.follow(p.Doc.Find(sel), to, vars)
}

// FollowEl emits the link of one element the task already found (its href, or that of
// the first link inside it), like Follow.
func (p *Page) FollowEl(e *goquery.Selection, to string, vars ...map[string]any) bool {
	return p.follow(e.First(), to, vars) > 0
}

func (p *Page) follow(s *goquery.Selection, to string, vars []map[string]any) int {
	n := 0
	s.Each(func(_ int, e *goquery.Selection) {
		href, ok := e.Attr("href")
		if !ok {
			href, _ = e.Find("a[href]").First().Attr("href")
		}
		if u := p.Abs(href); u != "" {
			p.FollowURL(u, to, vars...)
			n++
		}
	})
	return n
}

// FollowURL emits u (made absolute against the page) for the consumer named to.
func (p *Page) FollowURL(u, to string, vars ...map[string]any) {
	abs := p.Abs(u)
	if abs == "" {
		p.Fail("cannot follow %q: not an http(s) link", u)
		return
	}
	in := Input{URL: abs, Task: to}
	for _, v := range vars {
		for k, x := range v {
			if in.Vars == nil {
				in.Vars = map[string]any{}
			}
			in.Vars[k] = x
		}
	}
	p.next = append(p.next, in)
}

// Emit hands an input that is not a link (an id, a cursor) to the consumer named to.
func (p *Page) Emit(in Input, to string) {
	in.Task = to
	p.next = append(p.next, in)
}

// Fail records that the page is not what the task expects (a parse failure, permanent):
// the task's input fails with this cause, naming the task and the page.
func (p *Page) Fail(format string, args ...any) {
	if p.err == nil {
		p.err = WithCause(Permanentf("%s: %s: %s", p.task, p.URL, fmt.Sprintf(format, args...)), CauseParse)
	}
}

// Out collects the items of type T a page yields.
type Out[T any] struct {
	page    *Page
	items   []Item
	skipped int
	err     error
}

// Item stores v under key (a stable natural id, e.g. "demo:story:42"), with the page URL.
// A key that is empty or ends in an empty part ("demo:story:", built from an id that
// was not found) fails the input rather than storing every such page under one key.
func (o *Out[T]) Item(key string, v *T) {
	if v == nil {
		return
	}
	if key == "" {
		o.fail(Permanentf("%s: %s: an item without a key; give Item a stable natural id", o.page.task, o.page.URL))
		return
	}
	if strings.HasSuffix(key, ":") {
		o.fail(WithCause(Permanentf("%s: %s: item key %q ends in an empty id; the value it was built from is empty (a Match pattern that does not match this URL?)", o.page.task, o.page.URL, key), CauseParse))
		return
	}
	o.items = append(o.items, Item{Key: key, URL: o.page.URL, Data: DataOf(v)})
}

// PageItem stores v as the page's one item, keyed by the page's canonical URL (see
// URLKey), for a site whose pages have no better natural id.
func (o *Out[T]) PageItem(v *T) { o.Item(URLKey(o.page.URL), v) }

// ItemAt is Item with its own URL (an anchor on the page, a canonical link).
func (o *Out[T]) ItemAt(key, u string, v *T) {
	o.Item(key, v)
	if n := len(o.items); n > 0 && o.items[n-1].Key == key {
		o.items[n-1].URL = u
	}
}

// Skip counts records the page offered that are deliberately not stored.
func (o *Out[T]) Skip(n int) { o.skipped += n }

// Scan fills a new T from the whole page by its field tags. A field tagged
// `required:"true"` that finds nothing fails the input, naming the field.
func (o *Out[T]) Scan(p *Page) *T { return o.ScanIn(p.Doc.Selection) }

// ScanIn fills a new T from the part of the page under sel (one list entry).
func (o *Out[T]) ScanIn(sel *goquery.Selection) *T {
	v := new(T)
	if err := Scan(sel, o.page.Doc.Url, v); err != nil {
		o.fail(WithCause(Permanentf("%s: %s: %v", o.page.task, o.page.URL, err), CauseParse))
		return nil
	}
	return v
}

// Each scans a T from every element matching sel and stores it under the key keyOf
// gives it; it returns how many it stored.
func (o *Out[T]) Each(sel string, keyOf func(e *goquery.Selection, v *T) string) int {
	n := 0
	o.page.Doc.Find(sel).Each(func(_ int, e *goquery.Selection) {
		if v := o.ScanIn(e); v != nil {
			o.Item(keyOf(e, v), v)
			n++
		}
	})
	return n
}

func (o *Out[T]) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}
