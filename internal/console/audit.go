package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
	kafkasink "github.com/trawlerhq/trawler/internal/storage/kafka"
)

// The audit trail: every state-changing call and every reveal of pool values, who made
// it and how it ended, appended to a capped Redis stream and, when the console has
// Kafka, to the topic trawler.audit. It holds ids and names, never a token or a pool
// value.
const (
	AuditStream = "trawler:audit"
	// AuditBiz makes the Kafka topic trawler.audit (kafkasink.Topic).
	AuditBiz = "audit"
	// auditCap is about how many entries the stream keeps (XADD MAXLEN ~).
	auditCap = 100_000
)

// AuditEntry is one audited call.
type AuditEntry struct {
	ID     string    `json:"id,omitempty"` // the stream entry's id
	Time   time.Time `json:"time"`
	Who    string    `json:"who"`  // principal id
	Name   string    `json:"name"` // principal name
	Role   Role      `json:"role"`
	Tenant string    `json:"tenant,omitempty"` // the tenant acted on, when known
	Action string    `json:"action"`           // the route pattern, or the command: "token create"
	Target string    `json:"target,omitempty"` // the path's ids: "id=nightly"
	Source string    `json:"source"`           // the caller's address, or "cli"
	Status int       `json:"status"`           // the answer's HTTP status (0 for a command)
	Reveal bool      `json:"reveal,omitempty"` // pool values were asked for
}

// Audit appends entries to the trail.
type Audit struct {
	rdb   redis.UniversalClient
	log   *slog.Logger
	kafka chan crawl.Item // to the Kafka writer, when there is one
	done  sync.WaitGroup
}

// NewAudit returns the trail kept in rdb; with brokers, entries go to Kafka too, in the
// background (an unreachable Kafka delays no call; its errors are logged).
func NewAudit(rdb redis.UniversalClient, brokers []string, auth kafkasink.Auth, log *slog.Logger) (*Audit, error) {
	a := &Audit{rdb: rdb, log: log}
	if len(brokers) == 0 {
		return a, nil
	}
	sink, err := kafkasink.Open(kafkasink.Config{Brokers: brokers, Auth: auth})
	if err != nil {
		return nil, fmt.Errorf("audit trail: %w", err)
	}
	a.kafka = make(chan crawl.Item, 1000)
	a.done.Add(1)
	go func() {
		defer a.done.Done()
		defer sink.Close()
		for it := range a.kafka {
			if err := sink.Write(context.Background(), []crawl.Item{it}); err != nil {
				log.Error("audit trail: write to Kafka topic "+kafkasink.Topic(AuditBiz), "err", err)
			}
		}
	}()
	return a, nil
}

// Record appends e to the stream (and queues it for Kafka).
func (a *Audit) Record(ctx context.Context, e AuditEntry) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	raw, _ := json.Marshal(e)
	id, err := a.rdb.XAdd(ctx, &redis.XAddArgs{Stream: AuditStream, MaxLen: auditCap, Approx: true, Values: []any{"entry", raw}}).Result()
	if err != nil {
		return fmt.Errorf("audit trail: append to Redis stream %s: %w", AuditStream, err)
	}
	if a.kafka != nil {
		e.ID = id
		var data map[string]any
		raw, _ = json.Marshal(e)
		_ = json.Unmarshal(raw, &data)
		select {
		case a.kafka <- crawl.Item{Biz: AuditBiz, Key: id, TS: e.Time, Tenant: e.Tenant, Data: data}:
		default:
			a.log.Error("audit trail: the Kafka queue is full; entry " + id + " is in Redis only")
		}
	}
	return nil
}

// Read returns up to n entries from since on, oldest first (n ≤ 0: every one).
func (a *Audit) Read(ctx context.Context, since time.Time, n int) ([]AuditEntry, error) {
	start := "-"
	if !since.IsZero() {
		start = strconv.FormatInt(since.UnixMilli(), 10)
	}
	var msgs []redis.XMessage
	var err error
	if n > 0 {
		msgs, err = a.rdb.XRangeN(ctx, AuditStream, start, "+", int64(n)).Result()
	} else {
		msgs, err = a.rdb.XRange(ctx, AuditStream, start, "+").Result()
	}
	if err != nil {
		return nil, fmt.Errorf("audit trail: read Redis stream %s: %w", AuditStream, err)
	}
	return entries(msgs)
}

// Last returns the newest n entries, oldest first.
func (a *Audit) Last(ctx context.Context, n int) ([]AuditEntry, error) {
	msgs, err := a.rdb.XRevRangeN(ctx, AuditStream, "+", "-", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("audit trail: read Redis stream %s: %w", AuditStream, err)
	}
	slices.Reverse(msgs)
	return entries(msgs)
}

