package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A cron spec as schedules take it: exactly five fields (minute hour day-of-month month
// day-of-week) in Temporal's syntax, a descriptor (@hourly …), or @every DURATION.
// ParseCron refuses, before anything reaches Temporal, what Temporal would refuse, what
// it would read differently from what was meant (seconds, years, '#' comments, time
// zone prefixes) and specs that never fire.

// CronDescriptors are the descriptors a spec may be, with the five fields each stands for.
var CronDescriptors = []struct{ Name, Fields string }{
	{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
	{"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"}, {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
}

// MinEvery is the shortest interval @every takes: a chain run is a crawl, not a poll.
const MinEvery = time.Minute

// cronHorizon is how far ahead a spec must fire at least once.
const cronHorizon = 30

type cronField struct {
	name      string
	min, max  int
	names     []string // accepted names, index i stands for value min+i (prefixes of at least prefix letters)
	prefix    int
	takes     string // what the field takes, for messages
	valueName string // what one value is called: "a month"
}

var (
	monthNames = []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}
	dowNames   = []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}
	cronFields = [5]cronField{
		{name: "minute", min: 0, max: 59, takes: "0-59"},
		{name: "hour", min: 0, max: 23, takes: "0-23"},
		{name: "day-of-month", min: 1, max: 31, takes: "1-31"},
		{name: "month", min: 1, max: 12, names: monthNames, prefix: 3, takes: "1-12 or JAN-DEC", valueName: "a month"},
		{name: "day-of-week", min: 0, max: 7, names: dowNames, prefix: 2, takes: "0-7 (0 and 7 are Sunday) or SUN-SAT", valueName: "a day of the week"},
	}
)

// CronSpec is a parsed spec: the set of each field's values, or an interval.
type CronSpec struct {
	Spec     string
	fields   [5]uint64 // bit v set: value v matches (day-of-week 7 folded onto 0)
	Every    time.Duration
	Offset   time.Duration
	Location *time.Location // the zone the fields are read in; nil is UTC (intervals have none)
}

const cronUsage = `give five fields: minute hour day-of-month month day-of-week, e.g. "0 * * * *" for hourly, or one of @hourly @daily @midnight @weekly @monthly @yearly @annually, or @every DURATION (e.g. @every 30m)`

// ParseCron parses and checks a spec; its error says what is wrong in the user's terms
// (the caller names the flag or field and quotes the spec).
func ParseCron(spec string) (*CronSpec, error) {
	s := strings.TrimSpace(spec)
	switch {
	case s == "":
		return nil, fmt.Errorf("is empty; %s", cronUsage)
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return nil, fmt.Errorf("time zone prefixes are not accepted: give the zone apart (--tz, or time_zone in the API), e.g. Europe/Paris")
	case strings.Contains(s, "#"):
		return nil, fmt.Errorf("'#' is not accepted: Temporal reads the rest as a comment, so nth-weekday forms like MON#2 would silently mean every Monday")
	case strings.HasPrefix(s, "@every"):
		return parseEvery(spec, s)
	case strings.HasPrefix(s, "@"):
		for _, d := range CronDescriptors {
			if s == d.Name {
				c, err := ParseCron(d.Fields)
				if c != nil {
					c.Spec = spec
				}
				return c, err
			}
		}
		names := make([]string, len(CronDescriptors))
		for i, d := range CronDescriptors {
			names[i] = d.Name
		}
		return nil, fmt.Errorf("unknown descriptor %s; the descriptors are %s, and @every DURATION", strings.Fields(s)[0], strings.Join(names, " "))
	}
	toks := strings.Fields(s)
	if len(toks) != 5 {
		extra := ""
		if len(toks) == 6 || len(toks) == 7 {
			extra = " (seconds and year fields are not accepted)"
		}
		return nil, fmt.Errorf("has %d fields%s; %s", len(toks), extra, cronUsage)
	}
	c := &CronSpec{Spec: spec}
	for i, tok := range toks {
		bits, err := cronFields[i].parse(tok)
		if err != nil {
			return nil, err
		}
		c.fields[i] = bits
	}
	if why := c.neverFires(toks[2]); why != "" {
		return nil, fmt.Errorf("never fires: %s", why)
	}
	if c.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("never fires in the next %d years", cronHorizon)
	}
	return c, nil
}

func parseEvery(spec, s string) (*CronSpec, error) {
	arg := strings.TrimSpace(strings.TrimPrefix(s, "@every"))
	if arg == "" || !strings.HasPrefix(s, "@every ") {
		return nil, fmt.Errorf("@every needs a duration, e.g. @every 30m or @every 6h")
	}
	every, offset, hasOffset := strings.Cut(arg, "/")
	d, err := time.ParseDuration(every)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("@every %s: give a duration like 30m, 6h or 36h", every)
	}
	if d < MinEvery {
		return nil, fmt.Errorf("@every %s is shorter than the %s minimum", every, shortDuration(MinEvery))
	}
	c := &CronSpec{Spec: spec, Every: d}
	if hasOffset {
		o, err := time.ParseDuration(offset)
		if err != nil || o < 0 {
			return nil, fmt.Errorf("@every %s: offset %q: give a duration like 15m", arg, offset)
		}
		if o >= d {
			return nil, fmt.Errorf("@every %s: offset %s is not shorter than the interval %s", arg, offset, every)
		}
		c.Offset = o
	}
	return c, nil
}

