package render

import (
	"net/url"
	"regexp"
	"sync"
	"time"
)

// Memory remembers, for `render: auto`, which kinds of page needed a browser: a page
// whose plain HTML gave its task nothing, and whose rendered HTML did, marks its kind
// for Remember's TTL, and pages of that kind go to the browser at once instead of
// being fetched twice. A kind is the step, the host and the path with its numbers
// taken out (/item/12 and /item/13 are one kind, /js/item/12 another), so a site
// that renders some pages only has those rendered.
type Memory struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]time.Time // kind → until
}

// memoryMax bounds the kinds remembered; past it, the expired ones are dropped, then
// all: forgetting costs one plain fetch per kind.
const memoryMax = 10000

// NewMemory remembers kinds for ttl (default 10 minutes).
func NewMemory(ttl time.Duration) *Memory {
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	return &Memory{ttl: ttl, m: map[string]time.Time{}}
}

var digits = regexp.MustCompile(`[0-9]+`)

// Kind names the kind of page a URL is, for a step.
func Kind(step, rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return step + " " + rawURL
	}
	return step + " " + u.Host + digits.ReplaceAllString(u.Path, "#")
}

// Needs reports whether pages of this kind were found to need rendering lately.
func (m *Memory) Needs(kind string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.m[kind]
	return ok && time.Now().Before(until)
}

// Remember marks a kind as needing rendering.
func (m *Memory) Remember(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= memoryMax {
		now := time.Now()
		for k, until := range m.m {
			if now.After(until) {
				delete(m.m, k)
			}
		}
		if len(m.m) >= memoryMax {
			clear(m.m)
		}
	}
	m.m[kind] = time.Now().Add(m.ttl)
}
