package generic

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/trawlerhq/trawler/crawl"
)

// itemRules are what every item-producing task shares: the fields, the key and the
// detail link.
type itemRules struct {
	task       string
	fields     fieldSet
	key        *fieldSpec
	detail     string // field name; "" when items are stored here
	detailTask string
}

func parseItemRules(task string, p crawl.Params, src srcKind, ns map[string]string, defaultDetailTask string) (itemRules, []error) {
	r := itemRules{task: task}
	var errs []error
	var ferrs []error
	r.fields, ferrs = parseFields(p["fields"], src, ns)
	errs = append(errs, ferrs...)
	var kerrs []error
	r.key, kerrs = parseOptionalSpec(p, "key", src, ns)
	errs = append(errs, kerrs...)
	r.detail = str(p["detail"])
	if r.detail != "" && r.fields.get(r.detail) == nil && len(ferrs) == 0 {
		names := make([]string, len(r.fields))
		for i, f := range r.fields {
			names[i] = f.name
		}
		if len(names) == 0 {
			errs = append(errs, fmt.Errorf("param detail: names the field %q, but there are no fields; add `%s` under fields (e.g. {css: a, attr: href, type: url})", r.detail, r.detail))
		} else {
			errs = append(errs, fmt.Errorf("param detail: no field %q%s; fields: %v", r.detail, crawl.Suggest(r.detail, names), names))
		}
	}
	r.detailTask = defaultDetailTask
	if v, ok := p["detail_task"]; ok {
		r.detailTask = str(v)
	}
	if err := checkTaskName("detail_task", r.detailTask); err != nil {
		errs = append(errs, err)
	}
	return r, errs
}

// collector gathers one page's results.
type collector struct {
	rules  itemRules
	env    *crawl.Env
	page   string // URL of the page, for keys and messages
	base   *url.URL
	res    crawl.Result
	n      int             // items seen on the page, for positional keys
	linked map[string]bool // detail links already emitted from this page
}

func newCollector(r itemRules, env *crawl.Env, page string, base *url.URL) *collector {
	return &collector{rules: r, env: env, page: page, base: base, linked: map[string]bool{}}
}

// add extracts one item with get and stores it, or emits its detail link. fallbackKey,
// when not empty, is the item's natural key if the key spec gives none; else the key is
// the page URL#position.
func (c *collector) add(get func(*fieldSpec) ([]raw, string), fallbackKey string) error {
	c.n++
	data, empty, notes, err := extract(c.rules.fields, c.base, true, get)
	if err != nil {
		return crawl.Permanentf("%s: %s: item %d: %v", c.rules.task, c.page, c.n, err)
	}
	for _, n := range notes {
		c.res.Notes = append(c.res.Notes, fmt.Sprintf("%s: item %d: %s", c.page, c.n, n))
	}
	if empty {
		c.res.Skipped++
		return nil
	}
	return c.addData(data, get, fallbackKey)
}

// addData stores an item whose data is already extracted (or emits its detail links).
func (c *collector) addData(data map[string]any, get func(*fieldSpec) ([]raw, string), fallbackKey string) error {
	if c.rules.detail != "" {
		links := linksOf(data[c.rules.detail], c.base)
		if len(links) == 0 {
			c.res.Skipped++
			return nil
		}
		carry := carried(data)
		for _, l := range links {
			if c.linked[pageKey(l)] {
				continue
			}
			c.linked[pageKey(l)] = true
			var vars map[string]any
			if len(carry) > 0 {
				vars = map[string]any{VarFields: carry}
			}
			c.res.Next = append(c.res.Next, crawl.Input{URL: l, Task: c.rules.detailTask, Vars: forOthers(c.env, vars)})
		}
		return nil
	}
	key, err := keyOf(c.rules.key, c.base, get)
	if err != nil {
		return crawl.Permanentf("%s: %s: item %d: key: %v", c.rules.task, c.page, c.n, err)
	}
	if key == "" && c.rules.key != nil {
		// A key that finds nothing must not quietly become the URL: dedup would then
		// take every item of the page for one record, or each visit for a new one.
		return crawl.WithCause(crawl.Permanentf("%s: %s: item %d: `key: %s` finds nothing on this item; fix its %s, or leave `key:` out to key items by URL",
			c.rules.task, c.page, c.n, c.rules.key.expr, cmp.Or(c.rules.key.kind, "selector")), crawl.CauseParse)
	}
	if key == "" {
		key = fallbackKey
	}
	if key == "" {
		key = c.page + "#" + strconv.Itoa(c.n)
	}
	c.res.Items = append(c.res.Items, crawl.Item{Key: key, URL: c.page, Data: data})
	return nil
}

// linksOf returns the absolute http(s) URLs in a detail field's value.
func linksOf(v any, base *url.URL) []string {
	var vals []any
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		vals = x
	default:
		vals = []any{x}
	}
	var out []string
	for _, e := range vals {
		s, ok := e.(string)
		if !ok {
			continue
		}
		l, ok := resolveLink(base, s)
		if !ok {
			continue
		}
		if u, err := url.Parse(l); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			out = append(out, l)
		}
	}
	return out
}

// carried is the part of a list item that rides along to its detail page: every field
// with a value whose JSON form is at most carryLimit bytes (inputs travel through
// workflow history, so they stay small).
func carried(data map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range data {
		if v == nil {
			continue
		}
		if l, ok := v.([]any); ok && len(l) == 0 {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil || len(b) > carryLimit {
			continue
		}
		out[k] = v
	}
	return out
}

// mergeCarried fills the fields a detail page did not find from the list page's.
func mergeCarried(data map[string]any, in crawl.Input) {
	m, ok := in.Vars[VarFields].(map[string]any)
	if !ok {
		return
	}
	for k, v := range m {
		if cur, ok := data[k]; !ok || cur == nil {
			data[k] = v
		} else if l, isList := cur.([]any); isList && len(l) == 0 {
			data[k] = v
		}
	}
}
