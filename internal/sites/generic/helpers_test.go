package generic

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

var testFetcher = fetch.New(fetch.Options{Retries: -1, Timeout: 5 * time.Second, AllowPrivate: true})

// params loads a one-step chain running task with these YAML params (indented by the
// caller's own layout), as `trawler validate` and a worker see them: validated, defaults
// applied, typed, and through the JSON round trip of workflow history.
func params(t *testing.T, task, yamlParams string) crawl.Params {
	t.Helper()
	p, err := loadParams(task, yamlParams)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func loadParams(task, yamlParams string) (crawl.Params, error) {
	var b strings.Builder
	b.WriteString("name: t\nsteps:\n  - id: s\n    task: " + task + "\n    params:\n")
	for _, line := range strings.Split(strings.Trim(yamlParams, "\n"), "\n") {
		b.WriteString("      " + line + "\n")
	}
	c, err := crawl.Load("chain.yaml", []byte(b.String()), crawl.LoadOptions{})
	if err != nil {
		return nil, err
	}
	plan, err := c.Compile(nil)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(plan.Steps[0].Params)
	if err != nil {
		return nil, err
	}
	var p crawl.Params
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	return p, nil
}

// runTask runs one input as step "s" of a chain.
func runTask(t *testing.T, task crawl.Task, p crawl.Params, in crawl.Input) (crawl.Result, error) {
	t.Helper()
	return runAs(t, "s", task, p, in)
}

func runAs(t *testing.T, step string, task crawl.Task, p crawl.Params, in crawl.Input) (crawl.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return task.Run(ctx, &crawl.Env{Params: p, Fetcher: testFetcher, Step: step}, in)
}

func mustRun(t *testing.T, task crawl.Task, p crawl.Params, in crawl.Input) crawl.Result {
	t.Helper()
	res, err := runTask(t, task, p, in)
	if err != nil {
		t.Fatalf("%s %s: %v", task.Spec().Name, in.Describe(), err)
	}
	return res
}

// follow runs task from the seed and then over every input it addresses to itself, as a
// step consuming its own outputs does, up to limit runs. It returns every result in
// order and the URLs visited.
func follow(t *testing.T, task crawl.Task, p crawl.Params, limit int) (all crawl.Result, visited []string) {
	t.Helper()
	queue := []crawl.Input{{}}
	for runs := 0; len(queue) > 0; runs++ {
		if runs == limit {
			t.Fatalf("%s still had %d inputs after %d runs: a loop was not stopped", task.Spec().Name, len(queue), limit)
		}
		in := queue[0]
		queue = queue[1:]
		if in.URL != "" {
			visited = append(visited, in.URL)
		}
		res := mustRun(t, task, p, in)
		all.Items = append(all.Items, res.Items...)
		all.Skipped += res.Skipped
		for _, next := range res.Next {
			if next.Task == task.Spec().Name {
				queue = append(queue, next)
			} else {
				all.Next = append(all.Next, next)
			}
		}
	}
	return all, visited
}

// site serves fixed pages on loopback; a path maps to a body, or to a handler.
func site(t *testing.T, pages map[string]any) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for path, v := range pages {
		switch x := v.(type) {
		case string:
			body := x
			mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != path {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_, _ = w.Write([]byte(body))
			})
		case http.HandlerFunc:
			mux.HandleFunc(path, x)
		case func(http.ResponseWriter, *http.Request):
			mux.HandleFunc(path, x)
		default:
			t.Fatalf("page %s: unsupported %T", path, v)
		}
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// typed serves body with a Content-Type.
func typed(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		} else {
			w.Header()["Content-Type"] = nil
		}
		_, _ = w.Write(body)
	}
}

func wantData(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Errorf("%s:\n got  %s\n want %s", what, gb, wb)
		for k, w := range want {
			if g := got[k]; !reflect.DeepEqual(g, w) {
				t.Errorf("  %s: got %#v (%T), want %#v (%T)", k, g, g, w, w)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("  unexpected field %s = %#v", k, got[k])
			}
		}
	}
}

func keys(items []crawl.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Key
	}
	return out
}

func urls(ins []crawl.Input) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.URL
	}
	return out
}
