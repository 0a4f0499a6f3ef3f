package generic

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/charset"
)

// maxSitemapBytes bounds a decompressed sitemap (the protocol allows 50 MB).
const maxSitemapBytes = 64 << 20

var sitemapSpec = crawl.TaskSpec{
	Name:  SitemapTask,
	Doc:   "a sitemap index or urlset (plain, gzip or text), or a robots.txt whose Sitemap: lines name them: child sitemaps go back to this step, page URLs to the next step (filtered by include, exclude, lastmod_after)",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		{Name: "include", Type: crawl.List, Doc: "regexes; a page URL must match one of them (default: every URL)"},
		{Name: "exclude", Type: crawl.List, Doc: "regexes; a page URL matching any of them is dropped"},
		{Name: "lastmod_after", Type: crawl.Time, Doc: "keep entries modified after this: a date (2025-01-31), an RFC 3339 time, or a duration back from now (720h); entries without lastmod are kept"},
		{Name: "to_task", Type: crawl.String, Default: "", Doc: "task the page URLs are addressed to (empty: every consumer)"},
		headersParam,
	},
	Timeout: 60 * time.Second,
	Retries: 3,
	Check:   checker(buildSitemap),
}

// Sitemap is the generic.sitemap task.
var Sitemap = configTask(sitemapSpec, buildSitemap, runSitemap)

type sitemapConfig struct {
	common
	include []*regexp.Regexp
	exclude []*regexp.Regexp
	after   time.Time     // zero: no filter
	since   time.Duration // > 0: after = now - since, at run time
	toTask  string
}

func buildSitemap(p crawl.Params) (*sitemapConfig, []error) {
	c := &sitemapConfig{}
	var errs []error
	c.common, errs = parseCommon(SitemapTask, p)
	compile := func(name string) []*regexp.Regexp {
		var out []*regexp.Regexp
		for i, pat := range strList(p[name]) {
			re, err := regexp.Compile(pat)
			if err != nil {
				errs = append(errs, fmt.Errorf("param %s[%d]: bad regex %q: %s; fix the pattern", name, i, pat, reError(err)))
				continue
			}
			out = append(out, re)
		}
		return out
	}
	c.include = compile("include")
	c.exclude = compile("exclude")
	if raw := strings.TrimSpace(str(p["lastmod_after"])); raw != "" {
		if d, err := time.ParseDuration(raw); err == nil && d > 0 {
			c.since = d
		} else if t, ok := parseW3CDate(raw); ok {
			c.after = t
		} else {
			errs = append(errs, fmt.Errorf("param lastmod_after: cannot read %q; write a date like 2025-01-31, an RFC 3339 time like 2025-01-31T08:00:00Z, or a duration back from now like 720h", raw))
		}
	}
	c.toTask = str(p["to_task"])
	if err := checkTaskName("to_task", c.toTask); err != nil {
		errs = append(errs, err)
	}
	return c, errs
}

func runSitemap(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	return runPages(env, in, SitemapTask, buildSitemap, func(c *sitemapConfig, u string, start bool) (crawl.Result, error) {
		return c.page(ctx, env, u)
	})
}

// sitemapEntry is one <sitemap> or <url> of a sitemap.
type sitemapEntry struct {
	loc     string
	lastmod string
	index   bool // a child sitemap
}

// getSitemap fetches and reads one sitemap (plain, gzip or text); base is what its
// relative locations resolve against.
func getSitemap(ctx context.Context, env *crawl.Env, c common, u string) ([]sitemapEntry, *url.URL, error) {
	resp, err := c.fetch(ctx, env, u)
	if err != nil {
		return nil, nil, err
	}
	if isRobotsTxt(u) {
		entries := robotsSitemaps(resp.Body)
		if len(entries) == 0 {
			return nil, nil, crawl.Permanentf("%s: %s names no sitemap (no `Sitemap:` line); give the sitemap's URL in urls instead", c.task, u)
		}
		return entries, finalURL(resp, u), nil
	}
	body, err := gunzipIfGzip(resp.Body)
	if err != nil {
		return nil, nil, crawl.Permanentf("%s: %s: %v", c.task, u, err)
	}
	entries, err := parseSitemap(body, resp.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil, crawl.Permanentf("%s: %s: %v", c.task, u, err)
	}
	return entries, finalURL(resp, u), nil
}

