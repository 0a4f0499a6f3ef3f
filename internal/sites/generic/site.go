package generic

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/publicsuffix"
	"golang.org/x/text/encoding"

	"github.com/trawlerhq/trawler/crawl"
)

// Variables generic.site hands to itself.
const (
	// VarRoot is the canonical start URL a site crawl's scope is measured from.
	VarRoot = "root"
	// VarBudget is how many site pages this branch of a crawl may still fetch, itself
	// included (max_pages shared out among the links each page follows).
	VarBudget = "budget"
	// VarSitemap marks an input that is a sitemap, not an HTML page.
	VarSitemap = "sitemap"
)

// Scopes of a site crawl.
const (
	scopeHost   = "host"
	scopeDomain = "domain"
	scopePrefix = "prefix"
)

var scopes = []string{scopeHost, scopeDomain, scopePrefix}

// Drop rules, in the order a link meets them and its Notes are written. Trap rules'
// drops count as trap_dropped (and are noted per page); the others, the scope the step
// asked for, as out_of_scope.
var dropRules = []struct {
	name, text string
	trap       bool
}{
	{"scope", "out of scope (rule scope)", false},
	{"length", "longer than max_url_length (trap rule length)", true},
	{"repeat", "repeating path segments (trap rule repeat)", true},
	{"calendar", "a date beyond calendar_years from now (trap rule calendar)", true},
	{"params", "more than max_params query parameters (trap rule params)", true},
	{"variants", "more than max_query_variants query strings for one path on the page (trap rule variants)", true},
	{"exclude", "matching exclude (rule exclude)", false},
	{"include", "matching no include pattern (rule include)", false},
	{"max_pages", "beyond the max_pages budget (rule max_pages)", false},
}

const patternDoc = "patterns: a glob starting with / matches the link's path, one starting with http(s):// the whole link, either with the query only when the glob has a ?; * is any run of characters but /, ** any run at all; re:… is a regexp searched in the whole link"

var siteSpec = crawl.TaskSpec{
	Name:  SiteTask,
	Doc:   "a whole site: follows <a href> links in scope from start URLs and sitemaps, drops crawler traps by rule (counted as trap_dropped, each noted with its rule; links out of scope as out_of_scope), hands pages matching `to` to the detail step",
	Seeds: siteSeeds,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		{Name: "sitemaps", Type: crawl.List, Doc: "sitemap URLs (index, urlset, gzip or text); the pages they list are handled as links of the crawl, child sitemaps are read in turn"},
		{Name: "scope", Type: crawl.String, Default: scopeHost, Doc: "the links that are the site: host (the start URL's host), domain (its registrable domain: shop.example.co.uk and www.example.co.uk are both example.co.uk), prefix (the start URL's host, under its directory)"},
		{Name: "include", Type: crawl.List, Doc: "an in-scope link is followed only if it matches one of these " + patternDoc + " (default: every in-scope link)"},
		{Name: "exclude", Type: crawl.List, Doc: "a link matching one of these is dropped, whatever else it matches; " + patternDoc},
		{Name: "to", Type: crawl.List, Doc: "a link matching one of these goes to the detail step (detail_task) instead of being crawled here, and is crawled too when it also matches include; " + patternDoc},
		detailTaskParam(HTMLDetailTask),
		{Name: "max_pages", Type: crawl.Int, Default: 0, Doc: "at most this many site pages per start URL or sitemap: the start page and every page followed from it (each page shares what is left among its links); detail pages are not counted (0: no limit but max_depth)"},
		{Name: "max_url_length", Type: crawl.Int, Default: 2048, Doc: "drop links longer than this many characters (trap rule length; 0: no limit)"},
		{Name: "max_params", Type: crawl.Int, Default: 16, Doc: "drop links with more query parameters than this (trap rule params; 0: no limit)"},
		{Name: "max_query_variants", Type: crawl.Int, Default: 32, Doc: "on one page, drop links to a path beyond this many different query strings (trap rule variants: faceted filters; 0: no limit)"},
		{Name: "calendar_years", Type: crawl.Int, Default: 2, Doc: "drop links with a date in the path or query more than this many years from now (trap rule calendar: endless next-month links; 0: off)"},
		headersParam,
		encodingParam,
	},
	Timeout: 30 * time.Second,
	Retries: 3,
	HTML:    true,
}

