package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/workflows"

	_ "github.com/trawlerhq/trawler/internal/sites/generic"
)

// items reads back what a run stored in the jsonl sink: key → item, per biz.
func items(t *testing.T, runID string) map[string]map[string]crawl.Item {
	t.Helper()
	return sinkItems(t, shared.sink, runID)
}

// sinkItems is items read back from the jsonl sink js.
func sinkItems(t *testing.T, js *jsonl.Sink, runID string) map[string]map[string]crawl.Item {
	t.Helper()
	out := map[string]map[string]crawl.Item{}
	if err := js.Scan(func(it crawl.Item) error {
		if it.RunID == runID {
			if out[it.Biz] == nil {
				out[it.Biz] = map[string]crawl.Item{}
			}
			if _, dup := out[it.Biz][it.Key]; dup {
				t.Errorf("%s %s stored twice", it.Biz, it.Key)
			}
			out[it.Biz][it.Key] = it
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func stepStats(s *workflows.Summary, id string) workflows.StepStats {
	for _, st := range s.Steps {
		if st.ID == id {
			return st
		}
	}
	return workflows.StepStats{}
}

func noFailures(t *testing.T, s *workflows.Summary) {
	t.Helper()
	if _, _, _, failed := s.Totals(); failed != 0 {
		t.Errorf("%d failures: %+v", failed, s.Failures)
	}
}

func sortedKeysOf(m map[string]crawl.Item) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The YAML-only HTML chain crawls the paged list and every story page and stores exactly
// the site's stories, every field typed as the chain says (read back from jsonl, so
// numbers are JSON numbers).
func TestGenericHTMLChainStoresExactlyTheSite(t *testing.T) {
	o := demosite.Options{Pages: 3, PerPage: 5}
	site := startSite(t, o)
	id := start(t, plan(t, "generic-html.yaml", "", "base_url="+site), taskQueue)
	s := wait(t, id, 2*time.Minute)
	noFailures(t, s)
	got := items(t, id)
	if len(got) != 1 || len(got["generic_html.story"]) != o.Stories() {
		t.Fatalf("stored %v, want %d generic_html.story items only", func() map[string]int {
			n := map[string]int{}
			for biz, m := range got {
				n[biz] = len(m)
			}
			return n
		}(), o.Stories())
	}
	for sid := 1; sid <= o.Stories(); sid++ {
		st, _ := o.Story(sid)
		u := fmt.Sprintf("%s/item/%d", site, sid)
		it, ok := got["generic_html.story"][u]
		if !ok {
			t.Errorf("story %d (%s) not stored", sid, u)
			continue
		}
		want := map[string]any{
			"id": float64(sid), "title": st.Title, "url": nil, "author": st.Author, "score": float64(st.Score),
			"time": st.Time.UTC().Format(time.RFC3339), "comments": float64(st.Comments), "text": nil,
			"rank": float64(sid), "link": u, // carried from the list page
		}
		if st.URL != "" {
			want["url"] = st.URL
		}
		if st.Text != "" {
			want["text"] = st.Text
		}
		if !reflect.DeepEqual(it.Data, want) {
			t.Errorf("story %d:\n got  %v\n want %v", sid, it.Data, want)
		}
		if it.URL != u || it.Chain != "generic-html" {
			t.Errorf("story %d: url %q chain %q", sid, it.URL, it.Chain)
		}
	}
	if list := stepStats(s, "list"); list.Pages != o.Pages || list.Items != 0 {
		t.Errorf("list step: %d pages %d items; want %d pages, nothing stored", list.Pages, list.Items, o.Pages)
	}
}

// One run of every other generic example against the demo site, with exact counts.
// siteLinksOutOfScope are the links of the two news pages (5 stories each) that
// examples/generic-site.yaml does not follow: those its include and scope leave out,
// ten a page.
const siteLinksOutOfScope = 20

func TestGenericExamplesAgainstTheDemoSite(t *testing.T) {
	o := demosite.Options{Pages: 2, PerPage: 5}
	site := startSite(t, o)
	n := o.Stories()
	storyKeys := func(prefix string, from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, prefix+strconv.Itoa(i))
		}
		sort.Strings(out)
		return out
	}
	cases := []struct {
		file  string
		sets  []string
		biz   string
		keys  []string
		check func(t *testing.T, got map[string]crawl.Item, s *workflows.Summary)
	}{
		{
			file: "generic-json.yaml", sets: []string{"stories.urls=['/api/stories?per_page=3']"},
			biz: "generic_json.stories", keys: storyKeys("", 1, n),
			check: func(t *testing.T, got map[string]crawl.Item, s *workflows.Summary) {
				st, _ := o.Story(10)
				want := map[string]any{"id": 10.0, "title": st.Title, "url": nil, "author": st.Author, "score": float64(st.Score),
					"time": st.Time.UTC().Format(time.RFC3339), "comments": float64(st.Comments), "tags": []any{"ask"}}
				if d := got["10"].Data; !reflect.DeepEqual(d, want) {
					t.Errorf("story 10:\n got  %v\n want %v", d, want)
				}
				if p := stepStats(s, "stories").Pages; p != 4 {
					t.Errorf("%d API pages, want 4 (3+3+3+1 by cursor)", p)
				}
			},
		},
		{
			file: "generic-csv.yaml", biz: "generic_csv.rows", keys: storyKeys("", 1, n),
			check: func(t *testing.T, got map[string]crawl.Item, _ *workflows.Summary) {
				st, _ := o.Story(3)
				want := map[string]any{"id": 3.0, "title": st.Title, "url": st.URL, "author": st.Author, "score": float64(st.Score),
					"time": st.Time.UTC().Format(time.RFC3339), "kind": "show"}
				if d := got["3"].Data; !reflect.DeepEqual(d, want) {
					t.Errorf("row 3:\n got  %v\n want %v", d, want)
				}
			},
		},
		{
			file: "generic-xml.yaml", biz: "generic_xml.stories", keys: storyKeys("", 1, n),
			check: func(t *testing.T, got map[string]crawl.Item, _ *workflows.Summary) {
				st, _ := o.Story(10)
				want := map[string]any{"id": 10.0, "title": st.Title, "url": nil, "author": st.Author, "score": float64(st.Score),
					"time": st.Time.UTC().Format(time.RFC3339), "kind": "ask"}
				if d := got["10"].Data; !reflect.DeepEqual(d, want) {
					t.Errorf("story 10:\n got  %v\n want %v", d, want)
				}
			},
		},
		{
			file: "generic-feed.yaml", biz: "generic_feed.entries",
			keys: append(storyKeys("demo-story-", 1, o.FeedStories()), storyKeys("tag:demo.trawler.dev,2025:story-", 1, o.FeedStories())...),
			check: func(t *testing.T, got map[string]crawl.Item, _ *workflows.Summary) {
				st, _ := o.Story(2)
				link := fmt.Sprintf("%s/item/2", site)
				rss := map[string]any{"title": st.Title, "link": link, "guid": st.GUID(), "published": st.Time.UTC().Format(time.RFC3339),
					"updated": nil, "author": st.Author, "description": st.Title, "content": nil, "categories": []any{"link"}}
				if d := got[st.GUID()].Data; !reflect.DeepEqual(d, rss) {
					t.Errorf("RSS item:\n got  %v\n want %v", d, rss)
				}
				atom := map[string]any{"title": st.Title, "link": link, "guid": st.AtomID(), "published": st.Time.UTC().Format(time.RFC3339),
					"updated": st.Time.UTC().Format(time.RFC3339), "author": st.Author, "description": nil, "content": nil, "categories": []any{"link"}}
				if d := got[st.AtomID()].Data; !reflect.DeepEqual(d, atom) {
					t.Errorf("Atom entry:\n got  %v\n want %v", d, atom)
				}
			},
		},
		{
			file: "generic-sitemap.yaml", biz: "generic_sitemap.story", keys: storyKeys(site+"/item/", 1, n),
			check: func(t *testing.T, got map[string]crawl.Item, s *workflows.Summary) {
				if sm := stepStats(s, "sitemap"); sm.Pages != 4 || sm.Skipped != o.Pages {
					t.Errorf("sitemap step: %d pages, %d skipped; want 4 (index + 3 urlsets), %d skipped (the feed pages)", sm.Pages, sm.Skipped, o.Pages)
				}
				st, _ := o.Story(7)
				want := map[string]any{"title": st.Title, "author": st.Author, "time": st.Time.UTC().Format(time.RFC3339)}
				if d := got[fmt.Sprintf("%s/item/7", site)].Data; !reflect.DeepEqual(d, want) {
					t.Errorf("story 7:\n got  %v\n want %v", d, want)
				}
			},
		},
		{
			file: "generic-site.yaml", biz: "generic_site.story", keys: storyKeys(site+"/item/", 1, n),
			check: func(t *testing.T, got map[string]crawl.Item, s *workflows.Summary) {
				sp := stepStats(s, "site")
				if sp.Pages != o.Pages || sp.TrapDropped != 0 || sp.OutOfScope != siteLinksOutOfScope {
					t.Errorf("site step: %d pages, %d links out of scope, %d trap-dropped; want %d, %d and 0", sp.Pages, sp.OutOfScope, sp.TrapDropped, o.Pages, siteLinksOutOfScope)
				}
				if st := stepStats(s, "story"); st.Pages != n || st.DuplicatesSkipped != 0 {
					t.Errorf("story step: %d pages, %d duplicates; want %d and 0", st.Pages, st.DuplicatesSkipped, n)
				}
			},
		},
		{
			file: "generic-gbk.yaml", biz: "generic_gbk.story", keys: storyKeys(site+"/gbk/item/", 1, n),
			check: func(t *testing.T, got map[string]crawl.Item, _ *workflows.Summary) {
				st, _ := o.Story(7)
				u := fmt.Sprintf("%s/gbk/item/7", site)
				want := map[string]any{"id": 7.0, "title": st.ZhTitle(), "author": st.Author, "time": st.Time.UTC().Format(time.RFC3339),
					"score": float64(st.Score), "text": st.ZhText(), "link": u}
				if d := got[u].Data; !reflect.DeepEqual(d, want) {
					t.Errorf("story 7:\n got  %v\n want %v", d, want)
				}
				if !strings.HasPrefix(st.ZhTitle(), "第7号：") {
					t.Errorf("title %q is not the Chinese one", st.ZhTitle())
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.file, ".yaml"), func(t *testing.T) {
			id := start(t, plan(t, tc.file, "", append([]string{"base_url=" + site}, tc.sets...)...), taskQueue)
			s := wait(t, id, time.Minute)
			noFailures(t, s)
			got := items(t, id)
			if len(got) != 1 {
				t.Errorf("stored in %d files, want only %s", len(got), tc.biz)
			}
			sort.Strings(tc.keys)
			if keys := sortedKeysOf(got[tc.biz]); !reflect.DeepEqual(keys, tc.keys) {
				t.Fatalf("stored %d keys %v\nwant %d keys %v", len(keys), keys, len(tc.keys), tc.keys)
			}
			tc.check(t, got[tc.biz], s)
		})
	}
}

// `trawler try` runs one task on one page with the real fetcher and prints the typed
// items as JSON; a broken selector is reported before anything is fetched.
func TestGenericTryCLI(t *testing.T) {
	o := demosite.Options{Pages: 1, PerPage: 5}
	site := startSite(t, o)
	stdout, stderr, code := trawler(t, "try", "generic.html_detail", "--params", "examples/generic-html.yaml", "--set", "base_url="+site, site+"/item/3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Items []struct {
			Key  string         `json:"key"`
			Data map[string]any `json:"data"`
		} `json:"items"`
		Next    []crawl.Input `json:"next"`
		Skipped int           `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	st, _ := o.Story(3)
	want := map[string]any{"id": 3.0, "title": st.Title, "url": st.URL, "author": st.Author, "score": float64(st.Score),
		"time": st.Time.UTC().Format(time.RFC3339), "comments": float64(st.Comments), "text": st.Text}
	if len(res.Items) != 1 || res.Items[0].Key != site+"/item/3" || !reflect.DeepEqual(res.Items[0].Data, want) || len(res.Next) != 0 || res.Skipped != 0 {
		t.Fatalf("try printed %+v\nwant the item %v", res, want)
	}

	_, stderr, code = trawler(t, "try", "generic.html_list", site+"/news", "--set", "items=tr.athing", "--set", "fields.title=span.titleline > a[")
	if code != 1 || !strings.Contains(stderr, `param fields.title: bad CSS selector "span.titleline > a[": expected identifier, found EOF instead; fix the selector`) {
		t.Fatalf("broken selector: exit %d, stderr %q", code, stderr)
	}

	stdout, stderr, code = trawler(t, "validate", "examples/generic-html.yaml", "examples/generic-json.yaml", "examples/generic-csv.yaml",
		"examples/generic-xml.yaml", "examples/generic-feed.yaml", "examples/generic-sitemap.yaml", "examples/generic-gbk.yaml")
	if code != 0 || strings.Count(stdout, ": ok") != 7 {
		t.Fatalf("validate examples: exit %d\n%s%s", code, stdout, stderr)
	}
}

// `trawler try --params CHAIN` applies the chain's middlewares as a worker does: the
// built-in header middleware's header reaches the site.
func TestTryAppliesTheChainsMiddlewares(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html><body><h1>team %s</h1></body></html>", r.Header.Get("X-Team"))
	}))
	defer srv.Close()
	chain := filepath.Join(t.TempDir(), "chain.yaml")
	os.WriteFile(chain, []byte("name: mw\nrobots: false\nmiddlewares: [header: {X-Team: news}]\nsteps:\n  - id: page\n    task: generic.html_detail\n    params: {fields: {title: h1}}\n"), 0o644)
	stdout, stderr, code := trawler(t, "try", "generic.html_detail", "--params", chain, srv.URL+"/", "--json", "--allow-private")
	if code != 0 || !strings.Contains(stdout, `"title":"team news"`) {
		t.Fatalf("exit %d, stdout %s, stderr %s; want the title read with the chain's header", code, stdout, stderr)
	}
}
