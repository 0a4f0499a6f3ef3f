// Package generic holds config-driven spiders: tasks whose selectors, paths and paging
// come from a chain file's params instead of Go code, so a new site needs only YAML.
//
//	generic.html_list    list pages: items by CSS/XPath, next pages, detail links
//	generic.html_detail  one item per page
//	generic.json         JSON APIs: gjson paths, page/offset/cursor/next-link paging
//	generic.csv          CSV exports: columns by header name or index
//	generic.xml          XML documents: XPath with namespaces
//	generic.feed         RSS, Atom and JSON Feed
//	generic.sitemap      sitemap indexes and urlsets (gzip too): URLs for the next step
//	generic.site         a whole site: links in scope, traps dropped, pages for a detail step
//
// Every task shares one field-spec language (see fields.go and the README section
// "Config-driven spiders") and validates its params in TaskSpec.Check, so `trawler
// validate` reports a broken selector before a run starts.
package generic

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/charset"
)

// Task names.
const (
	HTMLListTask   = "generic.html_list"
	HTMLDetailTask = "generic.html_detail"
	JSONTask       = "generic.json"
	CSVTask        = "generic.csv"
	XMLTask        = "generic.xml"
	FeedTask       = "generic.feed"
	SitemapTask    = "generic.sitemap"
	SiteTask       = "generic.site"
)

// Names of the input variables the generic tasks hand to each other.
const (
	// VarPage is the page number of a paging chain (1 for the first page by default).
	VarPage = "page"
	// VarSeen holds short hashes of the pages already visited in this chain of pages.
	VarSeen = "seen"
	// VarFields carries an item's list-page fields to its detail page.
	VarFields = "fields"
	// VarVia names the step that emitted an input for another step; that step itself
	// ignores the input if it is routed back to it (a step consuming its own outputs).
	VarVia = "via"
	// VarFor names the step a paging input is meant for, so that another step running
	// the same task (a category list feeding an article list) does not take it for its own.
	VarFor = "for"
	// VarLastmod is a sitemap entry's lastmod (RFC 3339), when it has one.
	VarLastmod = "lastmod"
	// VarStart marks one of a step's start URLs, split from `urls` into an input of
	// its own (see seedInputs): it is fetched as a first page.
	VarStart = "start"
)

// maxSeen bounds the visited-page hashes an input carries; older ones drop out
// (max_pages and the step's max_depth still bound longer loops).
const maxSeen = 64

// carryLimit is the largest JSON encoding of one list field carried to a detail page.
const carryLimit = 512

func init() {
	crawl.Register(HTMLList, HTMLDetail, JSON, CSV, XML, Feed, Sitemap, Site, Login)
}

// ---- params shared by every task ----

var (
	urlsParam = crawl.Param{Name: "urls", Type: crawl.List,
		Doc: "start URLs the seed input fetches (absolute, or relative to base_url); inputs from other steps carry their own URL"}
	baseURLParam = crawl.Param{Name: "base_url", Type: crawl.URL,
		Doc: "site root that relative urls, templates and input URLs resolve against, e.g. https://example.com"}
	headersParam = crawl.Param{Name: "headers", Type: crawl.Object,
		Doc: "extra request headers, a mapping like {Accept: application/json}"}
	encodingParam = crawl.Param{Name: "encoding", Type: crawl.String,
		Doc: "force the text encoding (gbk, gb18030, big5, shift_jis, iso-8859-1, …); default: BOM, Content-Type charset, <meta charset>, else UTF-8"}
	keyParam = crawl.Param{Name: "key", Type: crawl.Object,
		Doc: "field spec whose value is the item's key (its stable id); default: the page URL (detail) or the page URL#position (lists)"}
	detailParam = crawl.Param{Name: "detail", Type: crawl.String,
		Doc: "name of a field whose values (URLs, made absolute) become inputs for the next step; the items are then not stored here, their fields ride along to the detail page"}
)