// parse reads one field: comma-separated items, each *, a value, a range a-b, with an
// optional step /n (a value with a step runs to the field's end, as Temporal reads it).
func (f cronField) parse(tok string) (uint64, error) {
	var bits uint64
	for _, item := range strings.Split(tok, ",") {
		if item == "" {
			return 0, fmt.Errorf("%s %q has an empty list item", f.name, tok)
		}
		part, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 || strings.ContainsAny(stepText, "+-") {
				return 0, fmt.Errorf("%s step %q: give a whole number of 1 or more", f.name, stepText)
			}
			if n > f.max-f.min {
				return 0, fmt.Errorf("%s step %d is larger than the field's range %s", f.name, n, f.takes)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case part == "*":
		case strings.Contains(part, "-"):
			a, b, _ := strings.Cut(part, "-")
			var err error
			if lo, err = f.value(a); err != nil {
				return 0, err
			}
			if hi, err = f.value(b); err != nil {
				return 0, err
			}
			if hi < lo {
				return 0, fmt.Errorf("%s range %s ends before it starts (ranges do not wrap around)", f.name, part)
			}
		default:
			v, err := f.value(part)
			if err != nil {
				return 0, err
			}
			lo = v
			if !hasStep {
				hi = v
			}
		}
		for v := lo; v <= hi; v += step {
			if f.name == "day-of-week" && v == 7 {
				bits |= 1
				continue
			}
			bits |= 1 << v
		}
	}
	return bits, nil
}

// value reads one number or name of the field.
func (f cronField) value(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%s has a range with an end missing", f.name)
	}
	if n, err := strconv.Atoi(s); err == nil && !strings.ContainsAny(s, "+-") {
		if n < f.min || n > f.max {
			return 0, fmt.Errorf("%s %d is out of range: %s takes %s", f.name, n, f.name, f.takes)
		}
		return n, nil
	}
	if f.names != nil && len(s) >= f.prefix {
		low := strings.ToLower(s)
		for i, name := range f.names {
			if strings.HasPrefix(name, low) {
				return f.min + i, nil
			}
		}
	}
	if f.names != nil {
		return 0, fmt.Errorf("%s %q is not %s: %s takes %s", f.name, s, f.valueName, f.name, f.takes)
	}
	return 0, fmt.Errorf("%s %q is not a number: %s takes %s", f.name, s, f.name, f.takes)
}

// daysIn is the most days month m (1-12) has.
func daysIn(m int) int {
	switch m {
	case 2:
		return 29
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// neverFires says why no day matches month and day-of-month together, or "".
func (c *CronSpec) neverFires(dom string) string {
	least := 0 // the smallest day-of-month the spec names
	for d := 1; d <= 31 && least == 0; d++ {
		if c.fields[2]&(1<<d) != 0 {
			least = d
		}
	}
	var months []string
	for m := 1; m <= 12; m++ {
		if c.fields[3]&(1<<m) == 0 {
			continue
		}
		if least <= daysIn(m) {
			return ""
		}
		name := monthNames[m-1]
		months = append(months, fmt.Sprintf("%s (%d days at most)", strings.ToUpper(name[:1])+name[1:], daysIn(m)))
	}
	return fmt.Sprintf("day-of-month %s does not exist in %s", dom, strings.Join(months, " or "))
}

// Next is the first firing after t (in UTC, on the minute), or the zero time when none
// comes within the horizon. Like Temporal, a day must match both day-of-month and
// day-of-week when both are given, and the fields are read literally on the clock of
// Location: a local time that daylight saving skips does not fire, one it repeats fires
// twice.
func (c *CronSpec) Next(after time.Time) time.Time {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	after = after.UTC()
	if c.Every > 0 {
		n := after.UnixNano() - int64(c.Offset)
		k := n/int64(c.Every) + 1
		if n < 0 && n%int64(c.Every) != 0 {
			k--
		}
		return time.Unix(0, k*int64(c.Every)+int64(c.Offset)).UTC()
	}
	t := after.Truncate(time.Minute).Add(time.Minute).In(loc)
	limit := t.AddDate(cronHorizon, 0, 0)
	has := func(i, v int) bool { return c.fields[i]&(1<<v) != 0 }
	for !t.After(limit) {
		y, m, d := t.Date()
		next := t
		switch {
		case !has(3, int(m)) || !has(2, d) || !has(4, int(t.Weekday())):
			next = time.Date(y, m, d+1, 0, 0, 0, 0, loc)
		case !has(1, t.Hour()):
			// The next hour on the local clock (not t+1h: zones such as +05:30 do not
			// start their hours on UTC's).
			next = time.Date(y, m, d, t.Hour()+1, 0, 0, 0, loc)
		case !has(0, t.Minute()):
			next = t.Add(time.Minute)
		default:
			return t.UTC()
		}
		if !next.After(t) {
			// A repeated hour read back maps to its first occurrence: keep going forward.
			next = t.Add(time.Minute)
		}
		t = next
	}
	return time.Time{}
}

// Count is the number of firings in [from, to], counting no further than max+1.
func (c *CronSpec) Count(from, to time.Time, max int) int {
	n := 0
	for t := c.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to) && n <= max; t = c.Next(t) {
		n++
	}
	return n
}
