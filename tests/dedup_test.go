package tests

import (
	"testing"
	"time"

	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

func TestRecrawlStoresOnlyWhatChanged(t *testing.T) {
	o := demosite.Options{Pages: 2}
	site := startSite(t, o)
	first := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2"), taskQueue)
	s1 := wait(t, first, 2*time.Minute)
	stories, comments := demosite.Expected(o, 2)
	if got := len(stored(t, first)); got != stories+comments {
		t.Fatalf("first run stored %d, want %d", got, stories+comments)
	}
	if s1.Unchanged() != 0 {
		t.Fatalf("first run found %d unchanged items", s1.Unchanged())
	}

	// The same site again: every item is already stored and unchanged.
	second := start(t, plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2"), taskQueue)
	s2 := wait(t, second, 2*time.Minute)
	if got := len(stored(t, second)); got != 0 {
		t.Fatalf("second run stored %d items, want 0", got)
	}
	if s2.Unchanged() != stories+comments {
		t.Fatalf("second run: %d unchanged, want %d", s2.Unchanged(), stories+comments)
	}

	// Three stories gain a point: exactly those are stored again.
	o.Upvoted = map[int]bool{4: true, 17: true, 42: true}
	changed := startSite(t, o)
	third := start(t, plan(t, "demo.yaml", "", "base_url="+changed, "feed.pages=2"), taskQueue)
	s3 := wait(t, third, 2*time.Minute)
	keys := stored(t, third)
	if len(keys) != 3 || keys["demo:story:4"] != 1 || keys["demo:story:17"] != 1 || keys["demo:story:42"] != 1 {
		t.Fatalf("third run stored %v, want exactly stories 4, 17 and 42", keys)
	}
	if s3.Unchanged() != stories+comments-3 {
		t.Fatalf("third run: %d unchanged, want %d", s3.Unchanged(), stories+comments-3)
	}

	// The changed site once more: the third run recorded the new versions, so nothing is
	// stored again.
	again := start(t, plan(t, "demo.yaml", "", "base_url="+changed, "feed.pages=2"), taskQueue)
	s4 := wait(t, again, 2*time.Minute)
	if keys := stored(t, again); len(keys) != 0 {
		t.Fatalf("recrawl of the unchanged changed site stored %v, want nothing", keys)
	}
	if s4.Unchanged() != stories+comments {
		t.Fatalf("recrawl of the changed site: %d unchanged, want %d", s4.Unchanged(), stories+comments)
	}

	// dedup: off stores everything again.
	p := plan(t, "demo.yaml", "", "base_url="+site, "feed.pages=2")
	for i := range p.Steps {
		p.Steps[i].Dedup = "off"
	}
	fourth := start(t, p, taskQueue)
	wait(t, fourth, 2*time.Minute)
	if got := len(stored(t, fourth)); got != stories+comments {
		t.Fatalf("dedup off stored %d, want %d", got, stories+comments)
	}
}
