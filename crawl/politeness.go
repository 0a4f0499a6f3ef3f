package crawl

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Politeness is how gently a step treats the hosts it fetches from: a chain file's
// `politeness:` block, in `defaults`, on a step, and per host pattern under `hosts:`.
// Its limits hold across every worker of the fleet (fetch.Politeness leases them from
// Redis), so a site sees the limit declared whether one worker or fifty fetch from it.
// Zero values leave a limit to the next level: the step's block over the chain's
// defaults, a matching host pattern over both, then the task's RateLimit and
// HostConcurrency, then the fetcher's defaults.
type Politeness struct {
	// Rate is the most requests per second that start at a host (0: no rate limit).
	Rate float64 `json:"rate,omitempty"`
	// Concurrency is the most requests in flight at a host (0: the default).
	Concurrency int `json:"concurrency,omitempty"`
	// Delay is the least time between two requests to a host starting, plus up to
	// Jitter more, drawn at random each time.
	Delay  time.Duration `json:"delay,omitempty"`
	Jitter time.Duration `json:"jitter,omitempty"`
	// AutoThrottle lets the delay follow the host's latency (nil: off).
	AutoThrottle *AutoThrottle `json:"autothrottle,omitempty"`
	// Robots is RobotsObey or RobotsIgnore ("": the chain's `robots:`).
	Robots string `json:"robots,omitempty"`
	// Group is what shares one budget: GroupHost (the default), GroupDomain or GroupIP.
	Group string `json:"group,omitempty"`
	// Hosts are per host pattern overrides, most specific first (only at the top level).
	Hosts []HostPoliteness `json:"hosts,omitempty"`
}

// HostPoliteness is a Politeness for the hosts one pattern matches: `example.com` is
// that host alone, `*.example.com` any host under it (not example.com itself).
type HostPoliteness struct {
	Pattern string     `json:"pattern"`
	Limits  Politeness `json:"limits"`
}

// AutoThrottle is Scrapy's rule: after each answer the delay moves half way toward
// latency / Target, never below the declared or robots.txt floor nor above Max, and it
// does not fall after an error answer (it doubles instead).
type AutoThrottle struct {
	Target float64       `json:"target"` // requests in flight the host should see on average
	Max    time.Duration `json:"max"`    // the longest delay it sets
}

// Politeness values.
const (
	RobotsObey   = "obey"
	RobotsIgnore = "ignore"
	GroupHost    = "host"
	GroupDomain  = "domain"
	GroupIP      = "ip"
	// DefaultHostConcurrency is the fleet-wide limit of requests in flight at one host
	// when nothing is declared: Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN.
	DefaultHostConcurrency = 8
	// AutoThrottle defaults: Scrapy's AUTOTHROTTLE_TARGET_CONCURRENCY and _MAX_DELAY.
	DefaultThrottleTarget = 1.0
	DefaultThrottleMax    = 60 * time.Second
	// MaxPoliteDelay bounds delay and jitter: a slower site is better crawled by a
	// schedule than by workers holding slots.
	MaxPoliteDelay = 10 * time.Minute
)

var (
	politenessKeys = []string{"rate", "concurrency", "delay", "jitter", "autothrottle", "robots", "group", "hosts"}
	throttleKeys   = []string{"target", "max_delay"}
	robotsModes    = []string{RobotsObey, RobotsIgnore}
	groupModes     = []string{GroupHost, GroupDomain, GroupIP}
)

// IsZero reports whether p declares nothing.
func (p *Politeness) IsZero() bool {
	return p == nil || (p.Rate == 0 && p.Concurrency == 0 && p.Delay == 0 && p.Jitter == 0 && p.AutoThrottle == nil &&
		p.Robots == "" && p.Group == "" && len(p.Hosts) == 0)
}

// over returns p with every zero value taken from base (hosts: p's first).
func (p Politeness) over(base Politeness) Politeness {
	if p.Rate == 0 {
		p.Rate = base.Rate
	}
	if p.Concurrency == 0 {
		p.Concurrency = base.Concurrency
	}
	if p.Delay == 0 && p.Jitter == 0 {
		p.Delay, p.Jitter = base.Delay, base.Jitter
	}
	if p.AutoThrottle == nil {
		p.AutoThrottle = base.AutoThrottle
	}
	if p.Robots == "" {
		p.Robots = base.Robots
	}
	if p.Group == "" {
		p.Group = base.Group
	}
	p.Hosts = append(slices.Clip(p.Hosts), base.Hosts...)
	return p
}

