// Package demosite is the bundled demo site: a deterministic fake news site in the style
// of Hacker News, with paged feed pages, story pages and paged comment pages, plus faults
// that can be switched on per story to exercise error handling. Everything it serves is
// computed from the story id, so tests can predict what a crawl must store (Expected).
package demosite

import (
	"fmt"
	"strings"
	"time"
)

// Options configure the demo site. Zero values take the defaults.
type Options struct {
	Pages           int           // feed pages (default 10)
	PerPage         int           // stories per feed page (default 30)
	CommentsPerPage int           // comments per comments page (default 20)
	Faults          map[int]Fault // story id → fault served on that story's page
	// Upvoted stories score one point more than the generator says: their content
	// changes while everything else stays the same (dedup tests re-crawl the site).
	Upvoted map[int]bool
	// LinksGoneFrom, when set, is the first story whose page lost its external link, as
	// after a redesign the scraper does not know: from it on, 9 stories in 10 have no
	// url (the tenth, an Ask story, never had one). Expectation tests watch the url
	// field's coverage fall.
	LinksGoneFrom int
	// Live makes stories change on a clock (see Live); nil: the site never changes.
	Live *Live
	// Latency delays every answer, so a crawl is bound by waiting on the site as on a
	// real one (worker-loss and scaling tests use it to have work in flight).
	Latency time.Duration
	// Edits change stories while the site serves (retitled, deleted); nil: none.
	Edits *Edits
}

// Defaults for Options.
const (
	DefaultPages           = 10
	DefaultPerPage         = 30
	DefaultCommentsPerPage = 20
)

// WithDefaults returns o with zero or negative sizes replaced by the defaults.
func (o Options) WithDefaults() Options {
	if o.Pages <= 0 {
		o.Pages = DefaultPages
	}
	if o.PerPage <= 0 {
		o.PerPage = DefaultPerPage
	}
	if o.CommentsPerPage <= 0 {
		o.CommentsPerPage = DefaultCommentsPerPage
	}
	return o
}

// Stories is the number of stories the site lists over all its feed pages.
func (o Options) Stories() int {
	o = o.WithDefaults()
	return o.Pages * o.PerPage
}

// Fault is a misbehaviour of a story page.
type Fault int

const (
	FaultNone       Fault = iota
	FaultStatus500        // the story page always answers 500
	FaultRetryAfter       // the first request answers 429 with Retry-After: 1, later ones normally
	FaultTruncated        // the story page is cut off inside the title's opening tag
	FaultHugeBody         // the story page streams HugeBodySize bytes
	FaultHang             // the story page never answers until the client goes away
	// FaultScriptHang: the story's page built by script (/js/item/ID) runs a script
	// that never ends on its first load, later loads work.
	FaultScriptHang
)

// HugeBodySize is the length of a FaultHugeBody response.
const HugeBodySize = 50 << 20

