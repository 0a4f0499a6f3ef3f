package eslite

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
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
}

// fieldInfo is one searchable field: its type and where its value is in _source.
type fieldInfo struct {
	Type string // text, keyword, long, double, date, boolean
	Src  string
}

type esIndex struct {
	name string
	dir  string
	bi   bleve.Index

	mu     sync.RWMutex // guards meta and fields
	wmu    sync.Mutex   // serialises writes
	meta   *indexMeta
	fields map[string]fieldInfo
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
	ix := &esIndex{name: meta.Name, dir: dir, bi: bi, meta: meta}
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
	return &esIndex{name: meta.Name, dir: dir, bi: bi, meta: meta, fields: flattenMappings(meta.Mappings)}, nil
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

func (ix *esIndex) setAlias(name string, add bool) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if add {
		ix.meta.Aliases[name] = map[string]any{}
	} else {
		delete(ix.meta.Aliases, name)
	}
	return ix.saveMeta()
}

func (ix *esIndex) mergeMappings(req map[string]any) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	props, _ := req["properties"].(map[string]any)
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
func canonicalType(t string) (string, bool) {
	switch t {
	case "text", "match_only_text":
		return "text", true
	case "keyword", "wildcard", "constant_keyword":
		return "keyword", true
	case "long", "integer", "short", "byte", "unsigned_long":
		return "long", true
	case "double", "float", "half_float", "scaled_float":
		return "double", true
	case "date", "date_nanos":
		return "date", true
	case "boolean":
		return "boolean", true
	case "object":
		return "object", true
	}
	return "", false
}

func validateMappings(m map[string]any) error {
	for k := range m {
		switch k {
		case "properties", "dynamic", "_source", "_meta", "dynamic_templates", "date_detection", "numeric_detection":
		default:
			return badRequest("mapper_parsing_exception", "Root mapping definition has unsupported parameters: [%s]", k)
		}
	}
	props, _ := m["properties"].(map[string]any)
	return validateProps(props, "")
}

