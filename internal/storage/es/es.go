// Package es is the Elasticsearch sink: every item is a document analysts can search.
//
// Each task gets its own index, `trawler-<site>-<task>` (the biz with dots turned into
// dashes, lowercased), and every such index carries the alias `trawler-items`, so one
// search covers everything crawled. Each tenant the sink writes gets two aliases with a
// filter on the document's tenant field: trawler.<tenant> over every index holding its
// documents and trawler.<tenant>.<site>-<task> over one (TenantAlias, TenantIndexAlias),
// so Elasticsearch index privileges on trawler.<tenant> and trawler.<tenant>.* keep an
// analyst to one tenant's documents. The document id is DocID(tenant, key), unique per tenant and key
// whatever the key holds, so storing an item again (a retried batch, a later run) replaces the earlier version: the latest
// wins. Documents are per tenant, like dedup and history: two tenants crawling the same
// task keep two documents.
//
// Documents are the crawl.Item JSON as is: the item fields id, biz, key, url, ts, hash,
// flag, chain, run_id and tenant at the top level, and the task's own fields under
// `data` (data.title, data.points, ...), mapped from the task's declared output schema:
//
//	crawl.String -> text with a `keyword` sub-field (data.title and data.title.keyword)
//	crawl.URL, crawl.List -> keyword
//	crawl.Int -> long, crawl.Float -> double, crawl.Time -> date, crawl.Bool -> boolean
//	crawl.Object -> object (its sub-fields mapped dynamically)
//
// and the item fields id, biz, key, url, hash, chain, run_id, tenant as keyword, ts as
// date and flag as integer. Fields a task emits without declaring them are mapped
// dynamically by Elasticsearch. A config-driven step's biz maps the fields its chain file
// declares (Declare). When no spec is known for a biz (no Specs option, or an
// unregistered task), the mapping is inferred from the first items' values.
//
// Write sends one bulk request per call, retries the whole request on transport errors,
// 429 and 5xx with exponential backoff, retries only the documents that failed with 429
// or 5xx, and reports the remaining per-document failures in a *BulkError naming every
// failing key and its reason.
package es

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
)

// Alias names every Trawler index.
const Alias = "trawler-items"

// Options configure a Sink.
type Options struct {
	// Addresses are the Elasticsearch URLs, such as http://127.0.0.1:9200.
	Addresses []string
	Auth
	// Specs returns the task spec of a biz ("site.task") so its index gets a mapping from
	// the declared output schema; the worker passes its registry here.
	Specs func(biz string) (crawl.TaskSpec, bool)
	// Retries is how many times a failing bulk request (or document) is retried on 429,
	// 5xx and transport errors (default 5); Backoff is the first wait (default 200ms),
	// doubled every retry up to 10s.
	Retries int
	Backoff time.Duration
	// Transport replaces the HTTP transport (tests, proxies).
	Transport http.RoundTripper
}

// Auth authenticates to a cluster that needs it: basic auth (Username/Password; a
// user:password@ in the address works too) or an API key (APIKey, the base64 "id:key"
// Elasticsearch hands out, sent as "Authorization: ApiKey …"), and CACert (PEM) to
// trust a cluster whose certificate a private CA signed.
type Auth struct {
	Username, Password, APIKey string
	CACert                     []byte
}

// SpecsFrom adapts a task registry to Options.Specs.
func SpecsFrom(r *crawl.Registry) func(biz string) (crawl.TaskSpec, bool) {
	return func(biz string) (crawl.TaskSpec, bool) {
		t, ok := r.Get(biz)
		if !ok {
			return crawl.TaskSpec{}, false
		}
		return t.Spec(), true
	}
}

// Sink writes items to Elasticsearch.
type Sink struct {
	c    *Client
	opts Options

	mu       sync.Mutex
	ready    map[string]bool          // indexes known to exist
	aliased  map[tenantIndex]bool     // tenant aliases known to exist
	declared map[string][]crawl.Field // schemas of bizes no registered task declares
}

// Declare implements storage.Schemas: the index of biz, when this sink creates it, maps
// these fields; a field of no declared type gets the type its first values show.
func (s *Sink) Declare(biz string, fields []crawl.Field) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.declared == nil {
		s.declared = map[string][]crawl.Field{}
	}
	s.declared[biz] = fields
}