// MergePoliteness is a step's politeness: its own block over the chain's defaults
// (nil when neither declares anything).
func MergePoliteness(step, defaults *Politeness) *Politeness {
	var s, d Politeness
	if step != nil {
		s = *step
	}
	if defaults != nil {
		d = *defaults
	}
	m := s.over(d)
	if m.IsZero() {
		return nil
	}
	return &m
}

// ForHost is the limits in force for host (a hostname, lower case, no port): the first
// matching pattern's over p's own, without Hosts.
func (p *Politeness) ForHost(host string) Politeness {
	if p == nil {
		return Politeness{}
	}
	own := *p
	own.Hosts = nil
	for _, h := range p.Hosts {
		if MatchHost(h.Pattern, host) {
			m := h.Limits.over(own)
			m.Hosts = nil
			return m
		}
	}
	return own
}

// MatchHost reports whether a `hosts:` pattern matches host.
func MatchHost(pattern, host string) bool {
	pattern, host = strings.ToLower(pattern), strings.ToLower(strings.TrimSuffix(host, "."))
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return host == pattern
}

// ParseRate reads `2/s`, `30/m`, `100/h` or a bare number of requests a second.
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, per, found := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n <= 0 || n > 1e6 {
		return 0, fmt.Errorf("rate %q: write requests per unit of time, e.g. 2/s, 30/m or 100/h", s)
	}
	if !found {
		return n, nil
	}
	switch strings.TrimSpace(per) {
	case "s", "sec", "second":
		return n, nil
	case "m", "min", "minute":
		return n / 60, nil
	case "h", "hour":
		return n / 3600, nil
	}
	return 0, fmt.Errorf("rate %q: the unit after / is s, m or h, e.g. 2/s, 30/m or 100/h", s)
}

// FormatRate is a rate as a chain file writes it.
func FormatRate(r float64) string {
	switch {
	case r <= 0:
		return "unlimited"
	case r >= 1:
		return strconv.FormatFloat(r, 'g', 4, 64) + "/s"
	case r*60 >= 1:
		return strconv.FormatFloat(r*60, 'g', 4, 64) + "/m"
	}
	return strconv.FormatFloat(r*3600, 'g', 4, 64) + "/h"
}

// politeness reads a `politeness:` block; top says whether `hosts:` may appear in it.
func (l *loader) politeness(v *yaml.Node, where string, top bool) *Politeness {
	p := &Politeness{}
	if top {
		where += ".politeness"
	}
	l.fields(v, where, politenessKeys, func(key string, v *yaml.Node) {
		switch key {
		case "rate":
			if v.Kind != yaml.ScalarNode {
				l.add(v.Line, "%s: rate must be one value like 2/s, not a %s", where, kindName(v))
				return
			}
			r, err := ParseRate(v.Value)
			if err != nil {
				l.add(v.Line, "%s: %v", where, err)
			}
			p.Rate = r
		case "concurrency":
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || n < 1 || n > MaxConcurrency {
				l.add(v.Line, "%s: concurrency %q: use 1 to %d, the requests in flight at one host across the whole fleet", where, v.Value, MaxConcurrency)
				return
			}
			p.Concurrency = n
		case "delay", "jitter":
			d, ok := l.politeDelay(v, where, key)
			if key == "delay" && ok {
				p.Delay = d
			} else if ok {
				p.Jitter = d
			}
		case "autothrottle":
			p.AutoThrottle = l.autothrottle(v, where)
		case "robots":
			p.Robots = l.oneOf(v, where, "robots", robotsModes, "obey follows the host's robots.txt, its Crawl-delay and Request-rate; ignore fetches what it forbids too")
		case "group":
			p.Group = l.oneOf(v, where, "group", groupModes, "host gives each host its own budget; domain shares one among the hosts of a registrable domain; ip among the hosts on one address")
		case "hosts":
			if !top {
				l.add(v.Line, "%s: hosts cannot nest; list every pattern under the one `hosts:` of the politeness block", where)
				return
			}
			p.Hosts = l.hostRules(v, where)
		}
	})
	return p
}