func fieldsParam(doc string, required bool) crawl.Param {
	return crawl.Param{Name: "fields", Type: crawl.Object, Required: required, Doc: doc}
}

func detailTaskParam(def string) crawl.Param {
	p := crawl.Param{Name: "detail_task", Type: crawl.String,
		Doc: "task the detail inputs are addressed to (empty: every consumer)"}
	if def != "" {
		p.Default = def
		p.Doc = "task the detail inputs are addressed to (empty: every consumer); default " + def
	}
	return p
}

// commonOutput is the static part of an item schema: the fields most spiders map. The
// fields a chain maps define the rest; `each:` accepts only the declared list fields.
var commonOutput = []crawl.Field{
	{Name: "title", Type: crawl.String, Doc: "a title, when `fields` maps one (every mapped field is stored under its own name)"},
	{Name: "url", Type: crawl.URL, Doc: "a link, when `fields` maps one"},
	{Name: "author", Type: crawl.String, Doc: "an author, when `fields` maps one"},
	{Name: "date", Type: crawl.Time, Doc: "a date (type: date stores RFC 3339 in UTC), when `fields` maps one"},
	{Name: "text", Type: crawl.String, Doc: "body text, when `fields` maps one"},
	{Name: "links", Type: crawl.List, Doc: "a list of URLs (type: list), when `fields` maps one; usable with `each:`"},
	{Name: "tags", Type: crawl.List, Doc: "a list of strings (type: list), when `fields` maps one; usable with `each:`"},
	{Name: "images", Type: crawl.List, Doc: "a list of image URLs (type: list), when `fields` maps one; usable with `each:`"},
}

// ---- parsed params ----

// common is what every task reads from its params: where to start and how to fetch.
type common struct {
	task    string
	base    *url.URL
	urls    []string // absolute
	headers http.Header
}

func parseCommon(task string, p crawl.Params) (common, []error) {
	c := common{task: task}
	var errs []error
	if raw := str(p["base_url"]); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("param base_url: want an absolute http(s) URL like https://example.com, got %q", raw))
		} else {
			c.base = u
		}
	}
	for i, raw := range strList(p["urls"]) {
		abs, err := absURL(c.base, raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("param urls[%d]: %v", i, err))
			continue
		}
		c.urls = append(c.urls, abs)
	}
	if h, ok := p["headers"]; ok && h != nil {
		m, ok := h.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("param headers: want a mapping of header name to value, like {Accept: application/json}, got %s", describe(h)))
		} else {
			c.headers = http.Header{}
			for _, k := range sortedKeys(m) {
				if err := crawl.CheckHeader(k, fmt.Sprint(m[k])); err != nil {
					errs = append(errs, fmt.Errorf("param headers: %v", err))
					continue
				}
				c.headers.Set(k, fmt.Sprint(m[k]))
			}
		}
	}
	return c, errs
}

// absURL resolves raw against base; the result must be an absolute http(s) URL.
func absURL(base *url.URL, raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("bad URL %q: %v", raw, err)
	}
	if !u.IsAbs() {
		if base == nil {
			return "", fmt.Errorf("%q is relative and base_url is not set; give an absolute URL or set base_url", raw)
		}
		u = base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q has no host", raw)
	}
	return u.String(), nil
}

// inputURL is the page an input names: its URL, or a URL handed over as a value (`each:`
// over a list of links), resolved against base_url when relative.
func (c common) inputURL(in crawl.Input) (string, error) {
	raw := in.URL
	if raw == "" {
		if s, ok := in.Value.(string); ok {
			raw = s
		}
	}
	abs, err := absURL(c.base, raw)
	if err != nil {
		return "", crawl.Permanentf("%s: input %s: %v", c.task, in.Describe(), err)
	}
	return abs, nil
}

// isSeed reports whether an input is the empty one a root step starts with.
// pager is what runPages needs of an executor's config (its embedded common has both).
type pager interface {
	seedURLs() ([]string, error)
	inputURL(crawl.Input) (string, error)
}

