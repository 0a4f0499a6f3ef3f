package eslite

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/single"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Stored and internal field names in the bleve documents.
const (
	fSource     = "_source"
	fVersion    = "_version"
	fFieldNames = "_field_names"
	fSeqNo      = "_seq_no"
	fRouting    = "_routing"
	fIgnored    = "_ignored"
	// fIgnoredTerms indexes the names of a document's ignored fields, for term and terms
	// queries on _ignored.
	fIgnoredTerms = "\x00ignored_terms"
	// fIndexName holds the index's name, for queries on _index.
	fIndexName = "\x00index"
)

var (
	textAnalyzer    = &analysis.DefaultAnalyzer{Tokenizer: unicode.NewUnicodeTokenizer(), TokenFilters: []analysis.TokenFilter{lowercase.NewLowerCaseFilter()}}
	keywordAnalyzer = &analysis.DefaultAnalyzer{Tokenizer: single.NewSingleTokenTokenizer()}
)

// analyze splits text like the text fields are indexed.
func analyze(s string) []string {
	var out []string
	for _, t := range textAnalyzer.Analyze([]byte(s)) {
		out = append(out, string(t.Term))
	}
	return out
}

type indexMeta struct {
	Name     string                    `json:"name"`
	Settings map[string]any            `json:"settings"`
	Mappings map[string]any            `json:"mappings"`
	Aliases  map[string]map[string]any `json:"aliases"`
	Created  time.Time                 `json:"created"`
	SeqNo    int64                     `json:"seq_no"`
	Closed   bool                      `json:"closed,omitempty"`
	// IndexTotal and NoopUpdates feed _stats' indexing section.
	IndexTotal  int64 `json:"index_total,omitempty"`
	NoopUpdates int64 `json:"noop_update_total,omitempty"`
}

// fieldInfo is one searchable field: its type and where its value is in _source.
type fieldInfo struct {
	Type        string // text, keyword, long, double, date, boolean; "none" for stored-only types
	Src         string
	ESType      string // the mapping's own type name (ip, geo_point, integer, ...)
	IgnoreAbove int    // keyword values longer than this are kept in _source only
	Store       bool   // "store": true, so stored_fields returns it
	Malformed   bool   // ignore_malformed: values that do not parse are kept in _source only
	DateFormat  string // a date field's format, when the mapping sets one
	Fielddata   bool   // a text field with fielddata: true aggregates its tokens
}

type esIndex struct {
	name string
	dir  string
	bi   bleve.Index

	mu     sync.RWMutex // guards meta and fields
	wmu    sync.Mutex   // serialises writes
	meta   *indexMeta
	fields map[string]fieldInfo
	// refreshed is the last sequence number a refresh made visible (refresh.go).
	refreshed int64

	// gen counts writes, so cached BM25 statistics know when they are stale.
	gen     atomic.Uint64
	statsMu sync.Mutex
	bm25    *indexStats
}

func createIndexOnDisk(dir string, meta *indexMeta) (*esIndex, error) {
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	im := mapping.NewIndexMapping()
	im.DefaultMapping = mapping.NewDocumentDisabledMapping()
	im.ScoringModel = bindex.BM25Scoring
	bi, err := bleve.New(filepath.Join(dir, "bleve"), im)
	if err != nil {
		return nil, fmt.Errorf("eslite: create index %s: %w", meta.Name, err)
	}
	bi.SetName(meta.Name)
	ix := &esIndex{name: meta.Name, dir: dir, bi: bi, meta: meta, refreshed: meta.SeqNo - 1}
	ix.fields = flattenMappings(meta.Mappings)
	if err := ix.saveMeta(); err != nil {
		_ = bi.Close()
		return nil, err
	}
	return ix, nil
}

func openIndex(dir string) (*esIndex, error) {
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return nil, fmt.Errorf("eslite: open index %s: %w", dir, err)
	}
	meta := &indexMeta{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(meta); err != nil {
		return nil, fmt.Errorf("eslite: open index %s: %w", dir, err)
	}
	if meta.Aliases == nil {
		meta.Aliases = map[string]map[string]any{}
	}
	// A short lock timeout makes a second server on the same directory fail instead of
	// waiting forever for the first one's lock.
	bi, err := bleve.OpenUsing(filepath.Join(dir, "bleve"), map[string]any{"bolt_timeout": "2s"})
	if err != nil {
		return nil, fmt.Errorf("eslite: open index %s: %w", meta.Name, err)
	}
	bi.SetName(meta.Name)
	return &esIndex{name: meta.Name, dir: dir, bi: bi, meta: meta, fields: flattenMappings(meta.Mappings), refreshed: meta.SeqNo - 1}, nil
}

func (ix *esIndex) close() error { return ix.bi.Close() }

// saveMeta writes meta.json atomically; callers hold mu (or own ix exclusively).
func (ix *esIndex) saveMeta() error {
	b, err := json.MarshalIndent(ix.meta, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(ix.dir, "meta.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(ix.dir, "meta.json"))
}

func (ix *esIndex) snapshotMeta() indexMeta {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	b, _ := json.Marshal(ix.meta)
	var m indexMeta
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	_ = dec.Decode(&m)
	if m.Aliases == nil {
		m.Aliases = map[string]map[string]any{}
	}
	return m
}

func (ix *esIndex) fieldMap() map[string]fieldInfo {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.fields
}

func (ix *esIndex) aliasNames() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	out := make([]string, 0, len(ix.meta.Aliases))
	for a := range ix.meta.Aliases {
		out = append(out, a)
	}
	return out
}

func (ix *esIndex) hasAlias(name string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, ok := ix.meta.Aliases[name]
	return ok
}

// setAlias adds (attrs non-nil) or removes an alias.
func (ix *esIndex) setAlias(name string, attrs map[string]any) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if attrs != nil {
		ix.meta.Aliases[name] = attrs
	} else {
		delete(ix.meta.Aliases, name)
	}
	return ix.saveMeta()
}