// specOf is the spec a biz's index is created with: declared, else the registered
// task's, else inferred from the items.
func (s *Sink) specOf(biz string, items []crawl.Item) crawl.TaskSpec {
	s.mu.Lock()
	fields, declared := s.declared[biz]
	s.mu.Unlock()
	if declared {
		inferred := InferSpec(biz, items)
		spec := crawl.TaskSpec{Name: biz}
		for _, f := range fields {
			if g, ok := inferred.Field(f.Name); ok && f.Type == "" {
				f.Type = g.Type
			}
			spec.Output = append(spec.Output, f)
		}
		return spec
	}
	if s.opts.Specs != nil {
		if spec, ok := s.opts.Specs(biz); ok {
			spec.Name = biz
			return spec
		}
	}
	return InferSpec(biz, items)
}

// Open returns a sink talking to the given cluster; it checks that the cluster answers.
func Open(ctx context.Context, o Options) (*Sink, error) {
	if len(o.Addresses) == 0 {
		return nil, errors.New("es sink: no Elasticsearch address")
	}
	if o.Retries <= 0 {
		o.Retries = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	c, err := o.Auth.NewClient(o.Addresses, o.Transport)
	if err != nil {
		return nil, fmt.Errorf("es sink: %s", crawl.RedactText(err.Error()))
	}
	s := &Sink{c: c, opts: o, ready: map[string]bool{}, aliased: map[tenantIndex]bool{}}
	shown := crawl.RedactText(strings.Join(o.Addresses, ","))
	res, err := c.Info(c.Info.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("es sink: cannot reach Elasticsearch at %s: %s", shown, crawl.RedactText(err.Error()))
	}
	defer res.Body.Close()
	if res.IsError() {
		if res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
			return nil, fmt.Errorf("es sink: Elasticsearch at %s answered %s: check the credentials (--es-user with --es-password-file, --es-api-key-file, or user:password@ in --es)", shown, res.Status())
		}
		return nil, fmt.Errorf("es sink: Elasticsearch at %s answered %s", shown, res.Status())
	}
	return s, nil
}

// Client is the sink's Elasticsearch client.
func (s *Sink) Client() *Client { return s.c }

// Name implements storage.Sink.
func (s *Sink) Name() string { return "es" }

// Close implements storage.Sink.
func (s *Sink) Close() error { return nil }

// IndexName is the index holding the items of a biz: "hackernews.item" -> "trawler-hackernews-item".
func IndexName(biz string) string {
	b := strings.ToLower(biz)
	b = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		}
		return '-'
	}, b)
	return "trawler-" + b
}

// TenantAlias is the alias showing one tenant's documents of every Trawler index:
// "trawler.<tenant>", "trawler.default" for the default tenant. IndexName never makes a
// dot and a tenant holds none (crawl.IsTenantName), so no index and no other tenant's
// alias has this name, and the pattern trawler.<tenant>.* names this tenant's aliases
// alone.
func TenantAlias(tenant string) string {
	if crawl.IsDefaultTenant(tenant) {
		tenant = crawl.DefaultTenant
	}
	return "trawler." + tenant
}

// TenantIndexAlias is the alias showing one tenant's documents of a biz's index:
// "trawler.<tenant>.<site>-<task>".
func TenantIndexAlias(tenant, biz string) string {
	return TenantAlias(tenant) + "." + strings.TrimPrefix(IndexName(biz), "trawler-")
}

// tenantFilter is the alias filter keeping tenant's documents. The default tenant's
// documents carry "default" or "" (items of code naming no tenant), or no tenant field
// at all when they were indexed before items had one.
func tenantFilter(tenant string) map[string]any {
	if !crawl.IsDefaultTenant(tenant) {
		return map[string]any{"term": map[string]any{"tenant": tenant}}
	}
	return map[string]any{"bool": map[string]any{"should": []any{
		map[string]any{"terms": map[string]any{"tenant": []string{crawl.DefaultTenant, ""}}},
		map[string]any{"bool": map[string]any{"must_not": []any{map[string]any{"exists": map[string]any{"field": "tenant"}}}}},
	}}}
}

// tenantIndex is one tenant's aliases on one biz's index; the default tenant is
// "default" here, whichever way its items name it.
type tenantIndex struct{ tenant, biz string }

