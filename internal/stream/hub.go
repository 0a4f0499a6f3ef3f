// Package stream keeps long-lived upstream connections to streaming sources (server-sent
// events, newline-delimited JSON) and shares them between subscriptions. Subscriptions to
// the same source ride one connection whose query is the union of their keywords (up to
// the source's term limit, then another connection); every event goes to each
// subscription it matches. A subscription is read in windows (the generic.stream task
// runs one window per input); between windows it stays subscribed and queues its events
// for a grace period, after which it is dropped, and a connection closes when its last
// subscription leaves. Positions (SSE ids, NDJSON position fields) make every change of
// the query, every dropped connection and every retried window resume without losing or
// repeating an event.
package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Source is one upstream stream and how to talk to it.
type Source struct {
	URL    string `json:"url"`    // without the keyword and position query parameters
	Format string `json:"format"` // sse or ndjson
	// QueryParam carries the union of the keywords, comma-separated; empty: the source
	// is not filtered upstream and subscriptions filter locally.
	QueryParam string `json:"query_param,omitempty"`
	// PositionParam (NDJSON) is the query parameter that resumes after a position;
	// PositionField is the event field holding it.
	PositionParam string `json:"position_param,omitempty"`
	PositionField string `json:"position_field,omitempty"`
	// MaxTerms is how many keywords one connection's query may hold (0: no limit).
	MaxTerms int         `json:"max_terms,omitempty"`
	Header   http.Header `json:"header,omitempty"`
	// Grace is how long a subscription stays without a window reading it (a worker
	// cut off from Temporal starts no new windows) before it is dropped, and with the
	// last one the connection.
	Grace time.Duration `json:"grace,omitempty"`
}

// Formats the hub reads.
const (
	SSE    = "sse"
	NDJSON = "ndjson"
)

// key identifies the connections that may be shared: same URL, format and headers.
func (s Source) key() string {
	return fmt.Sprintf("%s|%s|%s|%s|%s|%v", s.Format, s.URL, s.QueryParam, s.PositionParam, s.PositionField, s.Header)
}

// Info describes a subscription in `trawler status`.
type Info struct {
	Chain  string `json:"chain"`
	Run    string `json:"run"`
	Tenant string `json:"tenant"`
	Step   string `json:"step"`
	Limit  int    `json:"limit,omitempty"`
}

// maxQueue bounds the events a subscription queues between windows; past it the
// subscription is dropped and its next window resumes from its own position.
const maxQueue = 50_000

// Hub is one worker process's set of upstream connections.
type Hub struct {
	client   *http.Client
	log      *slog.Logger
	identity string

	mu      sync.Mutex
	conns   map[string][]*conn // by Source.key
	subs    map[string]*Sub
	nconn   int
	janitor bool
	rec     *recorder
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	host, _ := os.Hostname()
	return &Hub{client: &http.Client{}, log: slog.Default(), identity: fmt.Sprintf("%d@%s", os.Getpid(), host),
		conns: map[string][]*conn{}, subs: map[string]*Sub{}}
}

// HubService is how a worker hands its hub to the generic.stream task (crawl.Env.Services):
// one hub per worker process, so subscriptions of one source share its connection.
var HubService = crawl.ServiceKey[*Hub]{Name: "stream hub"}

// ErrGone is returned by Next when the subscription was dropped while a window read it
// (its queue overflowed, or it was attached again elsewhere).
var ErrGone = errors.New("stream subscription was dropped; the next window resumes from its position")

// Sub is one subscription: a chain step reading a source with a filter.
type Sub struct {
	id     string
	src    Source
	filter Filter
	info   Info
	conn   *conn

	// last is the position up to which every event of the connection was offered to
	// this subscription; ack is the position the current window started from. pending
	// holds the events handed to windows since ack, queue the ones not handed out yet.
	last, ack string
	pending   []Event
	queue     []Event
	gen       int
	attached  bool
	since     time.Time // attached or detached at
	received  int
	gone      bool
	notify    chan struct{}
}