// Site is the generic.site task.
var Site = configTask(siteSpec, buildSite, runSite)

type siteConfig struct {
	common
	enc                  encoding.Encoding
	sitemaps             []string // absolute
	scope                string
	include, exclude, to []linkPattern
	detailTask           string
	maxPages             int
	maxURLLength         int
	maxParams            int
	maxVariants          int
	calendarYears        int
}

func buildSite(p crawl.Params) (*siteConfig, []error) {
	c := &siteConfig{}
	var errs, e []error
	c.common, errs = parseCommon(SiteTask, p)
	for i, raw := range strList(p["sitemaps"]) {
		abs, err := absURL(c.base, raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("param sitemaps[%d]: %v", i, err))
			continue
		}
		c.sitemaps = append(c.sitemaps, abs)
	}
	c.scope = strings.TrimSpace(str(p["scope"]))
	switch c.scope {
	case "":
		c.scope = scopeHost
	case scopeHost, scopeDomain, scopePrefix:
	default:
		errs = append(errs, fmt.Errorf("param scope: unknown scope %q%s; use host (the start URL's host), domain (its registrable domain) or prefix (under the start URL's directory)", c.scope, crawl.Suggest(c.scope, scopes)))
	}
	for _, name := range []string{"include", "exclude", "to"} {
		var pats []linkPattern
		pats, e = parsePatterns(p, name)
		errs = append(errs, e...)
		switch name {
		case "include":
			c.include = pats
		case "exclude":
			c.exclude = pats
		case "to":
			c.to = pats
		}
	}
	c.detailTask = HTMLDetailTask
	if v, ok := p["detail_task"]; ok {
		c.detailTask = str(v)
	}
	if err := checkTaskName("detail_task", c.detailTask); err != nil {
		errs = append(errs, err)
	}
	c.maxPages = intParam(p, "max_pages", 0)
	c.maxURLLength = intParam(p, "max_url_length", 2048)
	c.maxParams = intParam(p, "max_params", 16)
	c.maxVariants = intParam(p, "max_query_variants", 32)
	c.calendarYears = intParam(p, "calendar_years", 2)
	errs = append(errs, checkNonNegative(p, "max_pages", "max_url_length", "max_params", "max_query_variants", "calendar_years")...)
	c.enc, e = parseEncodingParam(p["encoding"])
	errs = append(errs, e...)
	return c, errs
}

// siteSeeds is a root step's start: one input per start URL and per sitemap.
func siteSeeds(p crawl.Params) []crawl.Input {
	out := seedInputs(p)
	c, _ := buildSite(p)
	for _, u := range c.sitemaps {
		out = append(out, crawl.Input{URL: u, Vars: map[string]any{VarStart: true, VarSitemap: true}})
	}
	return out
}

func runSite(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	if notMine(env, in) {
		return crawl.Result{}, nil
	}
	c, err := configOf(env, SiteTask, buildSite)
	if err != nil {
		return crawl.Result{}, err
	}
	if !isSeed(in) {
		u, err := c.inputURL(in)
		if err != nil {
			return crawl.Result{}, err
		}
		return c.visit(ctx, env, c.branchOf(in, u))
	}
	if len(c.urls) == 0 && len(c.sitemaps) == 0 {
		return crawl.Result{}, crawl.Permanentf("%s: the seed input needs start URLs: set param urls or sitemaps, or give this step a `from:` whose inputs carry URLs", SiteTask)
	}
	var res crawl.Result
	for _, u := range c.urls {
		r, err := c.visit(ctx, env, c.branchOf(crawl.Input{URL: u}, u))
		if err != nil {
			return crawl.Result{}, err
		}
		res = merge(res, r)
	}
	for _, u := range c.sitemaps {
		r, err := c.visit(ctx, env, c.branchOf(crawl.Input{URL: u, Vars: map[string]any{VarSitemap: true}}, u))
		if err != nil {
			return crawl.Result{}, err
		}
		res = merge(res, r)
	}
	return res, nil
}