// ensureTenantAliases adds the aliases of the tenants and bizes of items that this
// process has not added yet, in one request. Adding an alias that exists replaces it
// with the same definition, so running this again, from this or another process,
// changes nothing; an index written before the aliases existed gets them on its next
// write, and they cover the documents already in it. Items Write refuses (no key, a
// tenant that cannot name an alias) are left out.
func (s *Sink) ensureTenantAliases(ctx context.Context, items []crawl.Item) error {
	var todo []tenantIndex
	seen := map[tenantIndex]bool{}
	s.mu.Lock()
	for _, it := range items {
		k := tenantIndex{it.Tenant, it.Biz}
		if crawl.IsDefaultTenant(k.tenant) {
			k.tenant = crawl.DefaultTenant
		}
		if it.Key == "" || !crawl.IsTenantName(k.tenant) || seen[k] || s.aliased[k] {
			continue
		}
		seen[k] = true
		todo = append(todo, k)
	}
	s.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	var actions []any
	for _, k := range todo {
		index, filter := IndexName(k.biz), tenantFilter(k.tenant)
		for _, alias := range []string{TenantAlias(k.tenant), TenantIndexAlias(k.tenant, k.biz)} {
			actions = append(actions, map[string]any{"add": map[string]any{"index": index, "alias": alias, "filter": filter}})
		}
	}
	body, _ := json.Marshal(map[string]any{"actions": actions})
	res, err := s.c.Indices.UpdateAliases(bytes.NewReader(body), s.c.Indices.UpdateAliases.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("es sink: add tenant aliases: %w", err)
	}
	defer res.Body.Close()
	if res.IsError() {
		e := readError(res)
		if res.StatusCode == http.StatusForbidden {
			return fmt.Errorf("es sink: add tenant aliases (%s): %s: the sink's Elasticsearch user needs the manage privilege on trawler-* and trawler.*", TenantAlias(todo[0].tenant), e)
		}
		return fmt.Errorf("es sink: add tenant aliases (%s): %s", TenantAlias(todo[0].tenant), e)
	}
	s.mu.Lock()
	for _, k := range todo {
		s.aliased[k] = true
	}
	s.mu.Unlock()
	return nil
}

// maxIndexName is Elasticsearch's limit on an index name, in bytes.
const maxIndexName = 255

// CheckSearchable accepts the names of what Trawler writes: the alias trawler-items,
// trawler- followed by what IndexName derives from a biz (lowercase letters, digits,
// - and _), and a tenant's aliases, trawler.<tenant> and trawler.<tenant>.<site>-<task>.
// Anything else is refused, so a name given by a caller (the console's index
// parameter) cannot carry a path ("x/_doc/1#"), a pattern or another cluster's index
// into a request. Such names also meet Elasticsearch's own rules: lowercase, none of
// / \ * ? " < > | # , : or space, not . or .., not starting with _ - or +, and at most
// 255 bytes.
func CheckSearchable(index string) error {
	if index == Alias {
		return nil
	}
	// part is what IndexName puts after "trawler-".
	part := func(s string) bool {
		return s != "" && strings.IndexFunc(s, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_'
		}) < 0
	}
	valid := false
	if rest, ok := strings.CutPrefix(index, "trawler-"); ok {
		valid = part(rest)
	} else if rest, ok := strings.CutPrefix(index, "trawler."); ok {
		tenant, task, perTask := strings.Cut(rest, ".")
		valid = crawl.IsTenantName(tenant) && (!perTask || part(task))
	}
	if !valid {
		return fmt.Errorf("index %q: not an index Trawler writes; use %s, trawler-<site>-<task>, trawler.<tenant> or trawler.<tenant>.<site>-<task> (lowercase letters, digits, - and _)", index, Alias)
	}
	if len(index) > maxIndexName {
		return fmt.Errorf("index %q: %d bytes, longer than the %d Elasticsearch allows", index, len(index), maxIndexName)
	}
	return nil
}

// ForTenant is the name that searches tenant's documents of index (a name
// CheckSearchable accepts): trawler-items becomes TenantAlias(tenant), a task's index
// trawler-<site>-<task> becomes trawler.<tenant>.<site>-<task>, and a tenant's own
// alias stays as it is. Another tenant's alias, or a tenant that cannot name an alias,
// is an error.
func ForTenant(tenant, index string) (string, error) {
	if !crawl.IsDefaultTenant(tenant) && !crawl.IsTenantName(tenant) {
		return "", fmt.Errorf("tenant %q: use lowercase letters, digits, - and _, starting with a letter or digit", tenant)
	}
	if err := CheckSearchable(index); err != nil {
		return "", err
	}
	own := TenantAlias(tenant)
	switch {
	case index == Alias:
		return own, nil
	case strings.HasPrefix(index, "trawler-"):
		return own + "." + strings.TrimPrefix(index, "trawler-"), nil
	case index == own || strings.HasPrefix(index, own+"."):
		return index, nil
	}
	return "", fmt.Errorf("index %q is another tenant's alias, not tenant %s's: use %s, or %s.<site>-<task> for one task", index, strings.TrimPrefix(own, "trawler."), own, own)
}

