package activities

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// Content hashes are what dedup compares with the hashes it kept from earlier runs, made
// from json.Marshal's bytes: a change of encoder must not make every record "changed".
func TestContentHashIsTheHashOfMarshal(t *testing.T) {
	for _, m := range []map[string]any{
		nil,
		{"title": "Tom & <Jerry>", "score": 3, "tags": []any{"a", 1.5}, "nested": map[string]any{"b": 1, "a": nil}},
	} {
		b, _ := json.Marshal(m)
		sum := sha1.Sum(b)
		if got, want := contentHash(m), hex.EncodeToString(sum[:8]); got != want {
			t.Errorf("contentHash(%v) = %s, want %s", m, got, want)
		}
	}
}
