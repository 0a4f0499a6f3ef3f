package engine

import (
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// MaxID is Temporal's limit on a workflow or schedule id (its limit.maxIDLength).
const MaxID = 1000

// MaxScheduleID bounds a new schedule's id: it names the schedule in listings, and its
// runs' ids are it plus the firing time, which must stay within MaxID.
const MaxScheduleID = 200

var scheduleIDShape = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// CheckID refuses an id of a run or schedule (what: "run id", "schedule id") that none
// can have: empty, over MaxID characters, invalid UTF-8, or with a control character or
// a bidirectional override such as U+202E, which would show one id and be another.
func CheckID(what, id string) error {
	switch n := utf8.RuneCountInString(id); {
	case id == "":
		return fmt.Errorf("%s is empty", what)
	case n > MaxID:
		return fmt.Errorf("%s %q is %d characters; Temporal's ids have at most %d", what, shorten(id), n, MaxID)
	case !utf8.ValidString(id):
		return fmt.Errorf("%s %q is not valid UTF-8", what, id)
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%s %q has the invisible character %U; no id has one: copy the id from `trawler status` or the console's list", what, id, r)
		}
	}
	return nil
}

// CheckScheduleID refuses a new schedule's id that is not a short name of letters,
// digits, '.', '_' and '-'.
func CheckScheduleID(id string) error {
	if n := utf8.RuneCountInString(id); n > MaxScheduleID {
		return &ScheduleError{Field: "id", Value: shorten(id), Why: fmt.Sprintf("%d characters; name the schedule in at most %d, e.g. demo-hourly", n, MaxScheduleID)}
	}
	if !scheduleIDShape.MatchString(id) {
		return &ScheduleError{Field: "id", Value: id, Why: "name the schedule with letters, digits, '.', '_' and '-', e.g. demo-hourly"}
	}
	return nil
}

// shorten keeps an error about a very long id readable: its first 40 characters and "…".
func shorten(id string) string {
	if r := []rune(id); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return id
}
