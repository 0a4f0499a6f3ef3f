// Package yamltest runs Elasticsearch's YAML REST tests (the files under
// rest-api-spec/src/yamlRestTest/resources/rest-api-spec/test/<api>/ in the
// elastic/elasticsearch repository) over HTTP against a server, and counts what passes.
// It is how eslite is measured against Elasticsearch itself. The files are read from
// ../shared/es-yaml beside the repository (or ESLITE_YAML_DIR) and never copied into it;
// TestElasticsearchYAML runs them over the twelve folders below and fails when fewer
// pass than its floor, minPassPercent, the figure last reached rounded down.
//
// The runner implements the suite's semantics: setup and teardown sections, `do` with
// `catch` (bad_request, unauthorized, forbidden, missing, request_timeout, conflict,
// gone, unavailable, param, request (any error but those) and /regex/), `headers` and
// `ignore`, the assertions match, length, is_true, is_false, gt, gte, lt, lte, contains,
// exists, not_exists and close_to, `set` and `transform_and_set` with $stash
// substitution in values, keys and paths, and `skip`/`requires` gates on versions,
// runner features, cluster features, awaits_fix and known_issues. A failing teardown
// fails its test, and between tests every index is deleted and the cluster settings
// reset, as the real runner wipes the cluster.
//
// It is as strict as Elasticsearch's framework: match compares numbers by value and
// everything else by type and value (the string "1" is not the number 1, true is not
// "true"); a /regex/ in match applies only to a string, found anywhere in it, in Java's
// COMMENTS mode; gt, gte, lt and lte compare numbers with numbers and strings with
// strings, nothing else; close_to wants a number; is_true and is_false judge a value by
// its Java string form (null, "", "0" and "false" in any case are false; 0.0 and an
// empty object are true); `catch: /regex/` wants an error status and an `error` in the
// response, and finds the pattern in that error's Java form ({root_cause=[...],
// type=..., reason=...}, keys in the response's order). Where it differs: numbers
// nested in an object or list compare by value too (Java's Map.equals would tell the
// Integer 1 from the Double 1.0, a difference JSON does not carry), gt and friends
// compare a long with a double by value (Java would throw a ClassCastException), and
// length counts a string's characters, not its UTF-16 units.
//
// A test is skipped, with its reason counted, only when the suite gates it: a runner
// feature (skip.features, requires.test_runner_features) this runner does not have, a
// cluster feature it does not declare, a version range that includes ServerVersion, an
// awaits_fix or unfixed known issue, or an X-Pack API (security.*, xpack.*, ...), which
// Elasticsearch runs only in its X-Pack suites. Some stored files are from the 7.x
// branch, where mapping types still existed and so went ungated: a test that passes a
// `type` or `include_type_name: true`, or asserts that a response has a `_type`, is
// skipped as 7.x only (Elasticsearch 8 fails it as eslite does) rather than counted as
// a failure, and eslite does not answer as 7.x did.
//
// Measured on 2026-11-27 (go test -count=1 -v -run TestElasticsearchYAML
// ./internal/devstack/eslite/yamltest), against eslite, over the 233 files of the
// twelve folders (SOURCES.tsv there names each file's commit):
//
//	folder                run  passed  failed   pass%  skipped
//	bulk                   12      11       1   91.7%        8
//	count                   6       6       0  100.0%        4
//	get                    25      14      11   56.0%        6
//	index                  28      12      16   42.9%       18
//	indices.create         41      40       1   97.6%       63
//	indices.get_alias       7       7       0  100.0%       22
//	indices.get_mapping    20      20       0  100.0%        3
//	indices.put_alias      12      12       0  100.0%        0
//	indices.put_mapping    14      13       1   92.9%        1
//	search                372     307      65   82.5%      111
//	search.aggregation    390     347      43   89.0%        5
//	search.highlight       18      17       1   94.4%       27
//	total                 945     806     139   85.3%      268
//
// Skipped, by reason (the test prints each with its folders): cluster features not
// declared 176 (mapper.track_ignored_source 31,
// mapper.keyword.store_high_cardinality_in_binary_doc_values 29,
// mapper.source.mode_from_index_setting 22, the doc-values prefix/wildcard/regexp
// features 20, other mapper, search, bulk and ingest features 74), the capabilities
// runner feature 38 and other runner features 7 (node_selector, default_shards,
// warnings, yaml, ...), X-Pack APIs 22 (security.put_role), 7.x only 17 (mapping
// types), version ranges and gates the suite sets everywhere 5 ("all", gte_v8.0.0 in a
// skip), awaits_fix 3. On the same day, before the fixes of that day, the figure was 788
// of 945 (83.4%; 788 of 962, 81.9%, before the 7.x gate).
//
// What still fails, by cause (139): synthetic, columnar and ignored _source and
// ignore_above/ignore_malformed in fetched values (29); profiler internals and
// statistics (aggregator class names, collect counts, request cache, fielddata, shard
// counts, pre-filter shard skipping: 18); scripts beyond expressions (scripted_metric,
// stored scripts: 7); Elasticsearch features newer than eslite's model (rank, rerank,
// knn, exact queries, join_hits and lookup fields, unit-aware numbers, time_series and
// downsampling checks: 14); significant_text details (duplicate filtering, heuristics:
// 5); date_nanos precision (nanosecond sort values: 5); mapping limits and validation
// (total_tokens_per_document, ignore_above, synthetic-source mode changes: 7); index
// templates (_template, _index_template: 6); range fields in histograms (4); flattened
// fields in exists, query_string and fields (4); rescore, and collapse with rescore or
// on an alias (5); filter sub-aggregations inside nested ones (2); and single tests
// (HDR over negative values, explain in top_hits, pipeline error texts, geo points with
// null values, tie order in top_metrics, a bulk error's position prefix, and two tests
// that call get without an id, which Elasticsearch's runner refuses too).
package yamltest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Features are the runner features (skip.features / requires.test_runner_features) this
// runner implements. A test asking for any other one is skipped.
var Features = map[string]bool{
	"headers": true, "stash_in_path": true, "stash_in_key": true, "embedded_stash_key": true,
	"stash_path_replace": true, "allowed_warnings": true, "allowed_warnings_regex": true,
	"contains": true, "close_to": true, "transform_and_set": true, "exists": true,
}