// DocID is the document id of tenant's item key: storage.TenantKey (the bare key for the
// default tenant ("" or "default") bar keys starting with "@", "@" + tenant + ":" + key
// for another), or, when that id is longer than the 512 bytes Elasticsearch allows,
// "@sha256-" and the hex SHA-256 of it. TenantKey makes no id that starts with "@"
// without a ":" after the tenant, so no key of any tenant is the digest of another's long
// key. The default tenant keeps the bare key because the documents indexed before the
// index was per tenant all belong to it: re-indexing its items replaces them instead of
// adding a second copy.
func DocID(tenant, key string) string {
	id := storage.TenantKey(tenant, key)
	if len(id) <= 512 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "@sha256-" + hex.EncodeToString(sum[:])
}

func itemProperties() map[string]any {
	kw := map[string]any{"type": "keyword"}
	return map[string]any{
		"id": kw, "biz": kw, "key": kw, "url": kw, "hash": kw, "chain": kw, "run_id": kw, "tenant": kw,
		"ts":   map[string]any{"type": "date"},
		"flag": map[string]any{"type": "integer"},
	}
}

func fieldMapping(t crawl.Type) map[string]any {
	switch t {
	case crawl.String:
		return map[string]any{"type": "text", "fields": map[string]any{"keyword": map[string]any{"type": "keyword", "ignore_above": 1024}}}
	case crawl.URL, crawl.List:
		return map[string]any{"type": "keyword"}
	case crawl.Int:
		return map[string]any{"type": "long"}
	case crawl.Float:
		return map[string]any{"type": "double"}
	case crawl.Time:
		return map[string]any{"type": "date"}
	case crawl.Bool:
		return map[string]any{"type": "boolean"}
	case crawl.Object:
		return map[string]any{"type": "object"}
	}
	return nil
}

// Mappings is the index mapping for a task's items.
func Mappings(spec crawl.TaskSpec) map[string]any {
	data := map[string]any{}
	for _, f := range spec.Output {
		if m := fieldMapping(f.Type); m != nil {
			data[f.Name] = m
		}
	}
	return mappingsWith(data)
}

func mappingsWith(data map[string]any) map[string]any {
	props := itemProperties()
	props["data"] = map[string]any{"type": "object", "properties": data}
	return map[string]any{"properties": props}
}

// inferType guesses a field type from a value (when no spec is known).
func inferType(v any) (crawl.Type, bool) {
	switch t := v.(type) {
	case nil:
		return "", false
	case string:
		if strings.HasPrefix(t, "http://") || strings.HasPrefix(t, "https://") {
			return crawl.URL, true
		}
		if _, err := time.Parse(time.RFC3339Nano, t); err == nil {
			return crawl.Time, true
		}
		return crawl.String, true
	case time.Time, *time.Time:
		return crawl.Time, true
	case bool:
		return crawl.Bool, true
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return crawl.Int, true
	case float32, float64:
		return crawl.Float, true
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return crawl.Int, true
		}
		return crawl.Float, true
	case []string, []any:
		return crawl.List, true
	case map[string]any:
		return crawl.Object, true
	}
	return "", false
}

// InferSpec derives a spec for a biz from the data of its items.
func InferSpec(biz string, items []crawl.Item) crawl.TaskSpec {
	spec := crawl.TaskSpec{Name: biz}
	seen := map[string]bool{}
	for _, it := range items {
		if it.Biz != biz {
			continue
		}
		names := make([]string, 0, len(it.Data))
		for n := range it.Data {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if seen[n] {
				continue
			}
			if t, ok := inferType(it.Data[n]); ok {
				seen[n] = true
				spec.Output = append(spec.Output, crawl.Field{Name: n, Type: t})
			}
		}
	}
	return spec
}

