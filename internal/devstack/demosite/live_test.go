package demosite

import (
	"testing"
	"time"
)

func TestLiveStoriesChangeOnTheirClock(t *testing.T) {
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	now := start
	o := Options{Pages: 10, Live: &Live{Seed: 7, Start: start, Now: func() time.Time { return now }}}
	var fast, slow, never int
	for id := 1; id <= o.Stories(); id++ {
		switch every := o.Live.Every(id); {
		case every == 0:
			never++
		case every < time.Hour:
			fast++
		default:
			slow++
		}
	}
	if fast < 15 || slow < 25 || never < 200 {
		t.Fatalf("of 300 stories %d change every few minutes, %d every few hours, %d never", fast, slow, never)
	}
	for id := 1; id <= o.Stories(); id++ {
		every := o.Live.Every(id)
		if every == 0 {
			continue
		}
		first := o.Live.ChangedAt(id, 1)
		now = first.Add(-time.Second)
		before, _ := o.Story(id)
		now = first
		after, _ := o.Story(id)
		if after.Score != before.Score+1 {
			t.Fatalf("story %d: score %d → %d at its first change, want +1", id, before.Score, after.Score)
		}
		now = first.Add(3*every + time.Second)
		if n := o.Live.Changes(id, now); n != 4 {
			t.Fatalf("story %d: %d changes after 3 periods past the first, want 4", id, n)
		}
		if s, _ := o.Story(id); len(o.Comments(id)) != s.Comments {
			t.Fatalf("story %d lists %d comments, its page says %d", id, len(o.Comments(id)), s.Comments)
		}
	}
}