// ClusterFeatures are the named cluster features the server is declared to have, besides
// the historical gte_vX.Y.Z ones, which hold for every version up to ServerVersion.
var ClusterFeatures = map[string]bool{}

// ServerVersion is the version skip ranges are compared with.
var ServerVersion = "8.19.7"

// Result is the outcome of one test.
type Result struct {
	Dir, File, Name string
	Status          string // pass, fail, skip
	Reason          string
}

// Runner runs YAML test files against a base URL.
type Runner struct {
	URL    string
	Client *http.Client
}

// RunDir runs every *.yml / *.yaml file of dir (one API directory).
func (r *Runner) RunDir(dir string) ([]Result, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yml") || strings.HasSuffix(e.Name(), ".yaml")) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []Result
	for _, n := range names {
		res, err := r.RunFile(filepath.Join(dir, n))
		if err != nil {
			out = append(out, Result{Dir: filepath.Base(dir), File: n, Name: "(file)", Status: "fail", Reason: err.Error()})
			continue
		}
		out = append(out, res...)
	}
	return out, nil
}

type section struct {
	name  string
	steps []any
}

func parseFile(path string) (setup, teardown *section, tests []section, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var node yaml.Node
		if err := dec.Decode(&node); err != nil {
			if err == io.EOF {
				break
			}
			return nil, nil, nil, fmt.Errorf("yaml: %w", err)
		}
		if len(node.Content) == 0 {
			continue
		}
		m := node.Content[0]
		if m.Kind != yaml.MappingNode {
			return nil, nil, nil, fmt.Errorf("yaml: a section is not a mapping (line %d)", m.Line)
		}
		timestampsAsStrings(m)
		// Keep the order of sections as written: each key is a section name.
		for i := 0; i+1 < len(m.Content); i += 2 {
			name := m.Content[i].Value
			var steps []any
			if err := m.Content[i+1].Decode(&steps); err != nil {
				return nil, nil, nil, fmt.Errorf("yaml: section %q: %w", name, err)
			}
			s := section{name: name, steps: stringKeys(steps).([]any)}
			switch name {
			case "setup":
				setup = &s
			case "teardown":
				teardown = &s
			default:
				tests = append(tests, s)
			}
		}
	}
	return setup, teardown, tests, nil
}

