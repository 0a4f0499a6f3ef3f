package demo

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/trawlerhq/trawler/crawl"
)

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
