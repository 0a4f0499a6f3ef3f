// Package itemjson writes an item's data (a map[string]any) as encoding/json.Marshal
// does, byte for byte, without the two allocations per field encoding/json makes walking
// a map by reflection. Its fields are most of an item's bytes, and every item is encoded
// at least twice: for its content hash (dedup) and by a sink.
package itemjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
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

// Value appends v as json.Marshal writes it. Strings, integers, booleans and nil, most
// of an item's fields, are written here; anything else by encoding/json.
func (e *Encoder) Value(v any) error {
	switch v := v.(type) {
	case nil:
		e.Buf.WriteString("null")
		return nil
	case string:
		e.String(v)
		return nil
	case int:
		e.Int(int64(v))
		return nil
	case int64:
		e.Int(v)
		return nil
	case bool:
		e.Buf.WriteString(strconv.FormatBool(v))
		return nil
	}
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

// Int appends n as json.Marshal writes an integer.
func (e *Encoder) Int(n int64) { e.Buf.Write(strconv.AppendInt(e.Buf.AvailableBuffer(), n, 10)) }

// String appends s as json.Marshal writes a string.
func (e *Encoder) String(s string) { e.Buf.Write(appendString(e.Buf.AvailableBuffer(), s)) }

// appendString appends s quoted as json.Marshal quotes it: HTML's <, > and & escaped,
// control characters as \n, \t … or \u00XX, invalid UTF-8 as \ufffd, and U+2028 and
// U+2029 escaped (JavaScript reads them as line ends).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