// stringKeys turns mappings with non-string keys (such as `1:` or `true:`) into string
// keyed objects, as the Elasticsearch test framework's YAML parser reads every key as a
// string.
func stringKeys(v any) any {
	switch t := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[fmt.Sprint(k)] = stringKeys(x)
		}
		return out
	case map[string]any:
		for k, x := range t {
			t[k] = stringKeys(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = stringKeys(x)
		}
		return t
	}
	return v
}

// timestampsAsStrings keeps plain scalars that look like timestamps as the strings they
// are written as, as the Elasticsearch test framework's YAML parser reads them (yaml.v3
// would turn 2022-01-01T00:00:00.000Z into a time that prints differently).
func timestampsAsStrings(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!timestamp" && n.Style == 0 {
		n.Tag = "!!str"
	}
	for _, c := range n.Content {
		timestampsAsStrings(c)
	}
}

// RunFile runs one file's tests, each after the setup section and followed by teardown.
func (r *Runner) RunFile(path string) ([]Result, error) {
	setup, teardown, tests, err := parseFile(path)
	if err != nil {
		return nil, err
	}
	dir, file := filepath.Base(filepath.Dir(path)), filepath.Base(path)
	var out []Result
	setupSkip := ""
	if setup != nil {
		setupSkip = gateReason(setup.steps)
	}
	for _, t := range tests {
		res := Result{Dir: dir, File: file, Name: t.name}
		if setupSkip != "" {
			res.Status, res.Reason = "skip", setupSkip
			out = append(out, res)
			continue
		}
		if why := gateReason(t.steps); why != "" {
			res.Status, res.Reason = "skip", why
			out = append(out, res)
			continue
		}
		r.wipe()
		x := &exec{r: r, stash: map[string]any{}}
		err := error(nil)
		if setup != nil {
			if err = x.run(setup.steps); err != nil {
				err = fmt.Errorf("setup: %w", err)
			}
		}
		if err == nil {
			err = x.run(t.steps)
		}
		if teardown != nil {
			// A failing teardown fails the test, as in Elasticsearch's runner.
			if terr := x.run(teardown.steps); terr != nil && err == nil {
				err = fmt.Errorf("teardown: %w", terr)
			}
		}
		if err != nil {
			res.Status, res.Reason = "fail", err.Error()
		} else {
			res.Status = "pass"
		}
		out = append(out, res)
	}
	r.wipe()
	return out, nil
}

// wipe deletes every index and resets the cluster settings, as the real runner cleans
// the cluster between tests.
func (r *Runner) wipe() {
	r.call(http.MethodDelete, "/_all", "")
	var settings map[string]map[string]any
	if err := json.Unmarshal(r.call(http.MethodGet, "/_cluster/settings?flat_settings=true", ""), &settings); err != nil {
		return
	}
	reset := map[string]map[string]any{}
	for _, scope := range []string{"persistent", "transient"} {
		for k := range settings[scope] {
			if reset[scope] == nil {
				reset[scope] = map[string]any{}
			}
			reset[scope][k] = nil
		}
	}
	if len(reset) > 0 {
		b, _ := json.Marshal(reset)
		r.call(http.MethodPut, "/_cluster/settings", string(b))
	}
}

