package eslite

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2/search/query"
)

// pointInTime is an open point in time: the indexes it reads and the documents they
// held when it opened (each at its sequence number). Searches through it see those
// documents only, so writes made since are hidden; a document changed or deleted since
// is hidden too rather than shown as it was, since eslite keeps no old versions.
type pointInTime struct {
	indexes []string
	docs    map[string]int64 // index \x00 id → sequence number
	expires time.Time
}

// holds reports whether the point in time saw document id of index at sequence seq.
func (p *pointInTime) holds(index, id string, seq int64) bool {
	s, ok := p.docs[index+"\x00"+id]
	return ok && s == seq
}

type pits struct {
	mu   sync.Mutex
	open map[string]*pointInTime
}

// keepAlive reads a keep_alive time value such as 5m.
func keepAlive(v string) (time.Duration, error) {
	ms, err := parseDuration(v)
	if err != nil {
		return 0, parsingErr("failed to parse setting [keep_alive] with value [%s] as a time value: unit is missing or unrecognized", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// openPIT opens a point in time over the indexes expr names.
func (s *server) openPIT(r *http.Request, expr string) (int, any, error) {
	ka := r.URL.Query().Get("keep_alive")
	if ka == "" {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: [keep_alive] is not specified;")
	}
	d, err := keepAlive(ka)
	if err != nil {
		return 0, nil, err
	}
	t, err := s.searchTarget(r, expr)
	if err != nil {
		return 0, nil, err
	}
	p, err := snapshot(t, d)
	if err != nil {
		return 0, nil, err
	}
	id := newContextID()
	s.pits.mu.Lock()
	if s.pits.open == nil {
		s.pits.open = map[string]*pointInTime{}
	}
	s.pits.open[id] = p
	s.pits.mu.Unlock()
	n := len(t.ixs)
	return 200, map[string]any{"id": id, "_shards": map[string]any{"total": n, "successful": n, "skipped": 0, "failed": 0}}, nil
}

// snapshot records which documents (and which version of each) the target's indexes
// hold now, for a point in time or a scroll that lives for d.
func snapshot(t *target, d time.Duration) (*pointInTime, error) {
	found, err := matchDocs(t, query.NewMatchAllQuery(), false)
	if err != nil {
		return nil, err
	}
	p := &pointInTime{docs: make(map[string]int64, len(found)), expires: time.Now().Add(d)}
	for _, ix := range t.ixs {
		p.indexes = append(p.indexes, ix.name)
	}
	for _, doc := range found {
		p.docs[doc.ix.name+"\x00"+doc.id] = doc.seq
	}
	return p, nil
}

// newContextID is the id of a new point in time or scroll: 24 random bytes, base64.
func newContextID() string {
	var raw [24]byte
	_, _ = rand.Read(raw[:])
	return base64.URLEncoding.EncodeToString(raw[:])
}

// pit returns the open point in time a search names, extending its life by keep_alive
// when the search gives one.
func (s *server) pit(spec any) (*pointInTime, string, error) {
	m, ok := spec.(map[string]any)
	id, _ := m["id"].(string)
	if !ok || id == "" {
		return nil, "", parsingErr("[pit] requires an [id]")
	}
	var extend time.Duration
	if ka, ok := m["keep_alive"]; ok {
		d, err := keepAlive(scalarString(ka))
		if err != nil {
			return nil, "", err
		}
		extend = d
	}
	s.pits.mu.Lock()
	defer s.pits.mu.Unlock()
	p := s.pits.open[id]
	if p == nil || time.Now().After(p.expires) {
		delete(s.pits.open, id)
		return nil, "", &esError{status: 404, typ: "search_context_missing_exception", reason: "No search context found for id [" + id + "]"}
	}
	if extend > 0 {
		p.expires = time.Now().Add(extend)
	}
	return p, id, nil
}

// closePIT frees the points in time a body names: {"id": ...}.
func (s *server) closePIT(body []byte) (int, any, error) {
	req, err := decodeObject(body)
	if err != nil {
		return 0, nil, err
	}
	id, _ := req["id"].(string)
	if id == "" {
		return 0, nil, badRequest("action_request_validation_exception", "Validation Failed: 1: no pit ids specified;")
	}
	s.pits.mu.Lock()
	_, ok := s.pits.open[id]
	delete(s.pits.open, id)
	s.pits.mu.Unlock()
	if !ok {
		return 404, map[string]any{"succeeded": true, "num_freed": 0}, nil
	}
	return 200, map[string]any{"succeeded": true, "num_freed": 1}, nil
}

// pitIndexes is the index expression a search through p reads.
func (p *pointInTime) pitIndexes() string {
	return strings.Join(p.indexes, ",")
}