// runPages is what every executor does with an input: the seed input fans out over the
// step's start URLs (each a first page), any other input is the one page it names.
func runPages[C pager](env *crawl.Env, in crawl.Input, task string, build func(crawl.Params) (C, []error), page func(c C, u string, start bool) (crawl.Result, error)) (crawl.Result, error) {
	if notMine(env, in) {
		return crawl.Result{}, nil
	}
	c, err := configOf(env, task, build)
	if err != nil {
		return crawl.Result{}, err
	}
	if !isSeed(in) {
		u, err := c.inputURL(in)
		if err != nil {
			return crawl.Result{}, err
		}
		return page(c, u, in.Var(VarStart) != "")
	}
	urls, err := c.seedURLs()
	if err != nil {
		return crawl.Result{}, err
	}
	var res crawl.Result
	for _, u := range urls {
		r, err := page(c, u, true)
		if err != nil {
			return crawl.Result{}, err
		}
		res = merge(res, r)
	}
	return res, nil
}

// seedInputs splits a root step's start URLs into one input each (TaskSpec.Seeds), so
// that a 500, a 429 or a hang on one start URL is retried and failed on its own while
// its siblings are fetched and stored. Bad URLs are left to validation, which names them.
func seedInputs(p crawl.Params) []crawl.Input {
	c, _ := parseCommon("", p)
	out := make([]crawl.Input, 0, len(c.urls))
	for _, u := range c.urls {
		out = append(out, crawl.Input{URL: u, Vars: map[string]any{VarStart: true}})
	}
	return out
}

func isSeed(in crawl.Input) bool {
	if in.URL != "" {
		return false
	}
	_, isStr := in.Value.(string)
	return !isStr
}

// seedURLs returns the start URLs or a permanent error naming the fix.
func (c common) seedURLs() ([]string, error) {
	if len(c.urls) == 0 {
		return nil, crawl.Permanentf("%s: the seed input needs start URLs: set param urls, or give this step a `from:` whose inputs carry URLs", c.task)
	}
	return c.urls, nil
}

// fetch GETs u with the task's headers. Only a 2xx is a page: these tasks send no
// conditional requests, so a 304 is refused with the rest, by the fetcher, whose errors
// name the method, URL and status and say whether a retry may help.
func (c common) fetch(ctx context.Context, env *crawl.Env, u string) (*crawl.Response, error) {
	req := &crawl.Request{Method: http.MethodGet, URL: u, Accept: is2xx}
	if len(c.headers) > 0 {
		req.Header = c.headers.Clone()
	}
	return env.Fetch(ctx, req)
}

func is2xx(status int) bool { return status >= 200 && status < 300 }

// finalURL is the URL links on a response resolve against.
func finalURL(resp *crawl.Response, requested string) *url.URL {
	raw := requested
	if resp != nil && resp.URL != "" {
		raw = resp.URL
	}
	u, err := url.Parse(raw)
	if err != nil {
		u, _ = url.Parse(requested)
	}
	return u
}

// notMine reports whether this step should pass over an input: one it emitted itself for
// another step (a detail link routed back to a step that also consumes itself), or a
// paging input meant for another step running the same task.
func notMine(env *crawl.Env, in crawl.Input) bool {
	if env.Step == "" {
		return false
	}
	if in.Var(VarVia) == env.Step {
		return true
	}
	f := in.Var(VarFor)
	return f != "" && f != env.Step
}

// forOthers labels the variables of an input for other steps with the emitting step.
func forOthers(env *crawl.Env, vars map[string]any) map[string]any {
	if env.Step == "" {
		return vars
	}
	if vars == nil {
		vars = map[string]any{}
	}
	vars[VarVia] = env.Step
	return vars
}

