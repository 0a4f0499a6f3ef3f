package demosite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// The demo site's streams: a deterministic firehose of StreamEvent(1..n), filtered by
// keywords, as server-sent events and as NDJSON.
//
//	GET /stream/sse      text/event-stream; id: is the event number, resumes after Last-Event-ID
//	GET /stream/ndjson   one JSON object a line; seq is the event number, resumes after ?since=
//	GET /stream/stats    {"open": N, "max_open": N, "connects": N} of both streams
//
// Query parameters of both streams:
//
//	q=go,rust      only events with one of these words in their title or tags (any case)
//	n=200          events in the stream; after the last the connection stays open, idle
//	every=5ms      time between events
//	drop_after=K   the switch that drops the connection after K events on it
//	bad_every=K    every K-th event is malformed (its JSON cut short)

// streamWords are the words event titles and tags draw from.
var streamWords = []string{"go", "rust", "python", "kafka", "redis", "temporal", "linux", "postgres", "wasm", "zig", "sqlite"}

// StreamEvent is event i of the demo streams.
func StreamEvent(i int) map[string]any {
	a := streamWords[i%len(streamWords)]
	b := streamWords[(i*7+3)%len(streamWords)]
	lang := "en"
	if i%3 == 0 {
		lang = "de"
	}
	return map[string]any{
		"id":    i,
		"title": fmt.Sprintf("Story %d on %s and %s", i, a, b),
		"tags":  []string{a, b},
		"lang":  lang,
		"text":  fmt.Sprintf("Body of story %d.", i),
	}
}

// StreamMatches lists the events of a stream of n that a keyword query returns (all
// of them without keywords).
func StreamMatches(n int, keywords []string) []int {
	var out []int
	for i := 1; i <= n; i++ {
		if streamMatch(StreamEvent(i), keywords) {
			out = append(out, i)
		}
	}
	return out
}

func streamMatch(ev map[string]any, keywords []string) bool {
	if len(keywords) == 0 {
		return true
	}
	words := strings.FieldsFunc(strings.ToLower(ev["title"].(string)+" "+strings.Join(ev["tags"].([]string), " ")),
		func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, k := range keywords {
		for _, w := range words {
			if strings.EqualFold(strings.TrimSpace(k), w) {
				return true
			}
		}
	}
	return false
}

// streamStats counts the stream connections, to show that subscribers share one.
type streamStats struct {
	mu       sync.Mutex
	Open     int `json:"open"`
	MaxOpen  int `json:"max_open"`
	Connects int `json:"connects"`
}

func (st *streamStats) enter() {
	st.mu.Lock()
	st.Open++
	st.Connects++
	st.MaxOpen = max(st.MaxOpen, st.Open)
	st.mu.Unlock()
}

func (st *streamStats) leave() {
	st.mu.Lock()
	st.Open--
	st.mu.Unlock()
}

func (s *site) addStreams() {
	st := &streamStats{}
	s.mux.HandleFunc("GET /stream/sse", func(w http.ResponseWriter, r *http.Request) {
		s.serveStream(w, r, st, true)
	})
	s.mux.HandleFunc("GET /stream/ndjson", func(w http.ResponseWriter, r *http.Request) {
		s.serveStream(w, r, st, false)
	})
	s.mux.HandleFunc("GET /stream/stats", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		b, _ := json.Marshal(st)
		st.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
}

func (s *site) serveStream(w http.ResponseWriter, r *http.Request, st *streamStats, sse bool) {
	q := r.URL.Query()
	num := func(name string, def int) int {
		if n, err := strconv.Atoi(q.Get(name)); err == nil {
			return n
		}
		return def
	}
	n, dropAfter, badEvery := num("n", 200), num("drop_after", 0), num("bad_every", 0)
	every := 5 * time.Millisecond
	if d, err := time.ParseDuration(q.Get("every")); err == nil {
		every = d
	}
	var keywords []string
	if v := q.Get("q"); v != "" {
		keywords = strings.Split(v, ",")
	}
	after := r.Header.Get("Last-Event-ID")
	if !sse {
		after = q.Get("since")
	}
	from, _ := strconv.Atoi(after)
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	st.enter()
	defer st.leave()
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		fmt.Fprint(w, "retry: 100\n\n")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	flusher.Flush()
	tick := time.NewTicker(every)
	defer tick.Stop()
	sent := 0
	for i := from + 1; ; i++ {
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-s.quit:
			return
		}
		if i > n {
			// The end of the demo's history: a live stream would wait for news.
			i = n
			if sse {
				fmt.Fprint(w, ": idle\n\n")
				flusher.Flush()
			}
			continue
		}
		ev := StreamEvent(i)
		if !streamMatch(ev, keywords) {
			continue
		}
		data, _ := json.Marshal(ev)
		if !sse {
			ev["seq"] = i
			data, _ = json.Marshal(ev)
		}
		if badEvery > 0 && i%badEvery == 0 {
			// Cut the closing quote and brace: the JSON breaks, the words keywords
			// match (tags, title) survive.
			data = data[:len(data)-2]
		}
		if sse {
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", i, data)
		} else {
			fmt.Fprintf(w, "%s\n", data)
		}
		flusher.Flush()
		sent++
		if dropAfter > 0 && sent >= dropAfter {
			return // the switch: drop the connection mid-stream
		}
	}
}