func (ix *esIndex) mergeMappings(req map[string]any) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	props, _ := req["properties"].(map[string]any)
	props = expandDotted(props)
	for k, v := range req {
		if k != "properties" {
			ix.meta.Mappings[k] = v
		}
	}
	cur, _ := ix.meta.Mappings["properties"].(map[string]any)
	if cur == nil {
		cur = map[string]any{}
		ix.meta.Mappings["properties"] = cur
	}
	if err := mergeProps(cur, props, ""); err != nil {
		return err
	}
	ix.fields = flattenMappings(ix.meta.Mappings)
	return ix.saveMeta()
}

func mergeProps(cur, add map[string]any, prefix string) error {
	for name, v := range add {
		nv, _ := v.(map[string]any)
		old, ok := cur[name].(map[string]any)
		if !ok {
			cur[name] = nv
			continue
		}
		ot, nt := typeOf(old), typeOf(nv)
		if ot != nt {
			return badRequest("illegal_argument_exception", "mapper [%s%s] cannot be changed from type [%s] to [%s]", prefix, name, ot, nt)
		}
		if ot != "object" {
			// A leaf's new definition replaces the old one (meta, analyzer, ...); its
			// multi-fields add up.
			of, _ := old["fields"].(map[string]any)
			nf, _ := nv["fields"].(map[string]any)
			if of != nil {
				merged := map[string]any{}
				for k, x := range of {
					merged[k] = x
				}
				for k, x := range nf {
					merged[k] = x
				}
				nv["fields"] = merged
			}
			cur[name] = nv
			continue
		}
		if ot == "object" {
			op, _ := old["properties"].(map[string]any)
			if op == nil {
				op = map[string]any{}
				old["properties"] = op
			}
			np, _ := nv["properties"].(map[string]any)
			if err := mergeProps(op, np, prefix+name+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

func typeOf(p map[string]any) string {
	if t, ok := p["type"].(string); ok {
		return t
	}
	if _, ok := p["properties"]; ok {
		return "object"
	}
	return "object"
}

// canonicalType maps an Elasticsearch field type onto the few kinds eslite indexes.
// Types eslite does not search (geo, ranges, vectors, binary, ...) are "none": the
// mapping accepts and reports them and their values stay in _source.
func canonicalType(t string) (string, bool) {
	switch t {
	case "text", "match_only_text", "search_as_you_type", "annotated_text", "semantic_text":
		return "text", true
	case "keyword", "wildcard", "constant_keyword", "ip", "version", "counted_keyword":
		return "keyword", true
	case "long", "integer", "short", "byte", "unsigned_long", "token_count":
		return "long", true
	case "double", "float", "half_float", "scaled_float":
		return "double", true
	case "date", "date_nanos":
		return "date", true
	case "boolean":
		return "boolean", true
	case "object", "nested", "passthrough":
		return "object", true
	case "geo_point", "geo_shape", "shape", "point", "binary", "integer_range", "float_range", "long_range",
		"double_range", "date_range", "ip_range", "dense_vector", "sparse_vector", "rank_feature",
		"rank_features", "percolator", "join", "alias", "histogram", "aggregate_metric_double",
		"flattened", "murmur3", "completion", "exponential_histogram":
		return "none", true
	}
	return "", false
}

func validateMappings(m map[string]any) error {
	for k, v := range m {
		switch k {
		case "properties", "dynamic", "_source", "_meta", "dynamic_templates", "date_detection", "numeric_detection",
			"subobjects", "_routing", "enabled", "_field_names", "_data_stream_timestamp", "dynamic_date_formats":
		case "runtime":
			rt, _ := v.(map[string]any)
			for name, def := range rt {
				d, _ := def.(map[string]any)
				if t := fmt.Sprint(d["type"]); !runtimeTypes[t] {
					return badRequest("mapper_parsing_exception", "Failed to parse mapping: The mapper type [%s] declared on runtime field [%s] does not exist. It might have been created within a future version or requires a plugin to be installed. Check the documentation.", t, name)
				}
			}
		case "_doc":
			return badRequest("illegal_argument_exception", "Types cannot be provided in put mapping requests")
		default:
			return badRequest("mapper_parsing_exception", "Root mapping definition has unsupported parameters:  [%s : %v]", k, v)
		}
	}
	if p, ok := m["properties"]; ok {
		if _, isMap := p.(map[string]any); !isMap {
			return badRequest("mapper_parsing_exception", "Failed to parse mapping: Expected map for property [properties] but got a %T", p)
		}
	}
	props, _ := m["properties"].(map[string]any)
	return validateProps(props, "")
}

var runtimeTypes = map[string]bool{"keyword": true, "long": true, "double": true, "date": true, "boolean": true,
	"ip": true, "geo_point": true, "composite": true, "lookup": true}

// emptyNameErr is Elasticsearch's refusal of a field named "".
func emptyNameErr() *esError {
	e := badRequest("mapper_parsing_exception", "Failed to parse mapping: name cannot be empty string")
	e.extra = map[string]any{"caused_by": map[string]any{"type": "illegal_argument_exception", "reason": "name cannot be empty string"}}
	return e
}

func validateProps(props map[string]any, prefix string) error {
	for name, v := range props {
		if strings.TrimSpace(name) == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			return emptyNameErr()
		}
		p, ok := v.(map[string]any)
		if !ok {
			return badRequest("mapper_parsing_exception", "Expected map for property [fields] on field [%s%s]", prefix, name)
		}
		t := typeOf(p)
		if _, ok := canonicalType(t); !ok {
			return badRequest("mapper_parsing_exception", "Failed to parse mapping: The mapper type [%s] declared on field [%s] does not exist. It might have been created within a future version or requires a plugin to be installed. Check the documentation.", t, name)
		}
		if sub, ok := p["properties"].(map[string]any); ok {
			if err := validateProps(sub, prefix+name+"."); err != nil {
				return err
			}
		}
		if fs, ok := p["fields"].(map[string]any); ok {
			if err := validateProps(fs, prefix+name+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// expandDotted turns {"a.b": {...}} into {"a": {"properties": {"b": {...}}}}, as
// Elasticsearch reads dotted names in mappings.
func expandDotted(props map[string]any) map[string]any {
	out := map[string]any{}
	for name, v := range props {
		p, _ := v.(map[string]any)
		if sub, ok := p["properties"].(map[string]any); ok {
			p["properties"] = expandDotted(sub)
		}
		if !strings.Contains(name, ".") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			mergeInto(out, name, v)
			continue
		}
		parts := strings.Split(name, ".")
		leaf := v
		for i := len(parts) - 1; i >= 1; i-- {
			leaf = map[string]any{"properties": map[string]any{parts[i]: leaf}}
		}
		mergeInto(out, parts[0], leaf)
	}
	return out
}

func mergeInto(out map[string]any, name string, v any) {
	old, ok := out[name].(map[string]any)
	nv, ok2 := v.(map[string]any)
	if !ok || !ok2 {
		out[name] = v
		return
	}
	op, _ := old["properties"].(map[string]any)
	np, _ := nv["properties"].(map[string]any)
	if op != nil && np != nil {
		for k, x := range np {
			mergeInto(op, k, x)
		}
		return
	}
	out[name] = v
}

// outMappings is the mappings as Elasticsearch shows them: an index without fields has
// an empty object, not empty properties.
func outMappings(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k == "properties" {
			if p, ok := v.(map[string]any); ok && len(p) == 0 {
				continue
			}
		}
		out[k] = v
	}
	return out
}

func flattenMappings(m map[string]any) map[string]fieldInfo {
	out := map[string]fieldInfo{}
	props, _ := m["properties"].(map[string]any)
	flattenProps(props, "", out)
	return out
}

func flattenProps(props map[string]any, prefix string, out map[string]fieldInfo) {
	for name, v := range props {
		p, _ := v.(map[string]any)
		path := prefix + name
		ct, _ := canonicalType(typeOf(p))
		if ct == "object" {
			sub, _ := p["properties"].(map[string]any)
			flattenProps(sub, path+".", out)
			continue
		}
		out[path] = leafInfo(p, ct, path)
		if fs, ok := p["fields"].(map[string]any); ok {
			for sn, sv := range fs {
				sp, _ := sv.(map[string]any)
				st, _ := canonicalType(typeOf(sp))
				out[path+"."+sn] = leafInfo(sp, st, path)
			}
		}
	}
}

func leafInfo(p map[string]any, ct, src string) fieldInfo {
	fi := fieldInfo{Type: ct, Src: src, ESType: typeOf(p)}
	if ia, ok := p["ignore_above"]; ok {
		fi.IgnoreAbove, _ = strconv.Atoi(fmt.Sprint(ia))
	}
	fi.Store = fmt.Sprint(p["store"]) == "true"
	if f, ok := p["format"].(string); ok && ct == "date" {
		fi.DateFormat = f
	}
	fi.Malformed = fmt.Sprint(p["ignore_malformed"]) == "true"
	fi.Fielddata = fmt.Sprint(p["fielddata"]) == "true"
	return fi
}

// storedDoc is what eslite keeps of a document besides its indexed fields.
type storedDoc struct {
	src     map[string]any
	version int64
	seq     int64
	routing string
	ignored []string
}

// getDoc returns a stored document, nil when absent.
func (ix *esIndex) getDoc(id string) (*storedDoc, error) {
	d, err := ix.bi.Document(id)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, nil
	}
	sd := &storedDoc{seq: -1}
	d.VisitFields(func(f bindex.Field) {
		switch f.Name() {
		case fSource:
			dec := json.NewDecoder(bytes.NewReader(f.Value()))
			dec.UseNumber()
			_ = dec.Decode(&sd.src)
		case fVersion:
			sd.version, _ = strconv.ParseInt(string(f.Value()), 10, 64)
		case fSeqNo:
			sd.seq, _ = strconv.ParseInt(string(f.Value()), 10, 64)
		case fRouting:
			sd.routing = string(f.Value())
		case fIgnored:
			_ = json.Unmarshal(f.Value(), &sd.ignored)
		}
	})
	if sd.src == nil {
		return nil, nil
	}
	return sd, nil
}

// writeOp is one document write in a batch.
type writeOp struct {
	action string // index, create, delete, update
	id     string
	source []byte
	// conditions
	version     int64  // with versionType external / external_gte; -1 when unset
	versionType string // internal, external, external_gte
	ifSeqNo     *int64
	ifTerm      *int64
	routing     string
	// dynamicTemplates names, per field path, the dynamic template a new field takes
	// (bulk's dynamic_templates)
	dynamicTemplates map[string]string
	// update only: the partial document, an upsert document, doc_as_upsert
	update map[string]any
	// results
	status   int
	result   string
	version2 int64
	seq      int64
	err      *esError
	stored   *storedDoc // the document after an update, for get in the response
}

func conflict(id, format string, args ...any) *esError {
	return &esError{status: 409, typ: "version_conflict_engine_exception", reason: "[" + id + "]: version conflict, " + fmt.Sprintf(format, args...),
		extra: map[string]any{"index_uuid": "eslite", "shard": "0"}}
}

// apply performs writes in one bleve batch; every op gets its own status. Sequence
// numbers count the index's operations from 0, as a shard's do.
func (ix *esIndex) apply(ops []*writeOp) error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	batch := ix.bi.NewBatch()
	pending := map[string]*storedDoc{} // id -> state after this batch (nil src: deleted)
	inBatch := map[string]bool{}
	metaChanged := false
	ix.mu.Lock()
	nextSeq := ix.meta.SeqNo
	ix.mu.Unlock()
	for _, op := range ops {
		var cur *storedDoc
		if inBatch[op.id] {
			cur = pending[op.id]
		} else {
			var err error
			if cur, err = ix.getDoc(op.id); err != nil {
				return err
			}
		}
		exists := cur != nil && cur.src != nil
		var curVer, curSeq int64 = 0, -1
		if cur != nil {
			curVer, curSeq = cur.version, cur.seq
		}
		fail := func(e *esError) {
			op.err, op.status = e, e.status
		}
		if op.ifSeqNo != nil || op.ifTerm != nil {
			term := int64(1)
			if op.ifTerm != nil {
				term = *op.ifTerm
			}
			if !exists {
				fail(conflict(op.id, "required seqNo [%d], primary term [%d] but no document was found", derefOr(op.ifSeqNo, -2), term))
				continue
			}
			if op.ifSeqNo == nil || *op.ifSeqNo != curSeq || term != 1 {
				fail(conflict(op.id, "required seqNo [%d], primary term [%d]. current document has seqNo [%d] and primary term [1]", derefOr(op.ifSeqNo, -2), term, curSeq))
				continue
			}
		}
		newVer := curVer + 1
		switch op.versionType {
		case "external", "external_gte":
			if exists && (op.version < curVer || op.version == curVer && op.versionType == "external") {
				fail(conflict(op.id, "current version [%d] is higher or equal to the one provided [%d]", curVer, op.version))
				continue
			}
			newVer = op.version
		}
		switch op.action {
		case "delete":
			if !exists {
				op.status, op.result, op.version2 = 404, "not_found", curVer+1
				op.seq = nextSeq
				nextSeq++
				continue
			}
			batch.Delete(op.id)
			op.status, op.result, op.version2 = 200, "deleted", newVer
			pending[op.id], inBatch[op.id] = &storedDoc{version: newVer, seq: nextSeq}, true
		case "index", "create", "update":
			if op.action == "create" && exists {
				fail(conflict(op.id, "document already exists (current version [%d])", curVer))
				continue
			}
			source := op.source
			if op.action == "update" {
				var merged map[string]any
				switch {
				case exists:
					merged = deepCopy(cur.src).(map[string]any)
					doc, _ := op.update["doc"].(map[string]any)
					changed := mergeDoc(merged, doc)
					if !changed && fmt.Sprint(op.update["detect_noop"]) != "false" {
						op.status, op.result, op.version2, op.seq = 200, "noop", curVer, curSeq
						op.stored = cur
						ix.mu.Lock()
						ix.meta.NoopUpdates++
						ix.mu.Unlock()
						metaChanged = true
						continue
					}
				case op.update["upsert"] != nil:
					merged, _ = op.update["upsert"].(map[string]any)
				case fmt.Sprint(op.update["doc_as_upsert"]) == "true":
					merged, _ = op.update["doc"].(map[string]any)
				default:
					fail(&esError{status: 404, typ: "document_missing_exception", reason: "[" + op.id + "]: document missing",
						extra: map[string]any{"index_uuid": "eslite", "shard": "0", "index": ix.name}})
					continue
				}
				source, _ = json.Marshal(merged)
			}
			doc, changed, err := ix.buildDoc(op.id, source, newVer, nextSeq, op.routing, op.dynamicTemplates)
			if err != nil {
				fail(asESError(err))
				continue
			}
			metaChanged = metaChanged || changed
			if err := batch.IndexAdvanced(doc); err != nil {
				fail(badRequest("document_parsing_exception", "failed to index document [%s]: %v", op.id, err))
				continue
			}
			op.version2 = newVer
			if exists {
				op.status, op.result = 200, "updated"
			} else {
				op.status, op.result = 201, "created"
			}
			src := map[string]any{}
			dec := json.NewDecoder(bytes.NewReader(source))
			dec.UseNumber()
			_ = dec.Decode(&src)
			sd := &storedDoc{src: src, version: newVer, seq: nextSeq, routing: op.routing}
			pending[op.id], inBatch[op.id] = sd, true
			op.stored = sd
			ix.mu.Lock()
			ix.meta.IndexTotal++
			ix.mu.Unlock()
			metaChanged = true
		default:
			fail(badRequest("illegal_argument_exception", "eslite does not support the bulk action [%s] (supported: index, create, update, delete)", op.action))
			continue
		}
		op.seq = nextSeq
		nextSeq++
	}
	ix.mu.Lock()
	ix.meta.SeqNo = nextSeq
	metaChanged = true
	if metaChanged {
		if err := ix.saveMeta(); err != nil {
			ix.mu.Unlock()
			return err
		}
	}
	ix.mu.Unlock()
	if batch.Size() > 0 {
		if err := ix.bi.Batch(batch); err != nil {
			return err
		}
		ix.gen.Add(1)
	}
	return nil
}

func derefOr(p *int64, d int64) int64 {
	if p == nil {
		return d
	}
	return *p
}

// mergeDoc applies a partial document as the update API does (objects merge key by key)
// and reports whether anything changed.
func mergeDoc(dst, part map[string]any) bool {
	changed := false
	for k, v := range part {
		if sub, ok := v.(map[string]any); ok {
			if cur, ok := dst[k].(map[string]any); ok {
				if mergeDoc(cur, sub) {
					changed = true
				}
				continue
			}
		}
		if old, ok := dst[k]; !ok || !reflect.DeepEqual(old, v) {
			changed = true
		}
		dst[k] = v
	}
	return changed
}

// buildDoc turns a _source into a bleve document, mapping unmapped fields dynamically.
// It reports whether the mappings changed.
func (ix *esIndex) buildDoc(id string, source []byte, version, seq int64, routing string, templates map[string]string) (*document.Document, bool, error) {
	var src map[string]any
	dec := json.NewDecoder(bytes.NewReader(source))
	dec.UseNumber()
	if err := dec.Decode(&src); err != nil || src == nil {
		return nil, false, badRequest("document_parsing_exception", "failed to parse document [%s]: not a JSON object", id)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	props, _ := ix.meta.Mappings["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		ix.meta.Mappings["properties"] = props
	}
	// Work on a copy so a failing document leaves the mappings untouched.
	work := deepCopy(props).(map[string]any)
	doc := document.NewDocument(id)
	dp := &docParse{doc: doc, names: map[string]bool{}, dynamic: fmt.Sprint(ix.meta.Mappings["dynamic"]), id: id,
		templates: parseDynamicTemplates(ix.meta.Mappings["dynamic_templates"]), chosen: templates}
	if err := dp.object(work, src, "", nil); err != nil {
		return nil, false, err
	}
	names, changed := dp.names, dp.changed
	doc.AddField(document.NewTextFieldCustom(fIndexName, nil, []byte(ix.name), bindex.IndexField, keywordAnalyzer))
	var ignored []string
	for n := range names {
		if strings.HasPrefix(n, ignoredMark) {
			ignored = append(ignored, strings.TrimPrefix(n, ignoredMark))
			continue
		}
		doc.AddField(document.NewTextFieldCustom(fFieldNames, nil, []byte(n), bindex.IndexField, keywordAnalyzer))
	}
	if len(ignored) > 0 {
		sort.Strings(ignored)
		b, _ := json.Marshal(ignored)
		doc.AddField(document.NewTextFieldWithIndexingOptions(fIgnored, nil, b, bindex.StoreField))
		doc.AddField(document.NewTextFieldCustom(fFieldNames, nil, []byte(fIgnored), bindex.IndexField, keywordAnalyzer))
		for _, n := range ignored {
			doc.AddField(document.NewTextFieldCustom(fIgnoredTerms, nil, []byte(n), bindex.IndexField, keywordAnalyzer))
		}
	}
	compact, _ := json.Marshal(src)
	doc.AddField(document.NewTextFieldWithIndexingOptions(fSource, nil, compact, bindex.StoreField))
	doc.AddField(document.NewTextFieldWithIndexingOptions(fVersion, nil, []byte(strconv.FormatInt(version, 10)), bindex.StoreField))
	doc.AddField(document.NewTextFieldWithIndexingOptions(fSeqNo, nil, []byte(strconv.FormatInt(seq, 10)), bindex.StoreField))
	if routing != "" {
		doc.AddField(document.NewTextFieldWithIndexingOptions(fRouting, nil, []byte(routing), bindex.StoreField))
		doc.AddField(document.NewTextFieldCustom(fFieldNames, nil, []byte(fRouting), bindex.IndexField, keywordAnalyzer))
	}
	if changed {
		ix.meta.Mappings["properties"] = work
		ix.fields = flattenMappings(ix.meta.Mappings)
	}
	return doc, changed, nil
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	}
	return v
}

// docParse is one document being turned into a bleve document: the fields it names
// (and ignores), whether it changed the mappings, the index's dynamic setting and
// templates, and the templates the request chose per field.
type docParse struct {
	doc       *document.Document
	names     map[string]bool
	changed   bool
	dynamic   string
	id        string
	templates []dynamicTemplate
	chosen    map[string]string
}

func (dp *docParse) object(props map[string]any, obj map[string]any, prefix string, ap []uint64) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := dp.value(props, k, obj[k], prefix, ap); err != nil {
			return err
		}
	}
	return nil
}

func (dp *docParse) value(props map[string]any, name string, v any, prefix string, ap []uint64) error {
	doc, names, dynamic, id := dp.doc, dp.names, dp.dynamic, dp.id
	path := prefix + name
	if v == nil {
		return nil
	}
	if arr, ok := v.([]any); ok {
		for i, x := range arr {
			if err := dp.value(props, name, x, prefix, append(append([]uint64(nil), ap...), uint64(i))); err != nil {
				return err
			}
		}
		return nil
	}
	if prefix == "" && metadataFields[name] {
		return badRequest("document_parsing_exception", "Field [%s] is a metadata field and cannot be added inside a document. Use the index API request parameters.", name)
	}
	p, mapped := props[name].(map[string]any)
	if !mapped {
		if dynamic == "false" {
			return nil
		}
		if dynamic == "strict" {
			return badRequest("strict_dynamic_mapping_exception", "[_doc] mapping set to strict, dynamic introduction of [%s] within [_doc] is not allowed", path)
		}
		var err error
		if p, err = dp.newFieldMapping(path, name, v); err != nil {
			return err
		}
		props[name] = p
		dp.changed = true
	}
	t, _ := canonicalType(typeOf(p))
	if t == "none" {
		markNames(names, path)
		return nil
	}
	if t == "object" {
		o, ok := v.(map[string]any)
		if !ok {
			return badRequest("document_parsing_exception", "object mapping for [%s] tried to parse field [%s] as object, but found a concrete value (document id [%s])", path, path, id)
		}
		sub, _ := p["properties"].(map[string]any)
		if sub == nil {
			sub = map[string]any{}
			p["properties"] = sub
		}
		names[path] = true
		return dp.object(sub, o, path+".", ap)
	}
	if err := addLeaf(doc, path, p, v, ap, id, names); err != nil {
		return err
	}
	markNames(names, path)
	if fs, ok := p["fields"].(map[string]any); ok {
		for sn, sv := range fs {
			sp, _ := sv.(map[string]any)
			if err := addLeaf(doc, path+"."+sn, sp, v, ap, id, names); err != nil {
				return err
			}
			names[path+"."+sn] = true
		}
	}
	return nil
}

var metadataFields = map[string]bool{"_id": true, "_index": true, "_source": true, "_version": true, "_field_names": true, "_routing": true, "_seq_no": true}

func markNames(names map[string]bool, path string) {
	names[path] = true
	for i := len(path) - 1; i > 0; i-- {
		if path[i] == '.' {
			names[path[:i]] = true
		}
	}
}

func dynamicMapping(v any) map[string]any {
	switch t := v.(type) {
	case map[string]any:
		return map[string]any{"properties": map[string]any{}}
	case bool:
		return map[string]any{"type": "boolean"}
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return map[string]any{"type": "long"}
		}
		return map[string]any{"type": "float"}
	case string:
		if _, err := parseDateString(t); err == nil && strings.ContainsAny(t, "-T") && len(t) >= 10 {
			return map[string]any{"type": "date"}
		}
	}
	return map[string]any{"type": "text", "fields": map[string]any{"keyword": map[string]any{"type": "keyword", "ignore_above": json.Number("256")}}}
}