// entries decodes stream messages.
func entries(msgs []redis.XMessage) ([]AuditEntry, error) {
	out := make([]AuditEntry, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["entry"].(string)
		var e AuditEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return nil, fmt.Errorf("audit trail: entry %s is not JSON: %w", m.ID, err)
		}
		e.ID = m.ID
		out = append(out, e)
	}
	return out, nil
}

// Close waits for the entries queued for Kafka to be written.
func (a *Audit) Close() {
	if a.kafka != nil {
		close(a.kafka)
		a.done.Wait()
	}
}

// audited reports whether a call is recorded: it changes something, or asks for pool
// values.
func audited(pattern string, r *http.Request) bool {
	return !readAllowed(pattern, r.Method) || revealParam(r)
}

func revealParam(r *http.Request) bool {
	v := r.URL.Query().Get("reveal")
	return v == "1" || v == "true"
}

type noteKey struct{}

// auditNote is what a handler tells the trail about its call.
type auditNote struct{ tenant string }

// noteTenant tells the trail which tenant a call acts on.
func noteTenant(r *http.Request, tenant string) {
	if n, ok := r.Context().Value(noteKey{}).(*auditNote); ok {
		n.tenant = tenantName(tenant)
	}
}

// statusWriter remembers the status a handler answers.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

var pathNames = regexp.MustCompile(`\{([a-z]+)(?:\.\.\.)?\}`)

// auditTarget is the path's ids of a call to the route of pattern: "id=nightly".
func auditTarget(pattern string, r *http.Request) string {
	var parts []string
	for _, m := range pathNames.FindAllStringSubmatch(pattern, -1) {
		parts = append(parts, m[1]+"="+r.PathValue(m[1]))
	}
	return strings.Join(parts, " ")
}

// sourceAddr is the host of the caller's address.
func sourceAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// auditCall serves h and records the call when it is audited.
func (s *Server) auditCall(pattern string, p *Principal, w http.ResponseWriter, r *http.Request, h http.Handler) {
	if s.audit == nil || !audited(pattern, r) {
		h.ServeHTTP(w, r)
		return
	}
	note := &auditNote{}
	sw := &statusWriter{ResponseWriter: w}
	if pv := r.PathValue("tenant"); pv != "" {
		note.tenant = tenantName(pv)
	}
	h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), noteKey{}, note)))
	e := AuditEntry{Who: p.ID, Name: p.Name, Role: p.Role, Tenant: note.tenant, Action: pattern, Target: auditTarget(pattern, r),
		Source: sourceAddr(r), Status: sw.status, Reveal: revealParam(r)}
	if e.Tenant == "" && p.Scoped() && len(p.Tenants) == 1 {
		e.Tenant = p.Tenants[0]
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := s.audit.Record(ctx, e); err != nil {
		s.cfg.Log.Error("console: audit", "action", pattern, "who", p.ID, "err", err)
	}
}

// auditLog: GET /api/audit?since=&n= — the audit trail from since (RFC 3339, or a
// duration back from now such as 24h; default every entry kept), oldest first, up to n
// entries (default 1000); GET /api/audit?last=N — the newest N, oldest first. Admins
// only.
func (s *Server) auditLog(w http.ResponseWriter, r *http.Request) {
	if s.audit == nil {
		writeError(w, http.StatusServiceUnavailable, "no audit trail here: it lives in Redis, and none is configured (start the console with --redis HOST:PORT or TRAWLER_REDIS)", "redis")
		return
	}
	if r.URL.Query().Has("last") {
		n, ok := intParam(w, r, "last", 50, 1, auditCap)
		if !ok {
			return
		}
		entries, err := s.audit.Last(r.Context(), n)
		if err != nil {
			writeError(w, http.StatusBadGateway, err.Error(), "")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
		return
	}
	since, err := ParseSince(r.URL.Query().Get("since"), time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "since")
		return
	}
	n, ok := intParam(w, r, "n", 1000, 1, auditCap)
	if !ok {
		return
	}
	entries, err := s.audit.Read(r.Context(), since, n)
	if err != nil {
		writeError(w, http.StatusBadGateway, err.Error(), "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

// ParseSince reads a since value: RFC 3339, or a duration back from now ("24h"); ""
// is the zero time (everything).
func ParseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("since " + strconv.Quote(v) + ": give a time in RFC 3339 (2025-01-31T08:00:00Z) or a duration back from now (24h, 90m)")
}