// forSelf labels the variables of a paging input with the step it is meant for.
// followPage adds the input for the next page of a paged list to res, unless next is
// empty or this chain of pages has already visited it (a site whose "next" link loops).
func followPage(env *crawl.Env, res *crawl.Result, task, u, next string, page int, seen seenSet) {
	if next == "" {
		return
	}
	if pageKey(next) == pageKey(u) || seen.has(next) {
		if env.Log != nil {
			env.Log.Info("next page already visited in this chain of pages; stopping", "task", task, "page", u, "next", next)
		}
		return
	}
	res.Next = append(res.Next, crawl.Input{URL: next, Task: task, Vars: forSelf(env, map[string]any{VarPage: page + 1, VarSeen: seen.with(u)})})
}

func forSelf(env *crawl.Env, vars map[string]any) map[string]any {
	if env.Step == "" {
		return vars
	}
	if vars == nil {
		vars = map[string]any{}
	}
	vars[VarFor] = env.Step
	return vars
}

// ---- visited pages ----

// pageKey is the form of a URL compared for "already visited": no fragment, no user
// info (the page is the same whichever password fetches it).
func pageKey(u string) string {
	if pu, err := url.Parse(u); err == nil {
		pu.Fragment = ""
		pu.RawFragment = ""
		pu.User = nil
		return pu.String()
	}
	return crawl.StripUserinfo(u)
}

func pageHash(u string) string {
	h := fnv.New32a()
	h.Write([]byte(pageKey(u)))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}

// seenSet is the visited pages of one chain of pages, carried in the inputs.
type seenSet []string

func seenOf(in crawl.Input) seenSet {
	var s seenSet
	for _, v := range anyList(in.Vars[VarSeen]) {
		if h, ok := v.(string); ok {
			s = append(s, h)
		}
	}
	return s
}

func (s seenSet) has(u string) bool {
	h := pageHash(u)
	for _, x := range s {
		if x == h {
			return true
		}
	}
	return false
}

// with returns the set plus u, keeping the newest maxSeen entries.
func (s seenSet) with(u string) []any {
	all := append(append(seenSet{}, s...), pageHash(u))
	if len(all) > maxSeen {
		all = all[len(all)-maxSeen:]
	}
	out := make([]any, len(all))
	for i, h := range all {
		out[i] = h
	}
	return out
}

// ---- paging state ----

// pageNumber is the page an input is on: its "page" variable, else start.
func pageNumber(in crawl.Input, start int) int {
	if n, ok := crawl.AsInt(in.Vars[VarPage]); ok {
		return n
	}
	return start
}

// ---- configs, built once per batch ----

// configTask is a generic task whose params build into a config of type C: the engine
// builds it once per batch (crawl.Preparer) and hands it to every input in
// Env.Prepared, and `trawler validate` reports the same build's errors.
func configTask[C any](spec crawl.TaskSpec, build func(crawl.Params) (C, []error), run func(context.Context, *crawl.Env, crawl.Input) (crawl.Result, error)) crawl.Task {
	if spec.Check == nil {
		spec.Check = checker(build)
	}
	if spec.Schema == nil {
		spec.Schema = fieldsSchema(nil)
	}
	return crawl.PreparedTaskFunc(spec, func(p crawl.Params) (any, error) { return buildConfig(spec.Name, p, build) }, run)
}

// fieldsSchema is a config task's TaskSpec.Schema: a step's items have the fields its
// `fields:` maps, each of the type it converts to (none when it keeps what the source
// has: JSON's own types, or text), or these fields when it maps none.
func fieldsSchema(unmapped []crawl.Field) func(crawl.Params) []crawl.Field {
	return func(p crawl.Params) []crawl.Field {
		m, ok := p["fields"].(map[string]any)
		if !ok || len(m) == 0 {
			return unmapped
		}
		out := make([]crawl.Field, 0, len(m))
		for _, name := range sortedKeys(m) {
			f := crawl.Field{Name: name}
			if spec, ok := m[name].(map[string]any); ok {
				typ, _ := spec["type"].(string)
				f.Type = schemaTypes[typ]
			}
			out = append(out, f)
		}
		return out
	}
}

