// Package itemjson writes an item's data (a map[string]any) as encoding/json.Marshal
// does, byte for byte, without the two allocations per field encoding/json makes walking
// a map by reflection. Its fields are most of an item's bytes, and every item is encoded
// at least twice: for its content hash (dedup) and by a sink.
package itemjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
)

// Encoder appends JSON to Buf.
type Encoder struct {
	Buf  bytes.Buffer
	enc  *json.Encoder
	keys []string
}

var pool = sync.Pool{New: func() any { return new(Encoder) }}

// Get is an empty Encoder, reused from an earlier Release when there is one.
func Get() *Encoder { return pool.Get().(*Encoder) }

// Release hands e back for reuse, unless a huge value grew its buffer past what is worth
// keeping. Nothing read from Buf may be used after.
func (e *Encoder) Release() {
	if e.Buf.Cap() <= 4<<20 {
		e.Buf.Reset()
		pool.Put(e)
	}
}

// Value appends v as json.Marshal writes it.
func (e *Encoder) Value(v any) error {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.Buf)
	}
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	e.Buf.Truncate(e.Buf.Len() - 1) // Encode ends each value with a newline
	return nil
}

// Map appends m as json.Marshal writes it: keys sorted, values as Value writes them.
func (e *Encoder) Map(m map[string]any) error {
	if m == nil {
		e.Buf.WriteString("null")
		return nil
	}
	e.keys = e.keys[:0]
	for k := range m {
		e.keys = append(e.keys, k)
	}
	slices.Sort(e.keys)
	e.Buf.WriteByte('{')
	for i, k := range e.keys {
		if i > 0 {
			e.Buf.WriteByte(',')
		}
		if plainKey(k) {
			e.Buf.WriteByte('"')
			e.Buf.WriteString(k)
			e.Buf.WriteByte('"')
		} else if err := e.Value(k); err != nil {
			return err
		}
		e.Buf.WriteByte(':')
		if err := e.Value(m[k]); err != nil {
			return err
		}
	}
	e.Buf.WriteByte('}')
	return nil
}

// plainKey reports whether JSON writes k as it is, between quotes: letters, digits, _
// and -, as the keys of tasks' data are.
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
