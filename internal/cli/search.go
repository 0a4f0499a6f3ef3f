package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/endpoints"
	"github.com/trawlerhq/trawler/internal/storage/es"
)

// titleFields are tried, in order, for the TITLE column of `trawler search`.
var titleFields = []string{"title", "name", "headline", "subject", "text", "body", "description"}

func searchCmd(s *Settings) *cobra.Command {
	var (
		index, sortBy, dsl, tenant string
		size                       int
		aggs                       []string
	)
	cmd := &cobra.Command{
		Use:   "search [QUERY...]",
		Short: "Search stored items in Elasticsearch (query-string syntax, or raw query DSL)",
		Long: `Search the items the es sink stored. Every task has its own index
(trawler-<site>-<task>), all of them behind the alias trawler-items, which is searched by
default; --tenant T searches T's documents alone, through the alias trawler.T that
Trawler keeps for every tenant (see "Per-tenant search" in docs/search.md). Item fields
are at the top level (key, biz, url, ts, run_id, chain, tenant); the task's fields
are under data (data.title, data.points, ...). Text fields have a keyword
sub-field for exact matches, sorting and aggregations (data.title.keyword). A query
that finds nothing because it names a field the indexes lack (title:cache for
data.title:cache), and an --agg on such a field, say so on stderr.

QUERY uses Elasticsearch's query-string syntax: words (any text field), "a phrase",
field:value, field:>10, field:[a TO b], wildcards (go*), _exists_:field, AND, OR, NOT,
and parentheses. No QUERY matches everything. --dsl FILE sends a complete search body
(query DSL, sort, aggs, highlight ...) as is; "-" reads it from stdin.

The Elasticsearch address comes from --es, then TRAWLER_ES, then the "es" field of
--data's endpoints.json (a running 'trawler dev'), then http://127.0.0.1:9200.

Output is a table of KEY, BIZ, SCORE and a title-like field, then one block per
aggregation; --json prints Elasticsearch's answer as one JSON line.`,
		Example: `  trawler search --data .data/dev 'go AND concurrency'
  trawler search --data .data/dev 'biz:demo.story AND data.points:>100' --sort data.points:desc --size 20
  trawler search --data .data/dev '"rust compiler"' --index trawler-hackernews-item
  trawler search --data .data/dev 'go' --tenant acme --index trawler-hackernews-item
  trawler search --data .data/dev --agg biz --agg data.author.keyword --size 0
  trawler search --es http://es.internal:9200 'run_id:demo-20261122-1' --json
  trawler search --data .data/dev --dsl query.json
  echo '{"query":{"range":{"ts":{"gte":"now-1d"}}},"aggs":{"per_hour":{"date_histogram":{"field":"ts","fixed_interval":"1h"}}}}' | trawler search --dsl -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tenant != "" {
				// The tenant's filtered alias, the name its analysts' Elasticsearch role
				// grants: the query sees that tenant's documents only.
				if !crawl.IsDefaultTenant(tenant) && !crawl.IsTenantName(tenant) {
					return fmt.Errorf("--tenant %q: use lowercase letters, digits, - and _, starting with a letter or digit", tenant)
				}
				t, err := es.ForTenant(tenant, index)
				if err != nil {
					return fmt.Errorf("--index: %w", err)
				}
				index = t
			}
			addr, err := searchAddress(s)
			if err != nil {
				return err
			}
			var body []byte
			if dsl != "" {
				if len(args) > 0 || sortBy != "" || len(aggs) > 0 {
					return errors.New("--dsl sends its file as is: drop QUERY, --sort and --agg (put them in the file)")
				}
				if dsl == "-" {
					body, err = io.ReadAll(cmd.InOrStdin())
				} else {
					body, err = os.ReadFile(dsl)
				}
				if err != nil {
					return fmt.Errorf("read --dsl: %w", err)
				}
				if !json.Valid(body) {
					return fmt.Errorf("--dsl %s is not valid JSON", dsl)
				}
			} else {
				body, err = es.Query{Q: strings.Join(args, " "), Size: size, Sort: sortBy, Aggs: aggs}.Body()
				if err != nil {
					return err
				}
			}
			auth, err := s.esAuth()
			if err != nil {
				return err
			}
			c, err := auth.NewClient([]string{addr}, nil)
			if err != nil {
				//lint:ignore ST1005 starts with the name of the store, as users know it
				return fmt.Errorf("Elasticsearch at %s: %s", crawl.RedactURL(addr), crawl.RedactText(err.Error()))
			}
			res, err := c.Search(c.Search.WithContext(cmd.Context()), c.Search.WithIndex(es.IndexPath(index)...), c.Search.WithBody(bytes.NewReader(body)))
			if err != nil {
				return fmt.Errorf("cannot reach Elasticsearch at %s: %v\n  start a local stack with `trawler dev --data .data/dev` and pass --data .data/dev, or point --es / TRAWLER_ES at your cluster", crawl.RedactURL(addr), err)
			}
			defer res.Body.Close()
			raw, err := io.ReadAll(res.Body)
			if err != nil {
				return err
			}
			var out map[string]any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&out); err != nil {
				return fmt.Errorf("search: %s: %s", res.Status(), strings.TrimSpace(string(raw)))
			}
			if res.IsError() {
				if s.JSON {
					_ = PrintJSON(out)
				}
				reason := esReason(out)
				for _, f := range aggs {
					// Elasticsearch refuses a terms aggregation on a text field with a
					// paragraph (in a shard failure's reason, on a cluster); the keyword
					// sub-field is the one to use.
					if body := string(raw); strings.Contains(body, "["+f+"]") && strings.Contains(body, "fielddata") {
						return fmt.Errorf("search failed: %s is a text field: aggregate on %s.keyword (--agg %s.keyword)", f, f, f)
					}
				}
				return fmt.Errorf("search failed (%s): %s", res.Status(), reason)
			}
			if s.JSON {
				return PrintJSON(out)
			}
			printHits(cmd.OutOrStdout(), out)
			printAggs(cmd.OutOrStdout(), out["aggregations"], "")
			if dsl == "" {
				for _, h := range fieldHints(cmd, c, index, strings.Join(args, " "), aggs, out) {
					fmt.Fprintln(cmd.ErrOrStderr(), h)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&index, "index", es.Alias, "index, alias or pattern to search (trawler-* works)")
	f.StringVar(&tenant, "tenant", "", "search only `TENANT`'s documents, through its alias trawler.TENANT (with --index trawler-<site>-<task>: trawler.TENANT.<site>-<task>)")
	f.IntVar(&size, "size", 10, "hits to show")
	f.StringVar(&sortBy, "sort", "", "sort by FIELD, FIELD:desc or -FIELD (comma-separated for several); default by score")
	f.StringArrayVar(&aggs, "agg", nil, "count hits per value of FIELD (a terms aggregation; repeat for several)")
	f.StringVar(&dsl, "dsl", "", "send this JSON file as the search body (query DSL); - for stdin")
	return cmd
}

// searchAddress resolves the settings as a command that needs no Temporal does
// (credentials included) and returns the Elasticsearch URL: --es by the settings rule
// (flag, TRAWLER_ES, --data's endpoints.json), else the local default.
func searchAddress(s *Settings) (string, error) {
	if err := s.resolveOffline(); err != nil {
		return "", err
	}
	addr := s.ES
	if addr == "" && s.Data != "" {
		if _, err := s.readEndpoints(); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%s names no Elasticsearch (no \"es\" field): pass --es URL", endpoints.Path(s.Data))
	}
	if addr == "" {
		addr = "http://127.0.0.1:9200"
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return addr, nil
}

func esReason(out map[string]any) string {
	e, ok := out["error"].(map[string]any)
	if !ok {
		b, _ := json.Marshal(out)
		return string(b)
	}
	return fmt.Sprintf("%v: %v", e["type"], e["reason"])
}

func lookup(m map[string]any, path string) any {
	var cur any = m
	for _, p := range strings.Split(path, ".") {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = o[p]
	}
	return cur
}

func titleOf(src map[string]any) string {
	for _, f := range titleFields {
		for _, p := range []string{"data." + f, f} {
			if v := lookup(src, p); v != nil && fmt.Sprint(v) != "" {
				return clip(fmt.Sprint(v), 70)
			}
		}
	}
	if u, ok := src["url"].(string); ok {
		return clip(u, 70)
	}
	return ""
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func printHits(w io.Writer, out map[string]any) {
	hits, _ := out["hits"].(map[string]any)
	list, _ := hits["hits"].([]any)
	if len(list) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tBIZ\tSCORE\tTITLE")
		for _, h := range list {
			hm, _ := h.(map[string]any)
			src, _ := hm["_source"].(map[string]any)
			key := fmt.Sprint(orString(src["key"], hm["_id"]))
			biz := fmt.Sprint(orString(src["biz"], hm["_index"]))
			score := "-"
			if sc, ok := hm["_score"].(json.Number); ok {
				if f, err := sc.Float64(); err == nil {
					score = fmt.Sprintf("%.3f", f)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", clip(key, 40), biz, score, titleOf(src))
		}
		tw.Flush()
	}
	if t, ok := hits["total"].(map[string]any); ok {
		rel := ""
		if t["relation"] == "gte" {
			rel = "at least "
		}
		fmt.Fprintf(w, "%s%v hits, %d shown\n", rel, t["value"], len(list))
	} else {
		fmt.Fprintf(w, "%d hits shown\n", len(list))
	}
}

func orString(v, def any) any {
	if v == nil || fmt.Sprint(v) == "" {
		return def
	}
	return v
}

func printAggs(w io.Writer, v any, indent string) {
	aggs, ok := v.(map[string]any)
	if !ok {
		return
	}
	names := make([]string, 0, len(aggs))
	for n := range aggs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a, ok := aggs[n].(map[string]any)
		if !ok {
			continue
		}
		if buckets, ok := a["buckets"].([]any); ok {
			fmt.Fprintf(w, "%s%s:\n", indent, n)
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, b := range buckets {
				bm, _ := b.(map[string]any)
				key := bm["key_as_string"]
				if key == nil {
					key = bm["key"]
				}
				fmt.Fprintf(tw, "%s  %v\t%v\n", indent, key, bm["doc_count"])
			}
			tw.Flush()
			if other, ok := a["sum_other_doc_count"].(json.Number); ok && other.String() != "0" {
				fmt.Fprintf(w, "%s  (other)  %s\n", indent, other)
			}
			for _, b := range buckets {
				bm, _ := b.(map[string]any)
				sub := map[string]any{}
				for k, x := range bm {
					if _, isAgg := x.(map[string]any); isAgg {
						sub[k] = x
					}
				}
				if len(sub) > 0 {
					key := bm["key_as_string"]
					if key == nil {
						key = bm["key"]
					}
					fmt.Fprintf(w, "%s  [%v]\n", indent, key)
					printAggs(w, sub, indent+"    ")
				}
			}
			continue
		}
		if val, ok := a["value"]; ok {
			if s, ok := a["value_as_string"]; ok {
				val = s
			}
			fmt.Fprintf(w, "%s%s: %v\n", indent, n, orString(val, "null"))
		}
	}
}

// queryFieldRE finds the field names of a query string: the word before a colon at
// the start of a term (title:cache, +data.points:>10, (biz:x OR …)).
var queryFieldRE = regexp.MustCompile(`(?:^|[\s(+!-])([A-Za-z_][\w.]*):`)

// fieldHints explains an empty answer that comes from a field name the indexes do not
// have: a query's title:cache (the task's fields are under data.) and an --agg whose
// field no index maps. It reads the mapping only when something came back empty.
func fieldHints(cmd *cobra.Command, c *es.Client, index, query string, aggs []string, out map[string]any) []string {
	var suspects []string // field names to look up, with what names them
	if total, ok := lookup(out, "hits.total.value").(json.Number); ok && total.String() == "0" {
		for _, m := range queryFieldRE.FindAllStringSubmatch(query, -1) {
			if m[1] != "_exists_" {
				suspects = append(suspects, m[1])
			}
		}
	}
	var emptyAggs []string
	results, _ := out["aggregations"].(map[string]any)
	for _, f := range aggs { // named after their field, dots and all
		if a, ok := results[f].(map[string]any); ok {
			if b, ok := a["buckets"].([]any); ok && len(b) == 0 {
				emptyAggs = append(emptyAggs, f)
			}
		}
	}
	if len(suspects) == 0 && len(emptyAggs) == 0 {
		return nil
	}
	res, err := c.Indices.GetMapping(c.Indices.GetMapping.WithContext(cmd.Context()), c.Indices.GetMapping.WithIndex(index))
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	var mappings map[string]struct {
		Mappings map[string]any `json:"mappings"`
	}
	if res.IsError() || json.NewDecoder(res.Body).Decode(&mappings) != nil {
		return nil
	}
	mapped := func(path string) bool {
		for _, m := range mappings {
			if mappedField(m.Mappings, path) {
				return true
			}
		}
		return false
	}
	var hints []string
	for _, f := range suspects {
		if mapped(f) {
			continue
		}
		h := fmt.Sprintf("%s is not a field of %s", f, index)
		if mapped("data." + f) {
			h += ": the task's fields are under data.: data." + f
		}
		hints = append(hints, h)
	}
	for _, f := range emptyAggs {
		if mapped(f) {
			continue
		}
		h := fmt.Sprintf("%s: no index of %s has this field", f, index)
		for _, alt := range []string{f + ".keyword", "data." + f + ".keyword", "data." + f} {
			if mapped(alt) {
				h += "; aggregate on " + alt
				break
			}
		}
		hints = append(hints, h)
	}
	return hints
}

// mappedField reports whether an index mapping has the dotted field path, through
// object properties and multi-fields (data.title.keyword).
func mappedField(mapping map[string]any, path string) bool {
	level, _ := mapping["properties"].(map[string]any)
	for part := range strings.SplitSeq(path, ".") {
		f, ok := level[part].(map[string]any)
		if !ok {
			return false
		}
		level, _ = f["properties"].(map[string]any)
		if level == nil {
			level, _ = f["fields"].(map[string]any)
		}
	}
	return true
}