func mapperErr(path, typ string, v any, id string, why string) *esError {
	return badRequest("document_parsing_exception", "failed to parse field [%s] of type [%s] in document with id '%s'. Preview of field's value: '%s'%s", path, typ, id, javaPreview(v), why)
}

// ignoredMark prefixes, in the names a document collects, the fields whose values were
// kept in _source only (ignore_above, ignore_malformed): they make its _ignored field.
const ignoredMark = "\x00ignored:"

// javaPreview renders a value the way Elasticsearch previews it in mapping errors.
func javaPreview(v any) string {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + javaPreview(t[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(t))
		for i, x := range t {
			parts[i] = javaPreview(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return scalarString(v)
}

func addLeaf(doc *document.Document, path string, p map[string]any, v any, ap []uint64, id string, names map[string]bool) error {
	esType := typeOf(p)
	t, _ := canonicalType(esType)
	fi := leafInfo(p, t, path)
	if t == "none" {
		// Stored in _source only: geo points and shapes, ranges, vectors, binary ...
		return nil
	}
	if _, isObj := v.(map[string]any); isObj {
		return mapperErr(path, esType, v, id, "")
	}
	malformed := func() error {
		if fi.Malformed {
			names[ignoredMark+path] = true
			return nil
		}
		return mapperErr(path, esType, v, id, "")
	}
	switch t {
	case "text":
		doc.AddField(document.NewTextFieldCustom(path, ap, []byte(scalarString(v)), bindex.IndexField|bindex.IncludeTermVectors, textAnalyzer))
	case "keyword":
		s := scalarString(v)
		if esType == "ip" && net.ParseIP(s) == nil {
			return malformed()
		}
		if fi.IgnoreAbove > 0 && len(s) > fi.IgnoreAbove {
			names[ignoredMark+path] = true
			return nil
		}
		doc.AddField(document.NewTextFieldCustom(path, ap, []byte(s), bindex.IndexField|bindex.DocValues, keywordAnalyzer))
	case "long", "double":
		tv, ok := typedValue(fi, v)
		f, _ := tv.(float64)
		if !ok {
			return malformed()
		}
		if t == "long" {
			if f != math.Trunc(f) {
				f = math.Trunc(f)
			}
		}
		doc.AddField(document.NewNumericFieldWithIndexingOptions(path, ap, f, bindex.IndexField|bindex.DocValues))
	case "date":
		format, _ := p["format"].(string)
		tm, err := parseDateFormat(v, format)
		if err != nil {
			return malformed()
		}
		f, err := document.NewDateTimeFieldWithIndexingOptions(path, ap, tm, time.RFC3339Nano, bindex.IndexField|bindex.DocValues)
		if err != nil {
			// Outside the range bleve indexes (years before 1678 or after 2262, such as
			// a zero Go time): kept in _source, not searchable.
			return nil
		}
		doc.AddField(f)
	case "boolean":
		b, ok := toBool(v)
		if !ok {
			return malformed()
		}
		doc.AddField(document.NewBooleanFieldWithIndexingOptions(path, ap, b, bindex.IndexField|bindex.DocValues))
	}
	return nil
}

func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	case bool:
		return strconv.FormatBool(t)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

func toBool(v any) (bool, bool) {
	switch t := v.(type) {
	case bool:
		return t, true
	case string:
		switch t {
		case "true":
			return true, true
		case "false", "":
			return false, true
		}
	}
	return false, false
}

// ---- document and bulk endpoints ----

func randomID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeParams reads the conditions and options of a single-document write.
func writeParams(q url.Values, op *writeOp) error {
	op.versionType = "internal"
	if v := q.Get("version_type"); v != "" {
		op.versionType = v
	}
	if v := q.Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return badRequest("illegal_argument_exception", "failed to parse [version]: [%s]", v)
		}
		op.version = n
		if op.versionType == "internal" {
			return badRequest("action_request_validation_exception", "Validation Failed: 1: internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead;")
		}
	}
	for _, k := range []string{"if_seq_no", "if_primary_term"} {
		if v := q.Get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return badRequest("illegal_argument_exception", "failed to parse [%s]: [%s]", k, v)
			}
			if k == "if_seq_no" {
				op.ifSeqNo = &n
			} else {
				op.ifTerm = &n
			}
		}
	}
	op.routing = q.Get("routing")
	return nil
}