// conn is one upstream connection.
type conn struct {
	id       string
	src      Source
	subs     map[string]*Sub
	terms    []string // the query now open (nil with all: everything)
	all      bool
	pos      string // the last position read on this connection
	bad      int    // malformed events without a position read since pos
	connects int
	err      string
	kick     chan struct{}
	cancel   context.CancelFunc
}

// Attach starts a window of subscription id reading src with filter from position
// from (the position the previous window ended at; "" for a new subscription reading
// live). A subscription already known resumes: events handed to an unfinished window
// are handed out again, events queued between windows follow. A new one joins the
// connection its keywords fit on, which reopens with the union query from the earliest
// position any of its subscriptions needs. skip counts the events without a position
// (malformed NDJSON lines) the previous window took after from.
func (h *Hub) Attach(src Source, id string, filter Filter, from string, skip int, info Info, received int) (*Sub, error) {
	terms := filter.terms()
	if src.MaxTerms > 0 && len(terms) > src.MaxTerms {
		return nil, fmt.Errorf("subscription has %d keywords, more than the source's max_terms %d; split it into several steps or raise max_terms", len(terms), src.MaxTerms)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.janitor {
		h.janitor = true
		go h.sweep()
	}
	s := h.subs[id]
	if s != nil && (s.src.key() != src.key() || !sameFilter(s.filter, filter)) {
		h.removeLocked(s) // the step's params changed: a new subscription
		s = nil
	}
	if s == nil {
		s = &Sub{id: id, src: src, filter: filter, last: from, ack: from, notify: make(chan struct{}, 1)}
		h.subs[id] = s
		h.placeLocked(s, terms)
	} else {
		// The events handed out after from go out again, but for the first skip of
		// them: events without a position the previous window did take.
		again := func(rest []Event) {
			n := 0
			for n < len(rest) && n < skip && rest[n].ID == "" {
				n++
			}
			s.queue = append(slices.Clone(rest[n:]), s.queue...)
		}
		switch i := slices.IndexFunc(s.pending, func(e Event) bool { return e.ID == from }); {
		case from == s.ack:
			again(s.pending)
		case i >= 0:
			again(s.pending[i+1:])
		default: // a position this hub did not hand out (an older attempt): rewind
			s.queue = nil
			s.last = from
			if Compare(from, s.conn.pos) < 0 {
				s.conn.restart()
			}
		}
		s.pending = nil
		s.ack = from
	}
	s.info, s.received = info, received
	s.gen++
	s.attached, s.since = true, time.Now()
	h.recordLocked(s)
	return s, nil
}

func sameFilter(a, b Filter) bool {
	return slices.Equal(a.terms(), b.terms()) && slices.Equal(a.Fields, b.Fields) && fmt.Sprint(a.Match) == fmt.Sprint(b.Match)
}

// placeLocked puts a new subscription on the first connection of its source its
// keywords fit on (the union within max_terms; a subscription without keywords only
// with others reading everything), or on a new connection.
func (h *Hub) placeLocked(s *Sub, terms []string) {
	key := s.src.key()
	for _, c := range h.conns[key] {
		if !c.fits(terms) {
			continue
		}
		before, beforeAll := c.union()
		c.subs[s.id] = s
		s.conn = c
		if s.last == "" {
			s.last = c.pos // live: from where the connection is
		}
		after, afterAll := c.union()
		if !slices.Equal(before, after) || beforeAll != afterAll || Compare(s.last, c.pos) < 0 {
			c.restart()
		}
		return
	}
	h.nconn++
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{id: fmt.Sprintf("%s#%d", h.identity, h.nconn), src: s.src, subs: map[string]*Sub{s.id: s},
		kick: make(chan struct{}, 1), cancel: cancel}
	s.conn = c
	h.conns[key] = append(h.conns[key], c)
	go h.run(ctx, c)
}

// fits reports whether a subscription with these keywords can ride c.
func (c *conn) fits(terms []string) bool {
	union, all := c.union()
	if all || len(terms) == 0 {
		return all && len(c.subs) > 0
	}
	if c.src.MaxTerms <= 0 {
		return true
	}
	n := len(union)
	for _, t := range terms {
		if !slices.Contains(union, t) {
			n++
		}
	}
	return n <= c.src.MaxTerms
}

// union is the keywords of every subscription on c; all is true when one of them has
// none (it reads everything, so the connection does).
func (c *conn) union() (terms []string, all bool) {
	seen := map[string]bool{}
	for _, s := range c.subs {
		ts := s.filter.terms()
		if len(ts) == 0 {
			return nil, true
		}
		for _, t := range ts {
			seen[t] = true
		}
	}
	for t := range seen {
		terms = append(terms, t)
	}
	sort.Strings(terms)
	return terms, false
}

// restart asks the connection to reopen with its current union and positions.
func (c *conn) restart() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Next hands out up to max queued events, waiting for the first until the deadline.
// It returns early with what it has when ctx ends.
func (h *Hub) Next(ctx context.Context, s *Sub, max int, deadline time.Time) ([]Event, error) {
	h.mu.Lock()
	gen := s.gen
	h.mu.Unlock()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var out []Event
	for {
		h.mu.Lock()
		if s.gone || s.gen != gen {
			h.mu.Unlock()
			return out, ErrGone
		}
		n := min(len(s.queue), max-len(out))
		if n > 0 {
			out = append(out, s.queue[:n]...)
			s.pending = append(s.pending, s.queue[:n]...)
			s.queue = slices.Clone(s.queue[n:])
		}
		h.mu.Unlock()
		if len(out) >= max {
			return out, nil
		}
		select {
		case <-s.notify:
		case <-timer.C:
			return out, nil
		case <-ctx.Done():
			return out, nil
		}
	}
}

// Detach ends a window: the subscription stays and queues events for the next one,
// for the source's grace period.
func (h *Hub) Detach(s *Sub, received int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gone {
		return
	}
	s.attached, s.since, s.received = false, time.Now(), received
	h.recordLocked(s)
}

// Unsubscribe removes a subscription (it reached its limit); its connection reopens
// with the remaining subscriptions' query, or closes when it was the last.
func (h *Hub) Unsubscribe(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.subs[s.id]; cur == s {
		h.removeLocked(s)
	}
}

func (h *Hub) removeLocked(s *Sub) {
	delete(h.subs, s.id)
	s.gone = true
	select {
	case s.notify <- struct{}{}:
	default:
	}
	if h.rec != nil {
		h.rec.forget(s.id)
	}
	c := s.conn
	before, beforeAll := c.union()
	delete(c.subs, s.id)
	if len(c.subs) == 0 {
		c.cancel()
		key := c.src.key()
		h.conns[key] = slices.DeleteFunc(h.conns[key], func(x *conn) bool { return x == c })
		if len(h.conns[key]) == 0 {
			delete(h.conns, key)
		}
		return
	}
	after, afterAll := c.union()
	if !slices.Equal(before, after) || beforeAll != afterAll {
		c.restart()
	}
}

// sweep drops subscriptions no window has read for their grace period: their chain
// ended, or this worker lost Temporal and starts no new windows, so it stops consuming.
func (h *Hub) sweep() {
	for range time.Tick(100 * time.Millisecond) {
		h.mu.Lock()
		for _, s := range h.subs {
			if !s.attached && time.Since(s.since) > s.src.Grace {
				h.log.Info("stream subscription dropped after its grace period without a window", "sub", s.id, "grace", s.src.Grace)
				h.removeLocked(s)
			}
		}
		h.mu.Unlock()
	}
}

// Connections counts the open upstream connections of a source.
func (h *Hub) Connections(src Source) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns[src.key()])
}