// schemaTypes are the stored types of the field-spec types.
var schemaTypes = map[string]crawl.Type{
	typeString: crawl.String, typeInt: crawl.Int, typeFloat: crawl.Float, typeBool: crawl.Bool,
	typeDate: crawl.Time, typeURL: crawl.URL, typeList: crawl.List,
}

// configOf is the input's config: the batch's prepared one, or, outside a batch (a
// test, `trawler try`), one built for this input alone.
func configOf[C any](env *crawl.Env, task string, build func(crawl.Params) (C, []error)) (C, error) {
	if c, ok := env.Prepared.(C); ok {
		return c, nil
	}
	return buildConfig(task, env.Params, build)
}

// buildConfig builds a config, turning its problems into one permanent config error.
func buildConfig[C any](task string, p crawl.Params, build func(crawl.Params) (C, []error)) (C, error) {
	cfg, errs := build(p)
	if len(errs) == 0 {
		return cfg, nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return cfg, crawl.WithCause(crawl.Permanentf("%s: bad params (run `trawler validate` on the chain file): %s", task, strings.Join(msgs, "; ")), crawl.CauseConfig)
}

// fingerprint is a stable text of a JSON-like value (encoding/json sorts map keys).
func fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// ---- checks ----

// checker returns a TaskSpec.Check running build and returning its errors.
func checker[T any](build func(crawl.Params) (T, []error)) func(crawl.Params) []error {
	return func(p crawl.Params) []error {
		_, errs := build(p)
		return errs
	}
}

var taskNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$`)

func checkTaskName(param, v string) error {
	if v != "" && !taskNameRE.MatchString(v) {
		return fmt.Errorf("param %s: %q is not a task name; write it as site.task, e.g. generic.html_detail", param, v)
	}
	return nil
}

func checkNonNegative(p crawl.Params, names ...string) []error {
	var errs []error
	for _, n := range names {
		if v, ok := crawl.AsInt(p[n]); ok && v < 0 {
			errs = append(errs, fmt.Errorf("param %s: %d is negative; use 0 (no limit) or more", n, v))
		}
	}
	return errs
}

// ---- small value helpers (params arrive typed, raw from YAML, or through JSON) ----

func str(v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	case int, int64, float64, bool:
		return fmt.Sprint(s)
	case time.Time:
		return s.Format(time.RFC3339Nano) // an unquoted YAML date
	}
	return ""
}

func strList(v any) []string {
	switch l := v.(type) {
	case string:
		if l == "" {
			return nil
		}
		return []string{l}
	case []string:
		return l
	case []any:
		out := make([]string, 0, len(l))
		for _, e := range l {
			out = append(out, str(e))
		}
		return out
	}
	return nil
}

func anyList(v any) []any {
	switch l := v.(type) {
	case []any:
		return l
	case []string:
		out := make([]any, len(l))
		for i, s := range l {
			out[i] = s
		}
		return out
	}
	return nil
}

func intParam(p crawl.Params, name string, def int) int {
	if n, ok := crawl.AsInt(p[name]); ok {
		return n
	}
	return def
}

func boolParam(p crawl.Params, name string, def bool) bool {
	switch b := p[name].(type) {
	case bool:
		return b
	case string:
		if x, err := strconv.ParseBool(b); err == nil {
			return x
		}
	}
	return def
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("%q", x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// parseEncodingParam reads a task's `encoding` param: empty means "from the page".
func parseEncodingParam(v any) (encoding.Encoding, []error) {
	name := str(v)
	if strings.TrimSpace(name) == "" {
		return nil, nil
	}
	e, _, err := charset.Lookup(name)
	if err != nil {
		return nil, []error{fmt.Errorf("param encoding: %v", err)}
	}
	return e, nil
}