func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "none"
	case FaultStatus500:
		return "status500"
	case FaultRetryAfter:
		return "retry-after"
	case FaultTruncated:
		return "truncated"
	case FaultHugeBody:
		return "huge-body"
	case FaultHang:
		return "hang"
	case FaultScriptHang:
		return "script-hang"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Lost reports whether a story with this fault can never be stored by a crawl (its
// comments are then never reached either).
func (f Fault) Lost() bool {
	switch f {
	case FaultStatus500, FaultTruncated, FaultHugeBody, FaultHang:
		return true
	}
	return false
}

// Story is one generated story.
type Story struct {
	ID       int
	Title    string
	URL      string // external link; "" for Ask stories
	Author   string
	Score    int
	Time     time.Time
	Comments int
	Text     string // "" for link stories
}

// Comment is one generated comment.
type Comment struct {
	ID     int
	Story  int
	Author string
	Text   string
}

// epoch is the site's "now"; story times count back from it.
var epoch = time.Date(2025, time.March, 14, 12, 0, 0, 0, time.UTC)

var (
	authors = []string{
		"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan",
		"judy", "mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent",
		"victor", "walter",
	}
	adjectives = []string{
		"quiet", "hidden", "surprising", "slow", "tiny", "forgotten", "practical",
		"unreasonable", "elegant", "brittle", "portable", "honest",
	}
	nouns = []string{
		"compiler", "scheduler", "database", "cache", "garbage collector", "parser",
		"kernel", "spreadsheet", "protocol", "lighthouse", "bicycle", "typewriter",
		"telescope",
	}
	verbs = []string{"debug", "test", "deploy", "document", "profile", "review", "ship"}
	hosts = []string{"blog", "news", "research", "lab", "notes", "press"}
)

func pick(list []string, n int) string { return list[n%len(list)] }

// CommentCount is how many comments story id has: (id*7) % 45, so 0 to 44.
func CommentCount(id int) int { return (id * 7) % 45 }

// CommentID is the id of the j-th (1-based) comment of story id.
func CommentID(story, j int) int { return story*100 + j }

// Story returns the story with this id, or false when the site does not list it.
func (o Options) Story(id int) (Story, bool) {
	if id < 1 || id > o.Stories() {
		return Story{}, false
	}
	s := Story{
		ID:       id,
		Author:   pick(authors, id*7),
		Score:    1 + (id*37)%500,
		Time:     epoch.Add(-time.Duration(id*797) * time.Second),
		Comments: CommentCount(id),
	}
	if o.Upvoted[id] {
		s.Score++
	}
	if o.Live != nil {
		o.Live.apply(&s)
	}
	adj, noun, noun2 := pick(adjectives, id*5), pick(nouns, id*3), pick(nouns, id*3+4)
	switch {
	case id%10 == 0:
		s.Title = fmt.Sprintf("Ask HN: How do you %s a %s & a %s?", pick(verbs, id), noun, noun2)
		s.Text = fmt.Sprintf("We keep arguing whether \"%s < %s\" holds for us. What works for you?", noun, noun2)
	case id%10 == 3:
		s.Title = fmt.Sprintf("Show HN: A %s %s written in Go", adj, noun)
		s.URL = fmt.Sprintf("https://github.com/%s/%s-%d", s.Author, slug(noun), id)
		s.Text = fmt.Sprintf("I built a %s %s over the weekend. Feedback welcome.", adj, noun)
	default:
		s.Title = fmt.Sprintf("The %s %s of the %s", adj, noun, noun2)
		s.URL = fmt.Sprintf("https://%s.example.com/%d/%s", pick(hosts, id), id, slug(adj+" "+noun))
	}
	s.Title = o.Edits.title(id, s.Title)
	if o.LinksGoneFrom > 0 && id >= o.LinksGoneFrom {
		s.URL = ""
	}
	return s, true
}

// Comments returns the comments of story id, in page order.
func (o Options) Comments(story int) []Comment {
	st, ok := o.Story(story)
	if !ok {
		return nil
	}
	n := st.Comments
	out := make([]Comment, n)
	for j := 1; j <= n; j++ {
		out[j-1] = Comment{
			ID:     CommentID(story, j),
			Story:  story,
			Author: pick(authors, story+j*3),
			Text: fmt.Sprintf("Comment %d on story %d: the %s part of the %s is <not> the problem.",
				j, story, pick(adjectives, story+j), pick(nouns, story*j)),
		}
	}
	return out
}

// CommentPages is how many comments pages story id has (at least 1: an empty page).
func (o Options) CommentPages(story int) int {
	o = o.WithDefaults()
	st, _ := o.Story(story)
	n := st.Comments
	if n == 0 {
		return 1
	}
	return (n + o.CommentsPerPage - 1) / o.CommentsPerPage
}

// Expected computes what a crawl that follows the first `pages` feed pages, every story
// and every comments page must store: stories lost to a fault (500, truncated, huge body,
// hang) are not stored and their comments are never reached; FaultRetryAfter stories are
// stored once retried.
func Expected(o Options, pages int) (stories, comments int) {
	o = o.WithDefaults()
	if pages > o.Pages {
		pages = o.Pages
	}
	for id := 1; id <= pages*o.PerPage; id++ {
		if o.Faults[id].Lost() {
			continue
		}
		stories++
		comments += CommentCount(id)
	}
	return stories, comments
}

func slug(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), " ", "-")
}

// age renders t relative to the site's clock the way news sites do.
func age(t time.Time) string {
	d := epoch.Sub(t)
	switch {
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute") + " ago"
	case d < 24*time.Hour:
		return plural(int(d/time.Hour), "hour") + " ago"
	}
	return plural(int(d/(24*time.Hour)), "day") + " ago"
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
