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
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		e := Get()
		if err := e.Map(m); err != nil {
			t.Fatal(err)
		}
		if got := e.Buf.String(); got != string(want) {
			t.Errorf("Map(%v)\n got %s\nwant %s", m, got, want)
		}
		e.Release()
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