// call sends one request and returns its body (nil on failure).
func (r *Runner) call(method, path, body string) []byte {
	req, err := http.NewRequest(method, r.URL+path, strings.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client().Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

func (r *Runner) client() *http.Client {
	if r.Client != nil {
		return r.Client
	}
	return &http.Client{Timeout: 60 * time.Second}
}

// ---- skip / requires ----

// gateReason says why steps do not run here: a skip or requires gate of the suite, an
// X-Pack API, or a 7.x-only request or assertion.
func gateReason(steps []any) string {
	if why := skipReason(steps); why != "" {
		return why
	}
	if why := xpackReason(steps); why != "" {
		return why
	}
	return typesReason(steps)
}

func skipReason(steps []any) string {
	for _, st := range steps {
		m, ok := st.(map[string]any)
		if !ok {
			continue
		}
		for k, v := range m {
			body, _ := v.(map[string]any)
			switch k {
			case "skip":
				if why := skipFor(body); why != "" {
					return why
				}
			case "requires":
				if why := requiresFor(body); why != "" {
					return why
				}
			}
		}
	}
	return ""
}

func strList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

func skipFor(body map[string]any) string {
	reason := fmt.Sprint(body["reason"])
	for _, f := range strList(body["features"]) {
		if !Features[f] {
			return "runner feature [" + f + "] not supported"
		}
	}
	if v, ok := body["version"]; ok {
		for _, rng := range strings.Split(fmt.Sprint(v), ",") {
			if versionIn(strings.TrimSpace(rng)) {
				return "version " + strings.TrimSpace(rng) + ": " + reason
			}
		}
	}
	for _, f := range strList(body["cluster_features"]) {
		if hasClusterFeature(f) {
			return "cluster feature [" + f + "] present: " + reason
		}
	}
	if _, ok := body["awaits_fix"]; ok {
		return "awaits fix: " + fmt.Sprint(body["awaits_fix"])
	}
	// known_issues lists cluster features that bring a bug and the ones that fix it: the
	// test is skipped on a cluster that has a bug's feature but not its fix.
	if issues, ok := body["known_issues"].([]any); ok {
		for _, x := range issues {
			issue, _ := x.(map[string]any)
			has := fmt.Sprint(issue["cluster_feature"])
			fixed := fmt.Sprint(issue["fixed_by"])
			if hasClusterFeature(has) && !hasClusterFeature(fixed) {
				return "known issue [" + has + "] not fixed by [" + fixed + "]: " + reason
			}
		}
	}
	return ""
}

// xpackAPIs are the API namespaces that belong to X-Pack (security and the like), which
// eslite, like the OSS distribution, does not have. Elasticsearch runs the tests that call
// them only in its X-Pack suites, so a test (or its setup) that calls one is skipped.
var xpackAPIs = []string{"security.", "xpack.", "ml.", "license.", "transform.", "rollup."}

func xpackReason(steps []any) string {
	for _, st := range steps {
		m, ok := st.(map[string]any)
		if !ok {
			continue
		}
		do, ok := m["do"].(map[string]any)
		if !ok {
			continue
		}
		for api := range do {
			for _, p := range xpackAPIs {
				if strings.HasPrefix(api, p) {
					return "requires X-Pack API [" + api + "]"
				}
			}
		}
	}
	return ""
}

// typesReason gates the tests of 7.x-era files that ask for mapping types, which
// Elasticsearch 8.0 removed: a `type` or `include_type_name: true` parameter, or an
// assertion that a response has a `_type`. The suite's 7.x branch had no gate for them
// because they held there; Elasticsearch 8 fails them as eslite does, so they are counted
// as skipped, not as failures of eslite.
func typesReason(steps []any) string {
	for _, st := range steps {
		m, ok := st.(map[string]any)
		if !ok {
			continue
		}
		for kind, v := range m {
			switch kind {
			case "do":
				for api, p := range asMap(v) {
					params := asMap(p)
					if params == nil || api == "catch" || api == "headers" {
						continue
					}
					if fmt.Sprint(params["include_type_name"]) == "true" {
						return "7.x only (mapping types, removed in 8.0): include_type_name"
					}
					if _, ok := params["type"]; ok {
						return "7.x only (mapping types, removed in 8.0): [type] parameter of " + api
					}
				}
			case "match", "is_true", "exists":
				paths := []string{fmt.Sprint(v)}
				if mm := asMap(v); mm != nil {
					paths = paths[:0]
					for p := range mm {
						paths = append(paths, p)
					}
				}
				for _, p := range paths {
					if parts := splitPath(p); len(parts) > 0 && parts[len(parts)-1] == "_type" {
						return "7.x only (mapping types, removed in 8.0): _type in responses"
					}
				}
			}
		}
	}
	return ""
}

func requiresFor(body map[string]any) string {
	for _, f := range strList(body["test_runner_features"]) {
		if !Features[f] {
			return "runner feature [" + f + "] not supported"
		}
	}
	for _, f := range strList(body["cluster_features"]) {
		if !hasClusterFeature(f) {
			return "cluster feature [" + f + "] not declared"
		}
	}
	return ""
}

var gteVersion = regexp.MustCompile(`^gte_v(\d+\.\d+\.\d+)$`)

func hasClusterFeature(f string) bool {
	if m := gteVersion.FindStringSubmatch(f); m != nil {
		return compareVersions(m[1], ServerVersion) <= 0
	}
	return ClusterFeatures[f]
}

func versionIn(rng string) bool {
	if rng == "all" {
		return true
	}
	lo, hi, ok := strings.Cut(rng, "-")
	if !ok {
		return compareVersions(strings.TrimSpace(rng), ServerVersion) == 0
	}
	lo, hi = strings.TrimSpace(lo), strings.TrimSpace(hi)
	if lo != "" && compareVersions(ServerVersion, lo) < 0 {
		return false
	}
	if hi != "" && compareVersions(ServerVersion, hi) > 0 {
		return false
	}
	return true
}

func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(strings.TrimFunc(pa[i], func(r rune) bool { return r < '0' || r > '9' }))
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(strings.TrimFunc(pb[i], func(r rune) bool { return r < '0' || r > '9' }))
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// ---- execution ----

type exec struct {
	r      *Runner
	stash  map[string]any
	body   any // the last response body, decoded
	status int
}

func (x *exec) run(steps []any) error {
	for i, st := range steps {
		m, ok := st.(map[string]any)
		if !ok {
			return fmt.Errorf("step %d is not a mapping", i+1)
		}
		for k, v := range m {
			if err := x.step(k, v); err != nil {
				return fmt.Errorf("step %d (%s): %w", i+1, k, err)
			}
		}
	}
	return nil
}

func (x *exec) step(kind string, v any) error {
	switch kind {
	case "skip", "requires":
		return nil
	case "do":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("do is not a mapping")
		}
		return x.do(m)
	case "set":
		for path, name := range asMap(v) {
			val, err := x.lookup(path)
			if err != nil {
				return err
			}
			x.stash[fmt.Sprint(name)] = val
		}
		return nil
	case "transform_and_set":
		for name, expr := range asMap(v) {
			s := fmt.Sprint(expr)
			if !strings.HasPrefix(s, "#base64EncodeCredentials(") {
				return fmt.Errorf("unsupported transform [%s]", s)
			}
			args := strings.Split(strings.TrimSuffix(strings.TrimPrefix(s, "#base64EncodeCredentials("), ")"), ",")
			if len(args) != 2 {
				return fmt.Errorf("malformed transform [%s]", s)
			}
			a, err := x.lookup(strings.TrimSpace(args[0]))
			if err != nil {
				return err
			}
			b, err := x.lookup(strings.TrimSpace(args[1]))
			if err != nil {
				return err
			}
			x.stash[name] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprint(a) + ":" + fmt.Sprint(b)))
		}
		return nil
	case "match", "length", "gt", "gte", "lt", "lte", "contains", "close_to":
		for path, want := range asMap(v) {
			if err := x.assert(kind, path, want); err != nil {
				return err
			}
		}
		return nil
	case "is_true", "is_false", "exists", "not_exists":
		path := fmt.Sprint(v)
		if v == nil {
			path = ""
		}
		got, err := x.lookup(path)
		missing := err != nil
		switch kind {
		case "is_true":
			if missing || isFalsy(got) {
				return fmt.Errorf("[%s] is not true: %s", path, show(got))
			}
		case "is_false":
			if !missing && !isFalsy(got) {
				return fmt.Errorf("[%s] is not false: %s", path, show(got))
			}
		case "exists":
			if missing || got == nil {
				return fmt.Errorf("[%s] does not exist", path)
			}
		case "not_exists":
			if !missing && got != nil {
				return fmt.Errorf("[%s] exists: %s", path, show(got))
			}
		}
		return nil
	}
	return fmt.Errorf("unknown step [%s]", kind)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// isFalsy is the test of Elasticsearch's is_false (and the negation of is_true): the