// branch is what one input knows of the crawl it belongs to.
type branch struct {
	url     string   // the page (or sitemap) to fetch
	root    *url.URL // canonical start URL, for scope
	budget  int      // site pages this branch may fetch, itself included; 0: no limit
	seen    seenSet  // the pages on the way here
	sitemap bool
}

// branchOf reads an input's place in its crawl. An input without a root is a start: a
// start URL of this step, or a page another step hands over, each a crawl of its own.
func (c *siteConfig) branchOf(in crawl.Input, u string) branch {
	b := branch{url: u, sitemap: in.Var(VarSitemap) != "", seen: seenOf(in)}
	root := in.Var(VarRoot)
	if root == "" {
		root = u
		b.budget = c.maxPages
	} else if n, ok := crawl.AsInt(in.Vars[VarBudget]); ok {
		b.budget = n
	}
	b.root = canonicalParsed(root)
	return b
}

// canonicalParsed is u's canonical form, parsed; u as it is when it has none.
func canonicalParsed(u string) *url.URL {
	if cu, err := crawl.CanonicalURL(u, crawl.CanonOptions{}); err == nil {
		u = cu
	}
	pu, err := url.Parse(u)
	if err != nil {
		return &url.URL{}
	}
	return pu
}

var anchorSel = cascadia.MustCompile("a[href], area[href]")

// visit fetches one page or sitemap and sorts its links: to follow, for the detail
// step, or dropped by a rule.
func (c *siteConfig) visit(ctx context.Context, env *crawl.Env, b branch) (crawl.Result, error) {
	self := canonicalParsed(b.url).String()
	t := c.newTriage(b, self)
	var children []string // child sitemaps of an index
	spent := 0
	if b.sitemap {
		entries, base, err := getSitemap(ctx, env, c.common, b.url)
		if err != nil {
			return crawl.Result{}, err
		}
		for _, e := range entries {
			for _, l := range linksOf(strings.TrimSpace(e.loc), base) {
				if !e.index {
					t.add(l)
				} else if cl, err := crawl.CanonicalURL(l, crawl.CanonOptions{}); err == nil && !t.taken[cl] {
					t.taken[cl] = true
					children = append(children, cl)
				}
			}
		}
	} else {
		spent = 1
		root, base, err := getHTML(ctx, env, c.common, b.url, c.enc)
		if err != nil {
			return crawl.Result{}, err
		}
		for _, a := range anchorSel.MatchAll(root) {
			href, _ := readHTML(a, "href")
			for _, l := range linksOf(strings.TrimSpace(href), base) {
				t.add(l)
			}
		}
	}
	var res crawl.Result
	for _, l := range t.detail {
		res.Next = append(res.Next, crawl.Input{URL: l, Task: c.detailTask, Vars: forOthers(env, nil)})
	}
	follow := append(children, t.follow...)
	shares := shareOut(b.budget, spent, len(follow))
	seen := b.seen.with(self)
	for i, l := range follow {
		vars := map[string]any{VarRoot: b.root.String(), VarSeen: seen}
		if shares != nil {
			if shares[i] == 0 {
				t.dropped["max_pages"]++
				continue
			}
			vars[VarBudget] = shares[i]
		}
		if i < len(children) {
			vars[VarSitemap] = true
		}
		res.Next = append(res.Next, crawl.Input{URL: l, Task: SiteTask, Vars: forSelf(env, vars)})
	}
	for _, r := range dropRules {
		n := t.dropped[r.name]
		switch {
		case n == 0:
		case r.trap:
			// Traps are counted and named: a site growing one is worth a look.
			res.Trapped += n
			res.TrapRules = crawl.AddCounts(res.TrapRules, map[string]int{r.name: n})
			res.Notes = append(res.Notes, fmt.Sprintf("%s: dropped %d %s: %s", b.url, n, plural(n, "link"), r.text))
		default:
			res.OutOfScope += n // the scope the step asked for: counted, not logged per page
		}
	}
	return res, nil
}