func validateID(id string) *esError {
	if len(id) > 512 {
		return badRequest("action_request_validation_exception", "Validation Failed: 1: id [%s] is too long, must be no longer than 512 bytes but was: %d;", id, len(id))
	}
	return nil
}

func (ix *esIndex) shards() int {
	m := ix.snapshotMeta()
	st := flattenSettings(m.Settings)
	n, _ := strconv.Atoi(fmt.Sprint(st["number_of_shards"]))
	if n < 1 {
		n = 1
	}
	return n
}

func (s *server) doc(r *http.Request, target, op, id string, body []byte) (int, any, error) {
	q := r.URL.Query()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if (op != "_doc" && op != "_source") || id == "" {
			return 0, nil, unsupported(r)
		}
		ixs, err := s.resolveStrict(target)
		if err != nil {
			return 0, nil, err
		}
		if len(ixs) != 1 {
			return 0, nil, badRequest("illegal_argument_exception", "alias [%s] has more than one index associated with it, can't execute a single index op", target)
		}
		ix := ixs[0]
		sd, err := ix.getDoc(id)
		if err != nil {
			return 0, nil, err
		}
		// With several shards a routed document lives where its routing sends it: a
		// get with another routing looks in another shard and does not find it.
		if sd != nil && ix.shards() > 1 && sd.routing != q.Get("routing") {
			sd = nil
		}
		// A get with realtime=false reads what searches see, after refreshing the
		// index first when it asks to (refresh=true).
		if q.Get("realtime") == "false" && (q.Get("refresh") == "true" || (q.Has("refresh") && q.Get("refresh") == "")) {
			ix.refreshNow()
		}
		if limit, limited := ix.visibleUpTo(); sd != nil && limited && q.Get("realtime") == "false" && sd.seq > limit {
			sd = nil
		}
		if sd == nil {
			if r.Method == http.MethodHead || op == "_source" {
				return 0, nil, &esError{status: 404, typ: "resource_not_found_exception", reason: "Document not found [" + ix.name + "]/[" + id + "]"}
			}
			return 404, map[string]any{"_index": ix.name, "_id": id, "found": false}, nil
		}
		if v := q.Get("version"); v != "" {
			want, _ := strconv.ParseInt(v, 10, 64)
			if want != sd.version {
				return 0, nil, conflict(id, "current version [%d] is different than the one provided [%d]", sd.version, want)
			}
		}
		filter, err := sourceFilterFrom(q, nil)
		if err != nil {
			return 0, nil, err
		}
		if op == "_source" {
			if filter == nil {
				filter = &sourceFilter{}
			}
			return 200, filter.apply(sd.src), nil
		}
		out := map[string]any{"_index": ix.name, "_id": id, "_version": sd.version, "_seq_no": sd.seq, "_primary_term": 1, "found": true}
		if sd.routing != "" {
			out["_routing"] = sd.routing
		}
		stored, hasStored := q["stored_fields"]
		withSource := !hasStored
		if hasStored {
			fields := map[string]any{}
			fm := ix.fieldMap()
			for _, name := range strings.Split(stored[0], ",") {
				switch name = strings.TrimSpace(name); name {
				case "_source":
					withSource = true
				case "_ignored":
					if len(sd.ignored) > 0 {
						vals := make([]any, len(sd.ignored))
						for i, x := range sd.ignored {
							vals[i] = x
						}
						out["_ignored"] = vals
					}
				case "_routing", "":
				default:
					if fi, ok := fm[name]; ok && fi.Store {
						if vals := formatValues(fi, fieldValues(fi, sd.src)); len(vals) > 0 {
							fields[name] = vals
						}
					}
				}
			}
			if len(fields) > 0 {
				out["fields"] = fields
			}
		}
		if _, ok := q["_source"]; ok || q.Get("_source_includes") != "" || q.Get("_source_excludes") != "" {
			withSource = filter != nil
		}
		if withSource {
			if filter == nil {
				filter = &sourceFilter{}
			}
			out["_source"] = filter.apply(sd.src)
		}
		return 200, out, nil
	case http.MethodPut, http.MethodPost, http.MethodDelete:
	default:
		return 0, nil, unsupported(r)
	}
	action := "index"
	if op == "_create" || q.Get("op_type") == "create" {
		action = "create"
	}
	if op == "_update" {
		action = "update"
	}
	if e := validateID(id); e != nil {
		return 0, nil, e
	}
	o := &writeOp{action: action, id: id, source: body}
	if err := writeParams(q, o); err != nil {
		return 0, nil, err
	}
	if r.Method == http.MethodDelete {
		o.action = "delete"
		if id == "" {
			return 0, nil, unsupported(r)
		}
		ixs, err := s.resolveStrict(target)
		if err != nil {
			return 0, nil, err
		}
		if len(ixs) != 1 {
			return 0, nil, badRequest("illegal_argument_exception", "cannot delete through [%s]: not a single index", target)
		}
		if err := ixs[0].apply([]*writeOp{o}); err != nil {
			return 0, nil, err
		}
		if o.err != nil {
			return 0, nil, o.err
		}
		out := writeResult(ixs[0].name, o)
		refreshParam(q, out, ixs[0])
		return o.status, out, nil
	}
	if id == "" {
		if r.Method != http.MethodPost || op != "_doc" {
			return 0, nil, unsupported(r)
		}
		id = randomID()
		o.id = id
	}
	if p := q.Get("pipeline"); p != "" && p != "_none" {
		return 0, nil, badRequest("illegal_argument_exception", "pipeline with id [%s] does not exist", p)
	}
	if q.Get("require_alias") == "true" && !s.isAlias(target) {
		return 0, nil, requireAliasErr(target)
	}
	if action == "update" {
		req, err := decodeObject(body)
		if err != nil {
			return 0, nil, err
		}
		if err := checkUpdate(req); err != nil {
			return 0, nil, err
		}
		o.update = req
	}
	ix, err := s.writeTarget(target)
	if err != nil {
		return 0, nil, err
	}
	if err := ix.apply([]*writeOp{o}); err != nil {
		return 0, nil, err
	}
	if o.err != nil {
		return 0, nil, o.err
	}
	out := writeResult(ix.name, o)
	refreshParam(q, out, ix)
	return o.status, out, nil
}

