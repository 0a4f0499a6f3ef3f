package crawl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Recrawl is a step's revisit policy: each record is visited again after an interval
// planned from how often it has changed (internal/recrawl keeps the plan), never
// sooner than Min and never later than Max. TargetMiss is the chance, at a planned
// visit, that the record holds a change not seen yet: smaller means more visits.
type Recrawl struct {
	Min        time.Duration `json:"min"`
	Max        time.Duration `json:"max"`
	TargetMiss float64       `json:"target_miss"`
	// PerRun bounds the due records one run visits; the rest stay due for the next.
	PerRun int `json:"per_run"`
}

// Recrawl defaults for the keys a policy leaves out.
const (
	DefaultRecrawlMin        = 10 * time.Minute
	DefaultRecrawlMax        = 7 * 24 * time.Hour
	DefaultRecrawlTargetMiss = 0.1
	DefaultRecrawlPerRun     = 10000
)

var recrawlKeys = []string{"min", "max", "target_miss", "per_run"}

// ParseDuration reads a Go duration (30s, 1h30m) or whole days (7d, 1d12h): revisit
// intervals run to weeks.
func ParseDuration(s string) (time.Duration, error) {
	if i := strings.Index(s, "d"); i > 0 {
		days, err := strconv.Atoi(s[:i])
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		var rest time.Duration
		if s[i+1:] != "" {
			if rest, err = time.ParseDuration(s[i+1:]); err != nil {
				return 0, err
			}
		}
		return time.Duration(days)*24*time.Hour + rest, nil
	}
	return time.ParseDuration(s)
}

// recrawl reads a step's `recrawl:` mapping, checking every key.
func (l *loader) recrawl(v *yaml.Node, where string) *Recrawl {
	r := &Recrawl{Min: DefaultRecrawlMin, Max: DefaultRecrawlMax, TargetMiss: DefaultRecrawlTargetMiss, PerRun: DefaultRecrawlPerRun}
	lines := map[string]int{}
	l.fields(v, where+".recrawl", recrawlKeys, func(key string, v *yaml.Node) {
		lines[key] = v.Line
		switch key {
		case "min":
			r.Min = l.duration(v, "recrawl.min")
		case "max":
			r.Max = l.duration(v, "recrawl.max")
		case "target_miss":
			f, err := strconv.ParseFloat(v.Value, 64)
			if v.Kind != yaml.ScalarNode || err != nil || f <= 0 || f >= 1 {
				l.add(v.Line, "%s: recrawl.target_miss %q: use a share between 0 and 1, e.g. 0.1 (at most a 10%% chance that a record holds an unseen change when it is visited)", where, v.Value)
				return
			}
			r.TargetMiss = f
		case "per_run":
			if r.PerRun = l.integer(v, "recrawl.per_run"); r.PerRun < 1 {
				l.add(v.Line, "%s: recrawl.per_run %s: use 1 or more, the due records one run visits", where, v.Value)
			}
		}
	})
	line := func(key string) int {
		if n, ok := lines[key]; ok {
			return n
		}
		return v.Line
	}
	if r.Min > 0 && r.Min < time.Minute {
		l.add(line("min"), "%s: recrawl.min %s: use 1m or more (plans count in minutes), e.g. min: 10m", where, r.Min)
	}
	if r.Min > 0 && r.Max > 0 && r.Min > r.Max {
		l.add(line("min"), "%s: recrawl.min %s is longer than recrawl.max %s: min is the shortest interval between two visits of a record and max the longest, e.g. recrawl: {min: 10m, max: 7d}", where, FormatDuration(r.Min), FormatDuration(r.Max))
	}
	if r.Max > maxRecrawlInterval {
		l.add(line("max"), "%s: recrawl.max %s: use at most %s, e.g. max: 30d", where, FormatDuration(r.Max), FormatDuration(maxRecrawlInterval))
	}
	return r
}

// maxRecrawlInterval bounds max: a plan counts minutes in 24 bits.
const maxRecrawlInterval = 365 * 24 * time.Hour

// FormatDuration writes a duration the way a chain file does: whole days as 7d, else
// without zero tails (10m, not 10m0s).
func FormatDuration(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return ShortDuration(d)
}

// ShortDuration prints 8760h0m0s as 8760h and 1m30s as is.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// checkRecrawl checks what a recrawl step needs from the rest of the chain.
func (l *loader) checkRecrawl(c *Chain, s Step, where string) {
	if s.Recrawl == nil {
		return
	}
	mode := s.Dedup
	if mode == "" {
		mode = c.Defaults.Dedup
	}
	if mode != "" && mode != DedupChanged {
		l.add(s.Line, "%s: recrawl plans from dedup's verdicts (new, changed, unchanged); set `dedup: changed` on the step, not %s", where, mode)
	}
}