// shareOut splits a branch's budget, less the page itself (spent), among n followed
// links in page order, the first ones taking the remainder; nil when there is no limit.
func shareOut(budget, spent, n int) []int {
	if budget == 0 {
		return nil
	}
	left := max(budget-spent, 0)
	out := make([]int, n)
	for i := range out {
		out[i] = left / n
		if i < left%n {
			out[i]++
		}
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// triage sorts the links of one page.
type triage struct {
	c        *siteConfig
	b        branch
	self     string
	now      time.Time
	taken    map[string]bool // canonical links already sorted on this page
	variants map[string]int  // query strings seen per path on this page
	follow   []string        // for this step
	detail   []string        // for the detail step
	dropped  map[string]int  // by rule
}

func (c *siteConfig) newTriage(b branch, self string) *triage {
	return &triage{c: c, b: b, self: self, now: time.Now(), taken: map[string]bool{}, variants: map[string]int{}, dropped: map[string]int{}}
}

// add sorts one absolute link. Links that are not http(s) pages (mailto:, javascript:,
// a broken escape) are no links to a page and are passed over; so are links back to
// this page or a page on the way here (a loop the step's max_depth would otherwise
// cut).
func (t *triage) add(raw string) {
	canon, err := crawl.CanonicalURL(raw, crawl.CanonOptions{})
	if err != nil || t.taken[canon] {
		return
	}
	t.taken[canon] = true
	if canon == t.self || t.b.seen.has(canon) {
		return
	}
	u, err := url.Parse(canon)
	if err != nil {
		return
	}
	c := t.c
	rule := ""
	switch {
	case !c.inScope(t.b.root, u):
		rule = "scope"
	case c.maxURLLength > 0 && len(canon) > c.maxURLLength:
		rule = "length"
	case repeatsSegment(u.EscapedPath()):
		rule = "repeat"
	case c.calendarYears > 0 && outsideYears(u, t.now.Year()-c.calendarYears, t.now.Year()+c.calendarYears):
		rule = "calendar"
	case c.maxParams > 0 && u.RawQuery != "" && strings.Count(u.RawQuery, "&")+1 > c.maxParams:
		rule = "params"
	case c.maxVariants > 0 && u.RawQuery != "" && t.variant(u) > c.maxVariants:
		rule = "variants"
	case matchAny(c.exclude, u, canon):
		rule = "exclude"
	}
	if rule != "" {
		t.dropped[rule]++
		return
	}
	included := len(c.include) == 0 || matchAny(c.include, u, canon)
	if matchAny(c.to, u, canon) {
		t.detail = append(t.detail, canon)
		if len(c.include) == 0 || !included {
			return
		}
	} else if !included {
		t.dropped["include"]++
		return
	}
	t.follow = append(t.follow, canon)
}

// variant counts one more query string for u's path on this page.
func (t *triage) variant(u *url.URL) int {
	k := u.Scheme + "://" + u.Host + u.EscapedPath()
	t.variants[k]++
	return t.variants[k]
}

// inScope reports whether link belongs to the site root starts.
func (c *siteConfig) inScope(root, link *url.URL) bool {
	switch c.scope {
	case scopeDomain:
		return registrable(root.Hostname()) == registrable(link.Hostname())
	case scopePrefix:
		dir := root.EscapedPath()
		dir = dir[:strings.LastIndex(dir, "/")+1]
		return root.Host == link.Host && strings.HasPrefix(link.EscapedPath(), dir)
	}
	return root.Host == link.Host
}

// registrable is a host's registrable domain (eTLD+1 by the public suffix list), or the
// host itself when it has none (an IP address, localhost).
func registrable(host string) string {
	if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return d
	}
	return host
}

// repeatsSegment reports a path with one segment three times or more (/a/b/a/b/a/b):
// relative links that resolve deeper on every visit.
func repeatsSegment(path string) bool {
	n := map[string]int{}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" {
			continue
		}
		if n[seg]++; n[seg] >= 3 {
			return true
		}
	}
	return false
}