// checkUpdate refuses an update body Elasticsearch refuses: unknown keys, neither doc nor
// script, and (here) scripts, which eslite does not run.
func checkUpdate(req map[string]any) error {
	for k := range req {
		switch k {
		case "doc", "upsert", "doc_as_upsert", "detect_noop", "_source", "scripted_upsert":
		case "script":
			return badRequest("illegal_argument_exception", "eslite does not support scripted updates; send a partial document in [doc]")
		default:
			return badRequest("x_content_parse_exception", "[UpdateRequest] unknown field [%s]", k)
		}
	}
	if req["doc"] == nil {
		return badRequest("action_request_validation_exception", "Validation Failed: 1: script or doc is missing;")
	}
	return nil
}

func requireAliasErr(name string) *esError {
	return &esError{status: 404, typ: "index_not_found_exception",
		reason: "no such index [" + name + "] and [require_alias] request flag is [true] and [" + name + "] is not an alias",
		extra:  map[string]any{"index": name, "resource.type": "index_expression", "resource.id": name}}
}

func writeResult(index string, o *writeOp) map[string]any {
	m := map[string]any{"_index": index, "_id": o.id, "_version": o.version2, "result": o.result,
		"_shards": map[string]any{"total": 1, "successful": 1, "failed": 0}, "_seq_no": o.seq, "_primary_term": 1}
	if o.result == "noop" {
		m["_shards"] = map[string]any{"total": 0, "successful": 0, "failed": 0}
	}
	return m
}

