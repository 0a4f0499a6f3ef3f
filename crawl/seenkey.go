package crawl

import (
	"encoding/json"
	"net/url"
	"strings"
)

// SeenKey is what a run's seen-set knows an input by: two inputs with one key are one
// fetch. An input with a URL is its canonical URL (CanonicalURL with the default
// options: no fragment, user info, default port or tracking parameters, dot segments
// resolved, percent-encoding normalised, query sorted); the variables it carries, such
// as fields from a list row, do not make it another page. An input with a value (`each`)
// is that value. An input of variables alone has no key (ok false): it is a poll or a
// page counter, which a task hands itself again on purpose.
func SeenKey(in Input) (key string, ok bool) {
	switch {
	case in.URL != "":
		return seenURL(in.URL), true
	case in.Value != nil:
		b, err := json.Marshal(in.Value)
		return "value:" + string(b), err == nil
	}
	return "", false
}

func seenURL(raw string) string {
	if c, err := CanonicalURL(raw, CanonOptions{}); err == nil {
		return c
	}
	// Not a URL CanonicalURL takes (a bad escape, say): the fetch will say what is wrong;
	// the key is the URL with what never tells two pages apart taken off.
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return StripUserinfo(raw)
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if port := u.Port(); (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		u.Host = u.Hostname()
	}
	return u.String()
}

// dropDuplicateSeeds keeps the first of each start input with one SeenKey and returns
// how many it dropped.
func dropDuplicateSeeds(seeds []Input) ([]Input, int) {
	seen := map[string]bool{}
	kept := seeds[:0:0]
	for _, in := range seeds {
		k, ok := SeenKey(in)
		if !ok || !seen[k] {
			seen[k] = true
			kept = append(kept, in)
		}
	}
	return kept, len(seeds) - len(kept)
}

// ItemKey is the form dedup keeps an item's key in: URLKey of the key's URL, with its
// fragment kept, because a fragment in an item key names a record of the page (the
// third row of a list keyed page#3, a comment keyed item?id=1#c5), not the page. Keys
// kept before keys were canonical are still found: dedup looks a key up as given when
// its canonical form is unknown.
func ItemKey(key string) string {
	page, fragment, ok := strings.Cut(key, "#")
	if !ok {
		return URLKey(key)
	}
	if c := URLKey(page); c != page {
		return c + "#" + fragment
	}
	return key
}

// URLKey is the form recrawl plans and page items (Out.PageItem) keep a page's URL in: a
// key that is an absolute http(s) URL is its canonical URL (CanonicalURL with the
// defaults, so no fragment), so two spellings of one page are one plan and one record;
// any other key, and a URL CanonicalURL refuses, is kept as given. Plans kept before
// their URLs were canonical are still found: the recrawl planner looks a page up as
// given when its canonical form is unknown.
func URLKey(key string) string {
	if len(key) < 8 || !(strings.EqualFold(key[:7], "http://") || strings.EqualFold(key[:8], "https://")) {
		return key
	}
	if c, err := CanonicalURL(key, CanonOptions{}); err == nil {
		return c
	}
	return key
}