// politeDelay reads delay or jitter: 0 or a positive duration up to MaxPoliteDelay.
func (l *loader) politeDelay(v *yaml.Node, where, key string) (time.Duration, bool) {
	if v.Kind == yaml.ScalarNode && (v.Value == "0" || v.Value == "0s") {
		return 0, true
	}
	d, err := ParseDuration(v.Value)
	if v.Kind != yaml.ScalarNode || err != nil || d < 0 || d > MaxPoliteDelay {
		hint := "e.g. 250ms, 2s or 1m"
		if _, numErr := strconv.ParseFloat(v.Value, 64); numErr == nil {
			hint = fmt.Sprintf("give a unit, e.g. %sms or %ss", v.Value, v.Value)
		}
		l.add(v.Line, "%s: %s %q: use a duration from 0 to %s, %s", where, key, v.Value, FormatDuration(MaxPoliteDelay), hint)
		return 0, false
	}
	return d, true
}

func (l *loader) oneOf(v *yaml.Node, where, key string, valid []string, what string) string {
	s := l.str(v, where+"."+key)
	if s != "" && !slices.Contains(valid, s) {
		l.add(v.Line, "%s: %s %q is not one of %s%s (%s)", where, key, s, strings.Join(valid, ", "), Suggest(s, valid), what)
		return ""
	}
	return s
}

// autothrottle reads `autothrottle: true|false` or `{target: 2, max_delay: 30s}`.
func (l *loader) autothrottle(v *yaml.Node, where string) *AutoThrottle {
	a := &AutoThrottle{Target: DefaultThrottleTarget, Max: DefaultThrottleMax}
	if v.Kind == yaml.ScalarNode {
		var on bool
		if v.Decode(&on) != nil {
			l.add(v.Line, "%s: autothrottle %q: write true, false, or {target: 2, max_delay: 30s}", where, v.Value)
			return nil
		}
		if !on {
			return nil
		}
		return a
	}
	l.fields(v, where+".autothrottle", throttleKeys, func(key string, v *yaml.Node) {
		switch key {
		case "target":
			f, err := strconv.ParseFloat(v.Value, 64)
			if v.Kind != yaml.ScalarNode || err != nil || f <= 0 || f > MaxConcurrency {
				l.add(v.Line, "%s: autothrottle.target %q: use a number above 0, the requests in flight the host should see on average, e.g. 1 or 2.5", where, v.Value)
				return
			}
			a.Target = f
		case "max_delay":
			if d, ok := l.politeDelay(v, where+".autothrottle", "max_delay"); ok && d > 0 {
				a.Max = d
			}
		}
	})
	return a
}

// hostRules reads `hosts:`, a mapping of host pattern to politeness.
func (l *loader) hostRules(v *yaml.Node, where string) []HostPoliteness {
	if v.Kind != yaml.MappingNode {
		l.add(v.Line, "%s.hosts must map host patterns to limits, e.g. hosts: {\"*.example.com\": {rate: 1/s}}, not a %s", where, kindName(v))
		return nil
	}
	var out []HostPoliteness
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, rv := v.Content[i], v.Content[i+1]
		pat := strings.ToLower(strings.TrimSpace(k.Value))
		if err := checkHostPattern(pat); err != nil {
			l.add(k.Line, "%s.hosts: %v", where, err)
			continue
		}
		p := l.politeness(rv, fmt.Sprintf("%s.hosts[%s]", where, pat), false)
		out = append(out, HostPoliteness{Pattern: pat, Limits: *p})
	}
	// Most specific first: a longer pattern is narrower; an exact host beats a wildcard
	// of the same length.
	slices.SortStableFunc(out, func(a, b HostPoliteness) int {
		if d := len(b.Pattern) - len(a.Pattern); d != 0 {
			return d
		}
		return strings.Compare(a.Pattern, b.Pattern)
	})
	return out
}

func checkHostPattern(p string) error {
	name := strings.TrimPrefix(p, "*.")
	if name == "" || strings.ContainsAny(name, "*/:@ ") || net.ParseIP(name) == nil && !strings.Contains(name, ".") && name != "localhost" {
		return fmt.Errorf("%q is not a host pattern: write a host name like example.com, or *.example.com for every host under it (no scheme, port or path)", p)
	}
	return nil
}

// PlanPoliteness is what a step's batches apply: its block over the chain's defaults,
// over the task's own RateLimit and HostConcurrency (defaults a chain overrides).
func PlanPoliteness(step, defaults *Politeness, spec TaskSpec) *Politeness {
	task := &Politeness{Rate: spec.RateLimit, Concurrency: spec.HostConcurrency}
	return MergePoliteness(MergePoliteness(step, defaults), task)
}
