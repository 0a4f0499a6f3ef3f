package itemjson

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// Map writes what json.Marshal writes, byte for byte: content hashes kept by dedup and
// lines already in sinks were made by json.Marshal.
func TestMapIsWhatMarshalWrites(t *testing.T) {
	for _, m := range []map[string]any{
		nil,
		{},
		{"title": "a <b> & c", "score": 12, "ratio": 0.5, "big": 1e21, "ok": true, "none": nil},
		{"nested": map[string]any{"z": 1, "a": []any{"x", 2.5, map[string]any{"k": "v"}}}, "list": []string{"p", "q"}},
		{"with space": 1, "ünï": "ç", `quo"te`: "\u2028\x00", "": "empty key", "-dash_ok9": "x"},
		{"when": time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC), "bytes": []byte("raw")},
	} {
		sameAsMarshal(t, m, func(e *Encoder) error { return e.Map(m) })
	}
}

// sameAsMarshal checks that write appends what json.Marshal writes for v.
func sameAsMarshal(t *testing.T, v any, write func(*Encoder) error) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	e := Get()
	defer e.Release()
	if err := write(e); err != nil {
		t.Fatal(err)
	}
	if got := e.Buf.String(); got != string(want) {
		t.Errorf("%#v\n got %s\nwant %s", v, got, want)
	}
}

// A value json.Marshal refuses is refused too.
func TestMapRefusesWhatMarshalRefuses(t *testing.T) {
	m := map[string]any{"nan": math.NaN()}
	if _, err := json.Marshal(m); err == nil {
		t.Fatal("json.Marshal took NaN")
	}
	e := Get()
	defer e.Release()
	if err := e.Map(m); err == nil {
		t.Errorf("Map took NaN: %s", e.Buf.String())
	}
}

// Strings, integers, booleans and nil, which Value writes itself, come out as
// json.Marshal writes them: every ASCII byte, runes across the planes, the two line
// separators JavaScript trips on, and broken UTF-8.
func TestValueWritesScalarsAsMarshal(t *testing.T) {
	values := []any{nil, true, false, 0, -1, math.MaxInt64, math.MinInt64, int64(42), int64(math.MinInt64),
		"", "plain", "a\"b\\c", "\xff", "a\xc3", "\xed\xa0\x80", "ok\xf0\x9f\x98\x80ok", "\u2028\u2029", "\x7f"}
	for r := rune(0); r < 0x3000; r++ {
		values = append(values, string(r), "x"+string(r)+"y")
	}
	for _, v := range values {
		sameAsMarshal(t, v, func(e *Encoder) error { return e.Value(v) })
	}
}