// run keeps c connected until its last subscription leaves.
func (h *Hub) run(ctx context.Context, c *conn) {
	wait := 500 * time.Millisecond // the SSE retry the server asked for, or the default
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		h.mu.Lock()
		terms, all := c.union()
		from := c.resumeFrom()
		skipBad := 0
		if from == c.pos {
			skipBad = c.bad // malformed lines already routed after this position
		} else {
			c.bad = 0
		}
		c.pos = from
		c.terms, c.all = terms, all
		c.connects++
		h.mu.Unlock()

		rctx, cancel := context.WithCancel(ctx)
		kicked := make(chan bool, 1)
		go func() {
			select {
			case <-c.kick:
				kicked <- true
				cancel()
			case <-rctx.Done():
				kicked <- false
			}
		}()
		err := h.read(rctx, c, terms, all, from, &skipBad, &wait)
		cancel()
		if <-kicked {
			backoff = 0
			continue // the query or a position changed: reopen at once
		}
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		if err != nil {
			c.err = err.Error()
			backoff = min(max(2*backoff, wait), 10*time.Second)
		} else {
			c.err = ""
			backoff = wait // the server ended the stream: reconnect after its retry
		}
		h.mu.Unlock()
		select {
		case <-time.After(backoff):
		case <-c.kick:
		case <-ctx.Done():
			return
		}
	}
}

