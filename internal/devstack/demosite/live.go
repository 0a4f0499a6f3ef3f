package demosite

import (
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Live makes the site change the way a real one does: a few stories gain votes and
// comments every few minutes, some every few hours, most never again. Every change is
// computed from Seed and the story id, on the clock Now, so a test or benchmark that
// moves the clock knows exactly when each story changed (Changes).
type Live struct {
	Seed  int64
	Start time.Time        // changes begin here
	Now   func() time.Time // the site's clock

	mu     sync.Mutex
	visits map[int][]time.Time // story page requests, on the site's clock
}

// Shares of stories by how often they change: Fast ones every 3 to 15 minutes, Slow
// ones every 1 to 24 hours, the rest never.
const (
	FastShare = 0.10
	SlowShare = 0.15
)

func (l *Live) hash(id int, salt string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(strconv.FormatInt(l.Seed, 10) + "/" + strconv.Itoa(id) + "/" + salt))
	return h.Sum32()
}

// Every is how often story id changes; 0: never.
func (l *Live) Every(id int) time.Duration {
	r := float64(l.hash(id, "class")%1000) / 1000
	switch {
	case r < FastShare:
		return time.Duration(3+l.hash(id, "every")%13) * time.Minute
	case r < FastShare+SlowShare:
		return time.Duration(1+l.hash(id, "every")%24) * time.Hour
	}
	return 0
}

// first is when story id first changes.
func (l *Live) first(id int) time.Time {
	every := l.Every(id)
	return l.Start.Add(time.Duration(l.hash(id, "phase")%uint32(every/time.Second)) * time.Second)
}

// Changes is how many times story id has changed by t.
func (l *Live) Changes(id int, t time.Time) int {
	every := l.Every(id)
	if every == 0 || t.Before(l.first(id)) {
		return 0
	}
	return int(t.Sub(l.first(id))/every) + 1
}

// ChangedAt is when story id changed for the n-th time (1-based).
func (l *Live) ChangedAt(id, n int) time.Time {
	return l.first(id).Add(time.Duration(n-1) * l.Every(id))
}

// apply gives a story its changes so far: a vote each time, a comment every second time.
func (l *Live) apply(s *Story) {
	n := l.Changes(s.ID, l.Now())
	s.Score += n
	s.Comments += n / 2
}

// visit notes that story id's page was served now.
func (l *Live) visit(id int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.visits == nil {
		l.visits = map[int][]time.Time{}
	}
	l.visits[id] = append(l.visits[id], l.Now())
}

// Visits is when story id's page was served, on the site's clock, in order.
func (l *Live) Visits(id int) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.visits[id])
}

// Report is how promptly a crawler saw the changes of the live stories.
type Report struct {
	Stories int `json:"stories"`
	Visits  int `json:"visits"`  // story pages served
	Changes int `json:"changes"` // changes that happened
	// Late counts changes first seen (by a visit at or after them) more than the
	// allowed delay after they happened, or not yet seen that long after.
	Late int `json:"late"`
}

// Report compares stories 1..n's changes up to until with the visits their pages got
// (visits of a story, in order; nil: those the site served): a change counts as late
// when no visit came within `within` of it.
func (l *Live) Report(n int, within time.Duration, until time.Time, visits func(id int) []time.Time) Report {
	if visits == nil {
		visits = l.Visits
	}
	r := Report{Stories: n}
	for id := 1; id <= n; id++ {
		visits := visits(id)
		r.Visits += len(visits)
		for k := 1; k <= l.Changes(id, until); k++ {
			at := l.ChangedAt(id, k)
			r.Changes++
			i, _ := slices.BinarySearchFunc(visits, at, func(v, t time.Time) int { return v.Compare(t) })
			seen := i < len(visits) && visits[i].Sub(at) <= within
			if !seen && (i < len(visits) || until.Sub(at) > within) {
				r.Late++
			}
		}
	}
	return r
}

// Clock is a clock moved by hand, for Live.Now and whatever else must share the
// simulated time (the recrawl plans of a worker).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