func (c *sitemapConfig) page(ctx context.Context, env *crawl.Env, u string) (crawl.Result, error) {
	entries, base, err := getSitemap(ctx, env, c.common, u)
	if err != nil {
		return crawl.Result{}, err
	}
	after := c.after
	if c.since > 0 {
		after = time.Now().Add(-c.since)
	}
	var res crawl.Result
	seen := map[string]bool{}
	for _, e := range entries {
		loc := strings.TrimSpace(e.loc)
		if loc == "" {
			continue
		}
		links := linksOf(loc, base)
		if len(links) == 0 {
			res.Skipped++
			continue
		}
		link := links[0]
		if seen[link] {
			continue
		}
		seen[link] = true
		var mod time.Time
		if e.lastmod != "" {
			mod, _ = parseW3CDate(strings.TrimSpace(e.lastmod))
		}
		if !after.IsZero() && !mod.IsZero() && !mod.After(after) {
			res.Skipped++
			continue
		}
		if e.index {
			res.Next = append(res.Next, crawl.Input{URL: link, Task: SitemapTask, Vars: forSelf(env, nil)})
			continue
		}
		if !c.keep(link) {
			res.Skipped++
			continue
		}
		var vars map[string]any
		if !mod.IsZero() {
			vars = map[string]any{VarLastmod: mod.UTC().Format(time.RFC3339)}
		}
		res.Next = append(res.Next, crawl.Input{URL: link, Task: c.toTask, Vars: forOthers(env, vars)})
	}
	return res, nil
}

// isRobotsTxt says whether u is a site's robots.txt, whose `Sitemap:` lines name its
// sitemaps: a step may start from it instead of knowing where they are.
func isRobotsTxt(u string) bool {
	p, err := url.Parse(u)
	return err == nil && strings.EqualFold(p.Path, "/robots.txt")
}

// robotsSitemaps reads the `Sitemap:` lines of a robots.txt as child sitemaps.
func robotsSitemaps(body []byte) []sitemapEntry {
	var out []sitemapEntry
	for line := range strings.Lines(string(body)) {
		key, val, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(key), "sitemap") {
			out = append(out, sitemapEntry{loc: strings.TrimSpace(val), index: true})
		}
	}
	return out
}

// keep applies include and exclude to a page URL.
func (c *sitemapConfig) keep(u string) bool {
	if len(c.include) > 0 {
		ok := false
		for _, re := range c.include {
			if re.MatchString(u) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, re := range c.exclude {
		if re.MatchString(u) {
			return false
		}
	}
	return true
}

// gunzipIfGzip decompresses a body that starts with the gzip magic bytes, whatever its
// name or Content-Type says.
func gunzipIfGzip(body []byte) ([]byte, error) {
	if len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		return body, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %v", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, maxSitemapBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %v", err)
	}
	if len(out) > maxSitemapBytes {
		return nil, fmt.Errorf("the sitemap is larger than %d MiB decompressed", maxSitemapBytes>>20)
	}
	return out, nil
}

// parseSitemap reads a sitemap index, a urlset, or a text sitemap (one URL per line).
func parseSitemap(body []byte, contentType string) ([]sitemapEntry, error) {
	body, err := charset.XML(body, contentType, nil)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, nil
	}
	if trimmed[0] != '<' {
		return parseTextSitemap(trimmed), nil
	}
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	d.CharsetReader = charset.PassThrough
	var (
		out     []sitemapEntry
		cur     *sitemapEntry
		field   string
		text    strings.Builder
		rootSet bool
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse sitemap XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			if !rootSet {
				rootSet = true
				if name != "urlset" && name != "sitemapindex" {
					return nil, fmt.Errorf("not a sitemap: the root element is <%s>, not <urlset> or <sitemapindex>", t.Name.Local)
				}
			}
			switch {
			case name == "url" || name == "sitemap":
				cur = &sitemapEntry{index: name == "sitemap"}
			case cur != nil && (name == "loc" || name == "lastmod"):
				field = name
				text.Reset()
			}
		case xml.CharData:
			if field != "" {
				text.Write(t)
			}
		case xml.EndElement:
			name := strings.ToLower(t.Name.Local)
			switch {
			case field != "" && name == field:
				if field == "loc" {
					cur.loc = strings.TrimSpace(text.String())
				} else {
					cur.lastmod = strings.TrimSpace(text.String())
				}
				field = ""
			case cur != nil && (name == "url" || name == "sitemap"):
				out = append(out, *cur)
				cur = nil
			}
		}
	}
	return out, nil
}

func parseTextSitemap(body []byte) []sitemapEntry {
	var out []sitemapEntry
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if u, err := url.Parse(line); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			out = append(out, sitemapEntry{loc: line})
		}
	}
	return out
}

// parseW3CDate reads the W3C datetime forms sitemaps use (2025-01-31,
// 2025-01-31T08:00Z, 2025-01-31T08:00:00+08:00, with fractions) and a few common slips.
func parseW3CDate(s string) (time.Time, bool) {
	for _, l := range []string{
		time.RFC3339Nano,
		"2006-01-02T15:04Z07:00",
		"2006-01-02T15:04:05",
		"2006-01-02T15:04",
		"2006-01-02 15:04:05",
		"2006-01-02",
		"2006-01",
		"2006",
		time.RFC1123Z,
		time.RFC1123,
	} {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