var (
	// dateRE finds a year followed by a month (2031-01, 2031/01/05, 2031_1) in a path or
	// a query value.
	dateRE = regexp.MustCompile(`(?:^|[^0-9])((?:19|20|21)[0-9]{2})[-/_.](?:0?[1-9]|1[0-2])(?:[^0-9]|$)`)
	yearRE = regexp.MustCompile(`^(?:19|20|21)[0-9]{2}$`)
)

// yearParams are query parameters read as a year on their own (a calendar's ?y=2031&m=1).
var yearParams = map[string]bool{"y": true, "yr": true, "year": true, "yyyy": true}

// outsideYears reports a link whose path or query names a date in a year before lo or
// after hi: a calendar's "next month" links go on forever.
func outsideYears(u *url.URL, lo, hi int) bool {
	outside := func(y string) bool {
		n, _ := strconv.Atoi(y)
		return n < lo || n > hi
	}
	for _, m := range dateRE.FindAllStringSubmatch(u.Path, -1) {
		if outside(m[1]) {
			return true
		}
	}
	for name, vals := range u.Query() {
		for _, v := range vals {
			if yearParams[strings.ToLower(name)] && yearRE.MatchString(v) && outside(v) {
				return true
			}
			for _, m := range dateRE.FindAllStringSubmatch(v, -1) {
				if outside(m[1]) {
					return true
				}
			}
		}
	}
	return false
}

// linkPattern is one include, exclude or to pattern.
type linkPattern struct {
	re    *regexp.Regexp
	glob  bool // else a regexp searched in the whole link
	path  bool // a glob over the path, else over the whole link
	query bool // a glob with a ?, matched with the link's query
}

func (p linkPattern) match(u *url.URL, canon string) bool {
	if !p.glob {
		return p.re.MatchString(canon)
	}
	s := u.EscapedPath()
	if !p.path {
		s = u.Scheme + "://" + u.Host + s
	}
	if p.query && u.RawQuery != "" {
		s += "?" + u.RawQuery
	}
	return p.re.MatchString(s)
}

func matchAny(pats []linkPattern, u *url.URL, canon string) bool {
	for _, p := range pats {
		if p.match(u, canon) {
			return true
		}
	}
	return false
}

// parsePatterns reads a list of link patterns (see patternDoc).
func parsePatterns(p crawl.Params, name string) ([]linkPattern, []error) {
	var out []linkPattern
	var errs []error
	for i, raw := range strList(p[name]) {
		raw = strings.TrimSpace(raw)
		if expr, ok := strings.CutPrefix(raw, "re:"); ok {
			re, err := regexp.Compile(expr)
			if err != nil {
				errs = append(errs, fmt.Errorf("param %s[%d]: bad regex %q: %s; fix the pattern", name, i, expr, reError(err)))
				continue
			}
			out = append(out, linkPattern{re: re})
			continue
		}
		lower := strings.ToLower(raw)
		isURL := strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://")
		if !isURL && !strings.HasPrefix(raw, "/") {
			errs = append(errs, fmt.Errorf("param %s[%d]: %q is not a pattern; write a glob starting with / for the path (/products/*), one starting with https:// for the whole link, or re: and a regexp (re:/p/[0-9]+$)", name, i, raw))
			continue
		}
		out = append(out, linkPattern{re: globRE(raw), glob: true, path: !isURL, query: strings.Contains(raw, "?")})
	}
	return out, errs
}

// globRE compiles a glob: ** matches anything, * anything but /, the rest itself.
func globRE(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(glob); {
		switch {
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(".*")
			i += 2
		case glob[i] == '*':
			b.WriteString("[^/]*")
			i++
		default:
			j := i
			for j < len(glob) && glob[j] != '*' {
				j++
			}
			b.WriteString(regexp.QuoteMeta(glob[i:j]))
			i = j
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}