// bulkMeta are the parameters an action line may carry.
var bulkMeta = map[string]bool{"_index": true, "_id": true, "routing": true, "version": true, "version_type": true,
	"if_seq_no": true, "if_primary_term": true, "require_alias": true, "pipeline": true, "dynamic_templates": true,
	"op_type": true, "_source": true, "retry_on_conflict": true, "list_executed_pipelines": true, "require_data_stream": true}

func (s *server) bulk(r *http.Request, defaultIndex string, body []byte) (int, any, error) {
	start := time.Now()
	q := r.URL.Query()
	type entry struct {
		action string
		index  string
		op     *writeOp
		source any // the _source option of an update, for its get
		preErr *esError
	}
	var entries []*entry
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
lines:
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var hdr map[string]map[string]any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&hdr); err != nil || len(hdr) > 1 {
			return 0, nil, badRequest("illegal_argument_exception", "Malformed action/metadata line [%d], expected START_OBJECT or END_OBJECT but found [VALUE_STRING]", line)
		}
		if len(hdr) == 0 {
			return 0, nil, badRequest("illegal_argument_exception", "Malformed action/metadata line [%d], expected FIELD_NAME but found [END_OBJECT]", line)
		}
		for action, meta := range hdr {
			for k := range meta {
				if !bulkMeta[k] {
					return 0, nil, badRequest("illegal_argument_exception", "Action/metadata line [%d] contains an unknown parameter [%s]", line, k)
				}
			}
			e := &entry{action: action, index: defaultIndex}
			if v, ok := meta["_index"].(string); ok && v != "" {
				e.index = v
			}
			id, hasID := meta["_id"]
			idStr := ""
			if hasID && id != nil {
				idStr = scalarString(id)
			}
			if e.index == "" {
				return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: index is missing;")
			}
			if action == "index" && fmt.Sprint(meta["op_type"]) == "create" {
				e.action = "create"
			}
			switch action {
			case "index", "create", "update":
				if !sc.Scan() {
					// A last action without a source line is dropped, as Elasticsearch's
					// bulk parser drops it.
					break lines
				}
				line++
				src := append([]byte(nil), bytes.TrimSpace(sc.Bytes())...)
				if hasID && idStr == "" {
					e.preErr = badRequest("illegal_argument_exception", "if _id is specified it must not be empty")
				}
				if idStr == "" && action != "update" {
					idStr = randomID()
				}
				e.op = &writeOp{action: e.action, id: idStr, source: src}
				if dt, ok := meta["dynamic_templates"].(map[string]any); ok {
					e.op.dynamicTemplates = map[string]string{}
					for f, name := range dt {
						e.op.dynamicTemplates[f] = scalarString(name)
					}
				}
				if action == "update" {
					upd, err := decodeObject(src)
					if err != nil {
						return 0, nil, err
					}
					e.op.update = upd
					e.source = upd["_source"]
					if e.source == nil {
						e.source = meta["_source"]
					}
				}
			case "delete":
				e.op = &writeOp{action: action, id: idStr}
			default:
				return 0, nil, badRequest("illegal_argument_exception", "Malformed action/metadata line [%d], expected one of [create, delete, index, update] but found [%s]", line, action)
			}
			vals := url.Values{}
			for _, k := range []string{"version", "version_type", "if_seq_no", "if_primary_term", "routing"} {
				if v, ok := meta[k]; ok {
					vals.Set(k, scalarString(v))
				}
			}
			if err := writeParams(vals, e.op); err != nil && e.preErr == nil {
				e.preErr = asESError(err)
			}
			if e.preErr == nil {
				e.preErr = validateID(idStr)
			}
			pipeline := q.Get("pipeline")
			if v, ok := meta["pipeline"]; ok {
				pipeline = scalarString(v)
			}
			if e.preErr == nil && pipeline != "" && pipeline != "_none" {
				e.preErr = badRequest("illegal_argument_exception", "pipeline with id [%s] does not exist", pipeline)
			}
			requireAlias := q.Get("require_alias") == "true"
			if v, ok := meta["require_alias"]; ok {
				requireAlias = fmt.Sprint(v) == "true"
			}
			if e.preErr == nil && requireAlias && e.action != "delete" && !s.isAlias(e.index) {
				e.preErr = requireAliasErr(e.index)
			}
			if e.source == nil && e.action == "update" {
				if v := q.Get("_source"); v != "" {
					if b, err := strconv.ParseBool(v); err == nil {
						e.source = b
					} else {
						e.source = v
					}
				} else if v := q.Get("_source_includes"); v != "" {
					var inc []any
					for _, x := range strings.Split(v, ",") {
						inc = append(inc, x)
					}
					e.source = map[string]any{"includes": inc}
				}
			}
			entries = append(entries, e)
		}
	}
	// Group by target index, keeping order inside each.
	groups := map[string][]*writeOp{}
	targets := map[string]*esIndex{}
	for _, e := range entries {
		if e.preErr != nil {
			e.op.err, e.op.status = e.preErr, e.preErr.status
			continue
		}
		ix, ok := targets[e.index]
		if !ok {
			var err error
			if e.action == "delete" || e.action == "update" {
				ixs := s.resolve(e.index)
				if len(ixs) == 1 {
					ix = ixs[0]
				} else if len(ixs) == 0 {
					err = notFoundIndex(e.index)
				} else {
					ix, err = s.writeTarget(e.index)
				}
			} else {
				ix, err = s.writeTarget(e.index)
			}
			if err != nil {
				e.op.err = asESError(err)
				e.op.status = e.op.err.status
				continue
			}
			targets[e.index] = ix
		}
		groups[ix.name] = append(groups[ix.name], e.op)
		e.index = ix.name
	}
	for name, ops := range groups {
		var ix *esIndex
		for _, t := range targets {
			if t.name == name {
				ix = t
			}
		}
		if err := ix.apply(ops); err != nil {
			return 0, nil, err
		}
		refreshParam(q, nil, ix)
	}
	items := make([]any, 0, len(entries))
	hasErr := false
	for _, e := range entries {
		var res map[string]any
		if e.op.err != nil {
			hasErr = true
			eb := e.op.err.body()["error"].(map[string]any)
			delete(eb, "root_cause")
			res = map[string]any{"_index": e.index, "_id": e.op.id, "status": e.op.status, "error": eb}
		} else {
			res = writeResult(e.index, e.op)
			res["status"] = e.op.status
			if e.action == "update" && e.op.stored != nil {
				if f, err := parseSourceFilter(e.source); err == nil && f != nil && e.source != nil && e.source != false {
					res["get"] = map[string]any{"_seq_no": e.op.stored.seq, "_primary_term": 1, "found": true, "_source": f.apply(e.op.stored.src)}
				}
			}
		}
		items = append(items, map[string]any{e.action: res})
	}
	return 200, map[string]any{"took": time.Since(start).Milliseconds(), "errors": hasErr, "items": items}, nil
}
