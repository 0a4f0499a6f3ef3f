package stream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Event is one event of a stream: its position (SSE id, NDJSON position field) and its
// decoded fields, or the reason it could not be decoded and its raw text.
type Event struct {
	ID   string         `json:"id,omitempty"`
	Obj  map[string]any `json:"-"`
	Raw  string         `json:"raw,omitempty"`
	Err  string         `json:"err,omitempty"` // malformed: why
	Line int            `json:"line,omitempty"`
}

// maxLine bounds one SSE line or NDJSON line.
const maxLine = 1 << 20

// readSSE parses a text/event-stream body (the WHATWG rules: id:, data:, retry:, event:,
// comments, blank line dispatches) and calls emit for every event with data. retry is
// called with the reconnection delay the server asks for. lastID is the id in force
// when the stream starts (the Last-Event-ID sent).
func readSSE(r io.Reader, lastID string, emit func(Event), retry func(time.Duration)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var data strings.Builder
	hasData := false
	id := lastID
	line := 0
	for sc.Scan() {
		line++
		l := strings.TrimSuffix(sc.Text(), "\r")
		if l == "" {
			if hasData {
				emit(decode(id, strings.TrimSuffix(data.String(), "\n"), line))
			}
			data.Reset()
			hasData = false
			continue
		}
		if strings.HasPrefix(l, ":") {
			continue // a comment, often a keep-alive
		}
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				id = value
			}
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				retry(time.Duration(ms) * time.Millisecond)
			}
		}
	}
	return sc.Err()
}

// readNDJSON parses newline-delimited JSON, one event per non-empty line, its position
// the value of posField (none: events have no position).
func readNDJSON(r io.Reader, posField string, emit func(Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		ev := decode("", string(b), line)
		if ev.Err == "" && posField != "" {
			ev.ID = text(ev.Obj[posField])
		}
		emit(ev)
	}
	return sc.Err()
}

// decode reads an event's data as a JSON object.
func decode(id, data string, line int) Event {
	ev := Event{ID: id, Line: line}
	dec := json.NewDecoder(strings.NewReader(data))
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return malformed(ev, data, fmt.Sprintf("not a JSON object: %v", err))
	}
	if dec.More() {
		return malformed(ev, data, "more than one JSON value")
	}
	if obj == nil {
		return malformed(ev, data, "null instead of a JSON object")
	}
	ev.Obj = obj
	return ev
}

// malformed keeps the reason and a bounded prefix of the raw text.
func malformed(ev Event, data, why string) Event {
	if len(data) > 200 {
		data = data[:200] + "…"
	}
	ev.Err, ev.Raw = why, data
	return ev
}