func validateProps(props map[string]any, prefix string) error {
	for name, v := range props {
		p, ok := v.(map[string]any)
		if !ok {
			return badRequest("mapper_parsing_exception", "Expected map for property [fields] on field [%s%s]", prefix, name)
		}
		t := typeOf(p)
		if _, ok := canonicalType(t); !ok {
			return badRequest("mapper_parsing_exception", "No handler for type [%s] declared on field [%s%s] (eslite supports text, keyword, long, integer, short, byte, double, float, date, boolean, object)", t, prefix, name)
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
		out[path] = fieldInfo{Type: ct, Src: path}
		if fs, ok := p["fields"].(map[string]any); ok {
			for sn, sv := range fs {
				sp, _ := sv.(map[string]any)
				st, _ := canonicalType(typeOf(sp))
				out[path+"."+sn] = fieldInfo{Type: st, Src: path}
			}
		}
	}
}

// docVersion returns the stored version of a document, 0 when absent.
func (ix *esIndex) getDoc(id string) (map[string]any, int64, bool, error) {
	d, err := ix.bi.Document(id)
	if err != nil {
		return nil, 0, false, err
	}
	if d == nil {
		return nil, 0, false, nil
	}
	var src map[string]any
	var ver int64
	d.VisitFields(func(f bindex.Field) {
		switch f.Name() {
		case fSource:
			dec := json.NewDecoder(bytes.NewReader(f.Value()))
			dec.UseNumber()
			_ = dec.Decode(&src)
		case fVersion:
			ver, _ = strconv.ParseInt(string(f.Value()), 10, 64)
		}
	})
	if src == nil {
		return nil, 0, false, nil
	}
	return src, ver, true, nil
}

// writeOp is one document write in a batch.
type writeOp struct {
	action string // index, create, delete
	id     string
	source []byte
	// results
	status  int
	result  string
	version int64
	seq     int64
	err     *esError
}

// apply performs writes in one bleve batch; every op gets its own status.
func (ix *esIndex) apply(ops []*writeOp) error {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	batch := ix.bi.NewBatch()
	pending := map[string]int64{} // id -> version after this batch (-1 deleted)
	metaChanged := false
	for _, op := range ops {
		prev, inBatch := pending[op.id]
		var cur int64
		exists := false
		if inBatch {
			exists = prev > 0
			cur = prev
			if prev < 0 {
				cur = -prev
			}
		} else {
			_, v, ok, err := ix.getDoc(op.id)
			if err != nil {
				return err
			}
			exists, cur = ok, v
		}
		switch op.action {
		case "delete":
			if !exists {
				op.status, op.result, op.version = 404, "not_found", cur+1
				continue
			}
			batch.Delete(op.id)
			op.status, op.result, op.version = 200, "deleted", cur+1
			pending[op.id] = -(cur + 1)
		case "index", "create":
			if op.action == "create" && exists {
				op.err = &esError{status: 409, typ: "version_conflict_engine_exception", reason: fmt.Sprintf("[%s]: version conflict, document already exists (current version [%d])", op.id, cur)}
				op.status = 409
				continue
			}
			doc, changed, err := ix.buildDoc(op.id, op.source, cur+1)
			if err != nil {
				op.err = asESError(err)
				op.status = op.err.status
				continue
			}
			metaChanged = metaChanged || changed
			if err := batch.IndexAdvanced(doc); err != nil {
				op.err = badRequest("mapper_parsing_exception", "failed to index document [%s]: %v", op.id, err)
				op.status = 400
				continue
			}
			op.version = cur + 1
			if exists {
				op.status, op.result = 200, "updated"
			} else {
				op.status, op.result = 201, "created"
			}
			pending[op.id] = cur + 1
		default:
			op.err = badRequest("illegal_argument_exception", "eslite does not support the bulk action [%s] (supported: index, create, delete)", op.action)
			op.status = 400
		}
	}
	if metaChanged {
		ix.mu.Lock()
		err := ix.saveMeta()
		ix.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if batch.Size() > 0 {
		if err := ix.bi.Batch(batch); err != nil {
			return err
		}
	}
	ix.mu.Lock()
	for _, op := range ops {
		if op.err == nil && op.status != 404 {
			ix.meta.SeqNo++
			op.seq = ix.meta.SeqNo
		}
	}
	ix.mu.Unlock()
	return nil
}

// buildDoc turns a _source into a bleve document, mapping unmapped fields dynamically.
// It reports whether the mappings changed.
func (ix *esIndex) buildDoc(id string, source []byte, version int64) (*document.Document, bool, error) {
	var src map[string]any
	dec := json.NewDecoder(bytes.NewReader(source))
	dec.UseNumber()
	if err := dec.Decode(&src); err != nil || src == nil {
		return nil, false, badRequest("mapper_parsing_exception", "failed to parse document [%s]: not a JSON object", id)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	props, _ := ix.meta.Mappings["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		ix.meta.Mappings["properties"] = props
	}
	dynamic := fmt.Sprint(ix.meta.Mappings["dynamic"])
	// Work on a copy so a failing document leaves the mappings untouched.
	work := deepCopy(props).(map[string]any)
	doc := document.NewDocument(id)
	names := map[string]bool{}
	changed := false
	if err := addObject(doc, work, src, "", nil, names, &changed, dynamic, id); err != nil {
		return nil, false, err
	}
	for n := range names {
		doc.AddField(document.NewTextFieldCustom(fFieldNames, nil, []byte(n), bindex.IndexField, keywordAnalyzer))
	}
	compact, _ := json.Marshal(src)
	doc.AddField(document.NewTextFieldWithIndexingOptions(fSource, nil, compact, bindex.StoreField))
	doc.AddField(document.NewTextFieldWithIndexingOptions(fVersion, nil, []byte(strconv.FormatInt(version, 10)), bindex.StoreField))
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

func addObject(doc *document.Document, props map[string]any, obj map[string]any, prefix string, ap []uint64, names map[string]bool, changed *bool, dynamic, id string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := addValue(doc, props, k, obj[k], prefix, ap, names, changed, dynamic, id); err != nil {
			return err
		}
	}
	return nil
}

func addValue(doc *document.Document, props map[string]any, name string, v any, prefix string, ap []uint64, names map[string]bool, changed *bool, dynamic, id string) error {
	path := prefix + name
	if v == nil {
		return nil
	}
	if arr, ok := v.([]any); ok {
		for i, x := range arr {
			if err := addValue(doc, props, name, x, prefix, append(append([]uint64(nil), ap...), uint64(i)), names, changed, dynamic, id); err != nil {
				return err
			}
		}
		return nil
	}
	if prefix == "" && metadataFields[name] {
		return badRequest("mapper_parsing_exception", "Field [%s] is a metadata field and cannot be added inside a document. Use the index API request parameters.", name)
	}
	p, mapped := props[name].(map[string]any)
	if !mapped {
		if dynamic == "false" {
			return nil
		}
		if dynamic == "strict" {
			return badRequest("strict_dynamic_mapping_exception", "[_doc] mapping set to strict, dynamic introduction of [%s] within [_doc] is not allowed", path)
		}
		p = dynamicMapping(v)
		props[name] = p
		*changed = true
	}
	t, _ := canonicalType(typeOf(p))
	if t == "object" {
		o, ok := v.(map[string]any)
		if !ok {
			return badRequest("mapper_parsing_exception", "object mapping for [%s] tried to parse field [%s] as object, but found a concrete value (document id [%s])", path, path, id)
		}
		sub, _ := p["properties"].(map[string]any)
		if sub == nil {
			sub = map[string]any{}
			p["properties"] = sub
		}
		names[path] = true
		return addObject(doc, sub, o, path+".", ap, names, changed, dynamic, id)
	}
	if err := addLeaf(doc, path, typeOf(p), v, ap, id); err != nil {
		return err
	}
	markNames(names, path)
	if fs, ok := p["fields"].(map[string]any); ok {
		for sn, sv := range fs {
			sp, _ := sv.(map[string]any)
			if ia, ok := sp["ignore_above"]; ok {
				if s, isStr := v.(string); isStr {
					if n, err := strconv.Atoi(fmt.Sprint(ia)); err == nil && len(s) > n {
						continue
					}
				}
			}
			if err := addLeaf(doc, path+"."+sn, typeOf(sp), v, ap, id); err != nil {
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
	return badRequest("mapper_parsing_exception", "failed to parse field [%s] of type [%s] in document with id '%s'. Preview of field's value: '%v'%s", path, typ, id, v, why)
}

func addLeaf(doc *document.Document, path, esType string, v any, ap []uint64, id string) error {
	t, _ := canonicalType(esType)
	if _, isObj := v.(map[string]any); isObj {
		return mapperErr(path, esType, v, id, " (an object where a value was expected)")
	}
	switch t {
	case "text":
		doc.AddField(document.NewTextFieldCustom(path, ap, []byte(scalarString(v)), bindex.IndexField|bindex.IncludeTermVectors, textAnalyzer))
	case "keyword":
		doc.AddField(document.NewTextFieldCustom(path, ap, []byte(scalarString(v)), bindex.IndexField|bindex.DocValues, keywordAnalyzer))
	case "long", "double":
		f, ok := toFloat(v)
		if !ok {
			return mapperErr(path, esType, v, id, "")
		}
		if t == "long" {
			if f != math.Trunc(f) {
				f = math.Trunc(f)
			}
		}
		doc.AddField(document.NewNumericFieldWithIndexingOptions(path, ap, f, bindex.IndexField|bindex.DocValues))
	case "date":
		tm, err := parseDateValue(v)
		if err != nil {
			return mapperErr(path, esType, v, id, "")
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
			return mapperErr(path, esType, v, id, "")
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

func (s *server) doc(r *http.Request, target, op, id string, body []byte) (int, any, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if op != "_doc" || id == "" {
			return 0, nil, unsupported(r)
		}
		ixs, err := s.resolveStrict(target)
		if err != nil {
			return 0, nil, err
		}
		if len(ixs) != 1 {
			return 0, nil, badRequest("illegal_argument_exception", "alias [%s] has more than one index associated with it, can't execute a single index op", target)
		}
		src, ver, ok, err := ixs[0].getDoc(id)
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			if r.Method == http.MethodHead {
				return 0, nil, &esError{status: 404, typ: "not_found", reason: id}
			}
			return 404, map[string]any{"_index": ixs[0].name, "_id": id, "found": false}, nil
		}
		return 200, map[string]any{"_index": ixs[0].name, "_id": id, "_version": ver, "_seq_no": ver - 1, "_primary_term": 1, "found": true, "_source": src}, nil
	case http.MethodPut, http.MethodPost, http.MethodDelete:
	default:
		return 0, nil, unsupported(r)
	}
	action := "index"
	if op == "_create" || r.URL.Query().Get("op_type") == "create" {
		action = "create"
	}
	if r.Method == http.MethodDelete {
		action = "delete"
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
		o := &writeOp{action: action, id: id}
		if err := ixs[0].apply([]*writeOp{o}); err != nil {
			return 0, nil, err
		}
		return o.status, writeResult(ixs[0].name, o), nil
	}
	if id == "" {
		if r.Method != http.MethodPost || op != "_doc" {
			return 0, nil, unsupported(r)
		}
		id = randomID()
	}
	ix, err := s.writeTarget(target)
	if err != nil {
		return 0, nil, err
	}
	o := &writeOp{action: action, id: id, source: body}
	if err := ix.apply([]*writeOp{o}); err != nil {
		return 0, nil, err
	}
	if o.err != nil {
		return 0, nil, o.err
	}
	return o.status, writeResult(ix.name, o), nil
}

func writeResult(index string, o *writeOp) map[string]any {
	m := map[string]any{"_index": index, "_id": o.id, "_version": o.version, "result": o.result,
		"_shards": map[string]any{"total": 1, "successful": 1, "failed": 0}, "_seq_no": o.seq, "_primary_term": 1, "status": o.status}
	return m
}

func (s *server) bulk(r *http.Request, defaultIndex string, body []byte) (int, any, error) {
	start := time.Now()
	type entry struct {
		action string
		index  string
		op     *writeOp
	}
	var entries []*entry
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var hdr map[string]map[string]any
		if err := json.Unmarshal(raw, &hdr); err != nil || len(hdr) != 1 {
			return 0, nil, badRequest("illegal_argument_exception", "Malformed action/metadata line [%d], expected a simple object with one action", line)
		}
		for action, meta := range hdr {
			e := &entry{action: action, index: defaultIndex}
			if v, ok := meta["_index"].(string); ok && v != "" {
				e.index = v
			}
			id, _ := meta["_id"].(string)
			if e.index == "" {
				return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: index is missing;")
			}
			switch action {
			case "index", "create", "update":
				if !sc.Scan() {
					return 0, nil, badRequest("illegal_argument_exception", "The bulk request must be terminated by a newline [\\n]; action [%s] on line [%d] has no source", action, line)
				}
				line++
				src := append([]byte(nil), bytes.TrimSpace(sc.Bytes())...)
				if id == "" && action != "update" {
					id = randomID()
				}
				e.op = &writeOp{action: action, id: id, source: src}
			case "delete":
				e.op = &writeOp{action: action, id: id}
			default:
				return 0, nil, badRequest("illegal_argument_exception", "Malformed action/metadata line [%d], expected one of [create, delete, index, update] but found [%s]", line, action)
			}
			entries = append(entries, e)
		}
	}
	// Group by target index, keeping order inside each.
	groups := map[string][]*writeOp{}
	targets := map[string]*esIndex{}
	for _, e := range entries {
		ix, ok := targets[e.index]
		if !ok {
			var err error
			if e.action == "delete" {
				ixs := s.resolve(e.index)
				if len(ixs) == 1 {
					ix = ixs[0]
				} else if len(ixs) == 0 {
					err = notFoundIndex(e.index)
				} else {
					err = badRequest("illegal_argument_exception", "no write index is defined for alias [%s]", e.index)
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
		}
		items = append(items, map[string]any{e.action: res})
	}
	return 200, map[string]any{"took": time.Since(start).Milliseconds(), "errors": hasErr, "items": items}, nil
}