// resumeFrom is the earliest position a subscription of c still needs.
func (c *conn) resumeFrom() string {
	from, set := "", false
	for _, s := range c.subs {
		if s.last == "" {
			continue
		}
		if !set || Compare(s.last, from) < 0 {
			from, set = s.last, true
		}
	}
	return from
}

// read opens the upstream request and routes its events until it ends.
func (h *Hub) read(ctx context.Context, c *conn, terms []string, all bool, from string, skipBad *int, wait *time.Duration) error {
	u, err := url.Parse(c.src.URL)
	if err != nil {
		return err
	}
	q := u.Query()
	if c.src.QueryParam != "" && !all && len(terms) > 0 {
		q.Set(c.src.QueryParam, strings.Join(terms, ","))
	}
	if c.src.Format == NDJSON && c.src.PositionParam != "" && from != "" {
		q.Set(c.src.PositionParam, from)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for k, v := range c.src.Header {
		req.Header[k] = v
	}
	if c.src.Format == SSE {
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Cache-Control", "no-cache")
		if from != "" {
			req.Header.Set("Last-Event-ID", from)
		}
	} else {
		req.Header.Set("Accept", "application/x-ndjson")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: status %d %s", u, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	h.mu.Lock()
	c.err = ""
	h.mu.Unlock()
	emit := func(ev Event) { h.route(c, ev, skipBad) }
	if c.src.Format == SSE {
		err = readSSE(resp.Body, from, emit, func(d time.Duration) { *wait = d })
	} else {
		err = readNDJSON(resp.Body, c.src.PositionField, emit)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// route offers one event to every subscription of c that has not seen its position.
func (h *Hub) route(c *conn, ev Event, skipBad *int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.ID == "" && ev.Err != "" {
		if *skipBad > 0 {
			*skipBad-- // routed before the connection dropped
			return
		}
		c.bad++
	}
	if ev.ID != "" {
		c.pos, c.bad = ev.ID, 0
	}
	for _, s := range c.subs {
		if ev.ID != "" {
			if s.last != "" && Compare(ev.ID, s.last) <= 0 {
				continue // already offered to s (a replay for another subscription)
			}
			s.last = ev.ID
		}
		var wants bool
		if ev.Err != "" {
			wants = s.filter.matchesRaw(ev.Raw)
		} else {
			wants = s.filter.Matches(ev.Obj)
		}
		if !wants {
			continue
		}
		s.queue = append(s.queue, ev)
		if len(s.queue) > maxQueue {
			h.log.Warn("stream subscription dropped: too many events queued between windows", "sub", s.id, "queued", len(s.queue))
			h.removeLocked(s)
			continue
		}
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
}