// EnsureIndex creates the index of a task (with its mapping and the trawler-items alias)
// when it does not exist yet.
func (s *Sink) EnsureIndex(ctx context.Context, spec crawl.TaskSpec) error {
	name := IndexName(spec.Name)
	s.mu.Lock()
	ok := s.ready[name]
	s.mu.Unlock()
	if ok {
		return nil
	}
	res, err := s.c.Indices.Exists([]string{name}, s.c.Indices.Exists.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("es sink: check index %s: %w", name, err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		body, _ := json.Marshal(map[string]any{
			"mappings": Mappings(spec),
			"aliases":  map[string]any{Alias: map[string]any{}},
		})
		res, err := s.c.Indices.Create(name, s.c.Indices.Create.WithBody(bytes.NewReader(body)), s.c.Indices.Create.WithContext(ctx))
		if err != nil {
			return fmt.Errorf("es sink: create index %s: %w", name, err)
		}
		defer res.Body.Close()
		if res.IsError() {
			e := readError(res)
			if e.Type != "resource_already_exists_exception" {
				return fmt.Errorf("es sink: create index %s: %s", name, e)
			}
		}
	} else if res.IsError() {
		return fmt.Errorf("es sink: check index %s: %s", name, res.Status())
	}
	s.mu.Lock()
	s.ready[name] = true
	s.mu.Unlock()
	return nil
}

// esErr is the error part of an Elasticsearch answer.
type esErr struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

func (e esErr) String() string {
	if e.Type == "" {
		return e.Reason
	}
	return e.Type + ": " + e.Reason
}

func readError(res *esapi.Response) esErr {
	b, _ := io.ReadAll(res.Body)
	var body struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(b, &body)
	var e esErr
	if err := json.Unmarshal(body.Error, &e); err != nil || e.Type == "" {
		e = esErr{Type: res.Status(), Reason: strings.TrimSpace(string(b))}
	}
	return e
}

// DocFailure is one document Elasticsearch refused.
type DocFailure struct {
	Key    string
	Index  string
	Status int
	Type   string
	Reason string
}

// BulkError lists the documents of a Write that were not stored.
type BulkError struct {
	Total    int
	Failures []DocFailure
}

func (e *BulkError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "es sink: %d of %d documents rejected:", len(e.Failures), e.Total)
	for i, f := range e.Failures {
		if i == 20 {
			fmt.Fprintf(&b, " ... and %d more", len(e.Failures)-20)
			break
		}
		fmt.Fprintf(&b, " %s (%s, %d %s: %s);", f.Key, f.Index, f.Status, f.Type, f.Reason)
	}
	return strings.TrimSuffix(b.String(), ";")
}

