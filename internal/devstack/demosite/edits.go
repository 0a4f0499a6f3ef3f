package demosite

import (
	"net/http"
	"sync"
)

// Edits change the site while it serves, as its editors would: stories retitled,
// stories deleted. Tests of what a recrawl reports use them; the zero value edits
// nothing, and so does a nil *Edits.
type Edits struct {
	mu       sync.Mutex
	retitled map[int]bool
	gone     map[int]int // story id → the status its page answers
}

// Retitle gives each story a new title: its generated one with " (updated)" after it.
func (e *Edits) Retitle(ids ...int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.retitled == nil {
		e.retitled = map[int]bool{}
	}
	for _, id := range ids {
		e.retitled[id] = true
	}
}

// Delete takes a story off the feed; its page answers status (404 or 410) from now on.
func (e *Edits) Delete(id, status int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone == nil {
		e.gone = map[int]int{}
	}
	e.gone[id] = status
}

// title is the title a story has now.
func (e *Edits) title(id int, title string) string {
	if e == nil {
		return title
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.retitled[id] {
		return title + " (updated)"
	}
	return title
}

// deleted is the status the page of a deleted story answers; 0 for a story still there.
func (e *Edits) deleted(id int) int {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gone[id]
}

// serveDeleted answers for a deleted story and reports whether it was one.
func (e *Edits) serveDeleted(w http.ResponseWriter, id int) bool {
	status := e.deleted(id)
	if status == 0 {
		return false
	}
	http.Error(w, http.StatusText(status), status)
	return true
}