// value is missing or null, or its Java string form is "", "0" or "false" in any case.
// So 0.0 and an empty object or list are true, as there.
func isFalsy(v any) bool {
	if v == nil {
		return true
	}
	s := fmt.Sprint(plain(v))
	return s == "" || s == "0" || strings.EqualFold(s, "false")
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// ---- stash ----

var embedded = regexp.MustCompile(`\$\{([^}]+)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// resolve replaces stash references in a value taken from the test file.
func (x *exec) resolve(v any) any {
	switch t := v.(type) {
	case string:
		if strings.HasPrefix(t, "$") && !strings.HasPrefix(t, "${") {
			if val, ok := x.stash[t[1:]]; ok {
				return val
			}
			if t == "$body" {
				return x.body
			}
		}
		if strings.Contains(t, "$") {
			return embedded.ReplaceAllStringFunc(t, func(s string) string {
				name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "$"), "{"), "}")
				if val, ok := x.stash[name]; ok {
					return fmt.Sprint(val)
				}
				return s
			})
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[fmt.Sprint(x.resolve(k))] = x.resolve(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = x.resolve(val)
		}
		return out
	}
	return v
}

// splitPath splits a dotted response path as the Elasticsearch test framework's
// ObjectPath does: a backslash is dropped and makes the next dot part of the key (so
// `50\.0` and `50\\.0` both name the key "50.0"), and empty keys are skipped.
func splitPath(p string) []string {
	var out []string
	var cur strings.Builder
	escape := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' {
			escape = true
			continue
		}
		if c == '.' {
			if escape {
				escape = false
			} else {
				if cur.Len() > 0 {
					out = append(out, cur.String())
					cur.Reset()
				}
				continue
			}
		}
		cur.WriteByte(c)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

var errMissing = fmt.Errorf("missing")

func (x *exec) lookup(path string) (any, error) {
	if path == "" || path == "$body" {
		return x.body, nil
	}
	cur := x.body
	for _, part := range splitPath(path) {
		if strings.HasPrefix(part, "$") {
			if val, ok := x.stash[part[1:]]; ok {
				part = fmt.Sprint(val)
			}
		}
		switch t := cur.(type) {
		case map[string]any:
			v, ok := t[part]
			if !ok {
				return nil, errMissing
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(t) {
				return nil, errMissing
			}
			cur = t[i]
		default:
			return nil, errMissing
		}
	}
	return cur, nil
}

// ---- assertions ----

func (x *exec) assert(kind, path string, want any) error {
	path = fmt.Sprint(x.resolve(path))
	want = x.resolve(want)
	got, err := x.lookup(path)
	if err != nil && kind != "match" {
		return fmt.Errorf("[%s] is missing", path)
	}
	switch kind {
	case "match":
		if err != nil {
			if want == nil {
				return nil
			}
			return fmt.Errorf("[%s] is missing, want %s", path, show(want))
		}
		if s, ok := want.(string); ok && isRegexp(s) {
			re, rerr := javaRegexp(strings.TrimSpace(s))
			if rerr != nil {
				return rerr
			}
			str, isStr := got.(string)
			if !isStr {
				return fmt.Errorf("[%s] = %s is not a string to match %s", path, show(got), s)
			}
			if !re.MatchString(str) {
				return fmt.Errorf("[%s] = %s does not match %s", path, show(got), s)
			}
			return nil
		}
		if !equal(got, want) {
			return fmt.Errorf("[%s] = %s, want %s", path, show(got), show(want))
		}
	case "length":
		n, ok := toFloat(want)
		if !ok {
			return fmt.Errorf("length wants a number, got %v", want)
		}
		l := -1
		switch t := got.(type) {
		case map[string]any:
			l = len(t)
		case []any:
			l = len(t)
		case string:
			l = len([]rune(t))
		}
		if float64(l) != n {
			return fmt.Errorf("length of [%s] = %d, want %v (%s)", path, l, want, show(got))
		}
	case "gt", "gte", "lt", "lte":
		// Numbers compare by value, strings by their characters; anything else, or a
		// number with a string, fails, as Java's Comparable does there.
		var c int
		gs, gStr := got.(string)
		ws, wStr := want.(string)
		switch {
		case isNumber(got) && isNumber(want):
			g, _ := toFloat(got)
			w, _ := toFloat(want)
			c = cmpFloat(g, w)
		case gStr && wStr:
			c = strings.Compare(gs, ws)
		default:
			return fmt.Errorf("[%s] = %s is not comparable with %s", path, show(got), show(want))
		}
		ok := map[string]bool{"gt": c > 0, "gte": c >= 0, "lt": c < 0, "lte": c <= 0}[kind]
		if !ok {
			return fmt.Errorf("[%s] = %s is not %s %s", path, show(got), kind, show(want))
		}
	case "contains":
		list, ok := got.([]any)
		if !ok {
			return fmt.Errorf("[%s] is not a list: %s", path, show(got))
		}
		for _, e := range list {
			if containsValue(e, want) {
				return nil
			}
		}
		return fmt.Errorf("[%s] = %s does not contain %s", path, show(got), show(want))
	case "close_to":
		o := asMap(want)
		v, _ := toFloat(o["value"])
		e, _ := toFloat(o["error"])
		g, _ := toFloat(got)
		if !isNumber(got) || math.Abs(g-v) > e {
			return fmt.Errorf("[%s] = %s is not within %v of %v", path, show(got), e, v)
		}
	}
	return nil
}

// containsValue reports whether got holds want: equal scalars, or a map with at least
// want's keys and values.
func containsValue(got, want any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return equal(got, want)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !equal(gm[k], v) {
			return false
		}
	}
	return true
}

func plain(v any) any {
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	return v
}

// isRegexp reports whether an expected value is a /regex/, as MatchAssertion decides.
func isRegexp(s string) bool {
	s = strings.TrimSpace(s)
	return len(s) > 2 && strings.HasPrefix(s, "/") && strings.HasSuffix(s, "/")
}

// javaRegexp compiles a /.../ pattern the way the suite means it: Java's COMMENTS mode,
// where unescaped whitespace and #-comments are ignored.
func javaRegexp(s string) (*regexp.Regexp, error) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "/"), "/")
	var b strings.Builder
	inClass := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			b.WriteByte(c)
			b.WriteByte(s[i+1])
			i++
		case c == '[':
			inClass = true
			b.WriteByte(c)
		case c == ']':
			inClass = false
			b.WriteByte(c)
		case !inClass && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
		case !inClass && c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return regexp.Compile("(?s)" + b.String())
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case uint64:
		return float64(t), true
	case float64:
		return t, true
	case string:
		f, err := strconv.ParseFloat(t, 64)
		return f, err == nil
	}
	return 0, false
}

func isNumber(v any) bool {
	switch v.(type) {
	case json.Number, int, int64, uint64, float64:
		return true
	}
	return false
}

// equal compares a response value with an expected one as MatchAssertion does: numbers
// by value (an integer response equals 1.0), everything else by type and value, maps and
// lists deeply. A string never equals a number or a boolean: the suite quotes the values
// Elasticsearch answers as strings (settings).
func equal(got, want any) bool {
	if isNumber(got) && isNumber(want) {
		gs, ws := numString(got), numString(want)
		if gs == ws {
			return true
		}
		g, _ := toFloat(got)
		w, _ := toFloat(want)
		return g == w
	}
	switch w := want.(type) {
	case nil:
		return got == nil
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, v := range w {
			gv, ok := g[k]
			if !ok || !equal(gv, v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !equal(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// numString renders an integral number without a fraction, so 72057594037927936 from
// JSON and from YAML compare exactly.
func numString(v any) string {
	switch t := v.(type) {
	case json.Number:
		s := t.String()
		if f, err := t.Float64(); err == nil && !strings.ContainsAny(s, ".eE") {
			_ = f
			return s
		}
		if f, err := t.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return strconv.FormatInt(int64(f), 10)
		}
		return s
	case int:
		return strconv.Itoa(t)
	case int64:
		return strconv.FormatInt(t, 10)
	case uint64:
		return strconv.FormatUint(t, 10)
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return strconv.FormatInt(int64(t), 10)
		}
		return strconv.FormatFloat(t, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