func retryable(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

func (s *Sink) sleep(ctx context.Context, attempt int) error {
	d := s.opts.Backoff << attempt
	if d > 10*time.Second || d <= 0 {
		d = 10 * time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type pendingDoc struct {
	key   string
	index string
	line  []byte // action + source, newline terminated
}

// Write implements storage.Sink.
func (s *Sink) Write(ctx context.Context, items []crawl.Item) error {
	if len(items) == 0 {
		return nil
	}
	byBiz := map[string]bool{}
	for _, it := range items {
		byBiz[it.Biz] = true
	}
	bizs := make([]string, 0, len(byBiz))
	for b := range byBiz {
		bizs = append(bizs, b)
	}
	sort.Strings(bizs)
	for _, biz := range bizs {
		if err := s.EnsureIndex(ctx, s.specOf(biz, items)); err != nil {
			return err
		}
	}
	if err := s.ensureTenantAliases(ctx, items); err != nil {
		return err
	}
	var failures []DocFailure
	docs := make([]pendingDoc, 0, len(items))
	for _, it := range items {
		if it.Key == "" {
			failures = append(failures, DocFailure{Key: "(empty)", Index: IndexName(it.Biz), Status: 400, Type: "invalid_item", Reason: "item has no key"})
			continue
		}
		if !crawl.IsDefaultTenant(it.Tenant) && !crawl.IsTenantName(it.Tenant) {
			// No alias can show its documents to its tenant's analysts.
			failures = append(failures, DocFailure{Key: it.Key, Index: IndexName(it.Biz), Status: 400, Type: "invalid_tenant",
				Reason: fmt.Sprintf("tenant %q: use lowercase letters, digits, - and _, starting with a letter or digit, as a chain file's tenant", it.Tenant)})
			continue
		}
		src, err := json.Marshal(it)
		if err != nil {
			failures = append(failures, DocFailure{Key: it.Key, Index: IndexName(it.Biz), Status: 400, Type: "encode", Reason: err.Error()})
			continue
		}
		action, _ := json.Marshal(map[string]any{"index": map[string]any{"_index": IndexName(it.Biz), "_id": DocID(it.Tenant, it.Key)}})
		line := make([]byte, 0, len(action)+len(src)+2)
		line = append(append(append(append(line, action...), '\n'), src...), '\n')
		docs = append(docs, pendingDoc{key: it.Key, index: IndexName(it.Biz), line: line})
	}
	for attempt := 0; len(docs) > 0; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		retry, failed, err := s.bulk(ctx, docs)
		if err != nil {
			if attempt >= s.opts.Retries {
				return err
			}
			if err := s.sleep(ctx, attempt); err != nil {
				return err
			}
			continue
		}
		failures = append(failures, failed...)
		docs = retry
		if len(docs) > 0 {
			if attempt >= s.opts.Retries {
				for _, d := range docs {
					failures = append(failures, DocFailure{Key: d.key, Index: d.index, Status: 429, Type: "retries_exhausted", Reason: fmt.Sprintf("still rejected after %d retries", s.opts.Retries)})
				}
				break
			}
			if err := s.sleep(ctx, attempt); err != nil {
				return err
			}
		}
	}
	if len(failures) > 0 {
		return &BulkError{Total: len(items), Failures: failures}
	}
	return nil
}

// bulk sends docs once. It returns the docs to retry (429/5xx per item), the permanent
// failures, or an error when the whole request should be retried.
func (s *Sink) bulk(ctx context.Context, docs []pendingDoc) ([]pendingDoc, []DocFailure, error) {
	var body bytes.Buffer
	for _, d := range docs {
		body.Write(d.line)
	}
	res, err := s.c.Bulk(bytes.NewReader(body.Bytes()), s.c.Bulk.WithContext(ctx))
	if err != nil {
		return nil, nil, fmt.Errorf("es sink: bulk: %w", err)
	}
	defer res.Body.Close()
	if res.IsError() {
		e := readError(res)
		if retryable(res.StatusCode) {
			return nil, nil, fmt.Errorf("es sink: bulk: %d %s", res.StatusCode, e)
		}
		return nil, nil, fmt.Errorf("es sink: bulk rejected: %d %s", res.StatusCode, e)
	}
	var out struct {
		Errors bool `json:"errors"`
		Items  []map[string]struct {
			Index  string `json:"_index"`
			ID     string `json:"_id"`
			Status int    `json:"status"`
			Error  *esErr `json:"error"`
		} `json:"items"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return nil, nil, fmt.Errorf("es sink: bulk: decode answer: %w", err)
	}
	if !out.Errors {
		return nil, nil, nil
	}
	if len(out.Items) != len(docs) {
		return nil, nil, fmt.Errorf("es sink: bulk: %d answers for %d documents", len(out.Items), len(docs))
	}
	var retry []pendingDoc
	var failed []DocFailure
	for i, item := range out.Items {
		for _, r := range item {
			if r.Error == nil && r.Status < 300 {
				continue
			}
			if retryable(r.Status) {
				retry = append(retry, docs[i])
				continue
			}
			f := DocFailure{Key: docs[i].key, Index: docs[i].index, Status: r.Status}
			if r.Error != nil {
				f.Type, f.Reason = r.Error.Type, r.Error.Reason
			}
			failed = append(failed, f)
		}
	}
	return retry, failed, nil
}

// Count implements storage.Sink: the documents of a run across every Trawler index.
func (s *Sink) Count(ctx context.Context, runID string) (int, error) {
	res, err := s.c.Indices.Refresh(s.c.Indices.Refresh.WithIndex(Alias), s.c.Indices.Refresh.WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("es sink: refresh: %w", err)
	}
	res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	q, _ := json.Marshal(map[string]any{"query": map[string]any{"term": map[string]any{"run_id": runID}}})
	res, err = s.c.Count(s.c.Count.WithIndex(Alias), s.c.Count.WithBody(bytes.NewReader(q)), s.c.Count.WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("es sink: count: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return 0, nil
	}
	if res.IsError() {
		return 0, fmt.Errorf("es sink: count: %s", readError(res))
	}
	var out struct {
		Count int `json:"count"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("es sink: count: %w", err)
	}
	return out.Count, nil
}

// IndexPath is index (a name, alias or pattern, or several separated by commas) as
// esapi's WithIndex takes it: each name escaped as one path segment. esapi writes index
// names into the request path as they are, so "x/_doc/1#" would address a document and
// cut the rest of the path off.
func IndexPath(index string) []string {
	names := strings.Split(index, ",")
	for i, n := range names {
		names[i] = url.PathEscape(n)
	}
	return names
}
