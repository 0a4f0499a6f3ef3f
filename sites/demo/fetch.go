package demo

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/PuerkitoBio/goquery"

	"trawler/crawl"
	"trawler/fetch/charset"
)

// getHTML fetches u and parses it as HTML. The fetcher fails statuses other than 2xx,
// retryable when a retry may cure them, with the server's Retry-After honoured.
func getHTML(ctx context.Context, env *crawl.Env, u string) (*goquery.Document, *crawl.Response, error) {
	resp, err := env.Get(ctx, u)
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", u, err)
	}
	body, err := charset.HTML(resp.Body, resp.Header.Get("Content-Type"), nil)
	if err != nil {
		return nil, nil, crawl.Permanentf("GET %s: %v", u, err)
	}
	root, err := crawl.ParseHTML(bytes.NewReader(body))
	if err != nil {
		return nil, nil, crawl.Permanentf("GET %s: parse HTML: %w", u, err)
	}
	doc := goquery.NewDocumentFromNode(root)
	if pu, err := url.Parse(pageURL(resp, u)); err == nil {
		doc.Url = pu
	}
	return doc, resp, nil
}

// pageURL is the URL links on the response resolve against.
func pageURL(resp *crawl.Response, requested string) string {
	if resp != nil && resp.URL != "" {
		return resp.URL
	}
	return requested
}

// resolve makes href absolute against the document's URL.
func resolve(doc *goquery.Document, href string) (string, error) {
	ref, err := url.Parse(strings.TrimSpace(href))
	if err != nil {
		return "", err
	}
	if doc.Url == nil {
		return ref.String(), nil
	}
	return doc.Url.ResolveReference(ref).String(), nil
}

// param returns a step param, falling back to the task's declared default when the
// caller did not apply defaults.
func param(env *crawl.Env, spec crawl.TaskSpec, name string) any {
	if v, ok := env.Params[name]; ok && v != nil {
		return v
	}
	if p, ok := spec.Param(name); ok {
		return p.Default
	}
	return nil
}

func intParam(env *crawl.Env, spec crawl.TaskSpec, name string) (int, error) {
	v := param(env, spec, name)
	n := crawl.Params{name: v}.Int(name)
	if s := fmt.Sprint(v); n == 0 && s != "0" {
		return 0, crawl.Permanentf("%s: param %s: want an integer, got %v", spec.Name, name, v)
	}
	return n, nil
}

// baseURL returns the base_url param without a trailing slash, checked to be an absolute
// http(s) URL.
func baseURL(env *crawl.Env, spec crawl.TaskSpec) (string, error) {
	raw := strings.TrimRight(fmt.Sprint(param(env, spec, "base_url")), "/")
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", crawl.Permanentf("%s: param base_url: want an absolute http(s) URL, got %q", spec.Name, raw)
	}
	return raw, nil
}

// leadingInt reads the number a text starts with ("371 points" → 371).
func leadingInt(s string) (int, bool) {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, false
	}
	n, err := strconv.Atoi(s[:end])
	return n, err == nil
}

// varInt reads an integer input variable; JSON round trips turn ints into float64.
func varInt(in crawl.Input, name string) (int, bool) {
	switch v := in.Vars[name].(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	case float64:
		if v == float64(int(v)) {
			return int(v), true
		}
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// inputURL returns the page URL of an input that carries either a URL or an id in Value,
// and the id.
func inputURL(env *crawl.Env, spec crawl.TaskSpec, in crawl.Input, path *regexp.Regexp, build func(base string, id int) string) (string, int, error) {
	if in.URL != "" {
		pu, err := url.Parse(in.URL)
		if err != nil {
			return "", 0, crawl.Permanentf("%s: bad input URL %q: %v", spec.Name, in.URL, err)
		}
		m := path.FindStringSubmatch(pu.Path)
		if m == nil {
			return "", 0, crawl.Permanentf("%s: input URL %q does not look like %s", spec.Name, in.URL, path)
		}
		id, _ := strconv.Atoi(m[1])
		return in.URL, id, nil
	}
	id, ok := valueInt(in.Value)
	if !ok {
		return "", 0, crawl.Permanentf("%s: input has neither a URL nor a numeric id (got %s)", spec.Name, in.Describe())
	}
	base, err := baseURL(env, spec)
	if err != nil {
		return "", 0, err
	}
	return build(base, id), id, nil
}

func valueInt(v any) (int, bool) {
	n, ok := crawl.AsInt(v)
	return n, ok && n > 0
}
