package activities

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
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

// A page fetched with user:password@ in its base_url resolves links that carry them:
// stamp takes them out of the item's key, url and every field, however deep, and
// leaves the rest as it was.
func TestStampStripsUserinfoFromEveryField(t *testing.T) {
	items := []crawl.Item{{Key: "http://bob:pw@h/1", URL: "http://bob:pw@h/1", Data: map[string]any{
		"link":   "http://bob:pw@h/a",
		"plain":  "mail me at bob@example.com",
		"score":  3,
		"nested": map[string]any{"link": "https://bob:pw@h/b", "n": nil},
		"any":    []any{"http://bob:pw@h/c", map[string]any{"link": "http://bob:pw@h/d"}},
		"urls":   []string{"http://bob:pw@h/e", "http://h/f"},
	}}}
	if err := stamp(crawl.Batch{RunID: "r", Step: crawl.PlanStep{Task: "t"}}, items, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(items[0].Data)
	want := `{"any":["http://h/c",{"link":"http://h/d"}],"link":"http://h/a","nested":{"link":"https://h/b","n":null},"plain":"mail me at bob@example.com","score":3,"urls":["http://h/e","http://h/f"]}`
	if string(got) != want || items[0].Key != "http://h/1" || items[0].URL != "http://h/1" {
		t.Errorf("key %s, url %s, data\n %s\nwant\n %s", items[0].Key, items[0].URL, got, want)
	}
}
