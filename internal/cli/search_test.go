package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/storage/es"
)

func TestSearchCommand(t *testing.T) {
	dir := t.TempDir()
	url, stop, err := eslite.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := os.WriteFile(filepath.Join(dir, "endpoints.json"), []byte(`{"temporal":"x","namespace":"default","es":"`+url+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sink, err := es.Open(ctx, es.Options{Addresses: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	var items []crawl.Item
	for i, title := range []string{"Go concurrency patterns", "Rust ownership", "Go generics"} {
		items = append(items, crawl.Item{Biz: "demo.story", Key: "s" + string(rune('1'+i)), TS: ts, RunID: "r1",
			Data: map[string]any{"title": title, "points": (i + 1) * 10, "author": []string{"ann", "bob", "ann"}[i]}})
	}
	if err := sink.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := searchCmd(&Settings{Data: dir})
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	out, err := run("go", "--sort", "data.points:desc")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "KEY") || strings.Index(out, "s3") > strings.Index(out, "s1") || !strings.Contains(out, "Go generics") || !strings.Contains(out, "2 hits, 2 shown") {
		t.Fatalf("table:\n%s", out)
	}
	out, err = run("--size", "0", "--agg", "data.author.keyword")
	if err != nil || !strings.Contains(out, "data.author.keyword:") || !strings.Contains(out, "ann") {
		t.Fatalf("agg: %v\n%s", err, out)
	}
	dsl := filepath.Join(dir, "q.json")
	_ = os.WriteFile(dsl, []byte(`{"query":{"range":{"data.points":{"gte":20}}},"aggs":{"max":{"max":{"field":"data.points"}}}}`), 0o644)
	out, err = run("--dsl", dsl)
	if err != nil || !strings.Contains(out, "2 hits") || !strings.Contains(out, "max: 30") {
		t.Fatalf("dsl: %v\n%s", err, out)
	}
	// A field name the indexes do not have says so, with the name that works.
	out, err = run("title:go")
	if err != nil || !strings.Contains(out, "0 hits") || !strings.Contains(out, "title is not a field of trawler-items: the task's fields are under data.: data.title\n") {
		t.Fatalf("title:go: %v\n%s", err, out)
	}
	out, err = run("--size", "0", "--agg", "data.nope")
	if err != nil || !strings.Contains(out, "data.nope: no index of trawler-items has this field\n") {
		t.Fatalf("agg on a missing field: %v\n%s", err, out)
	}
	out, err = run("--size", "0", "--agg", "author")
	if err != nil || !strings.Contains(out, "author: no index of trawler-items has this field; aggregate on data.author.keyword\n") {
		t.Fatalf("agg on a field outside data: %v\n%s", err, out)
	}
	_, err = run("--size", "0", "--agg", "data.author")
	if err == nil || !strings.Contains(err.Error(), "data.author is a text field: aggregate on data.author.keyword") {
		t.Fatalf("agg on a text field: %v", err)
	}
	_, err = run("data.title:(go")
	if err == nil || !strings.Contains(err.Error(), "query_shard_exception") {
		t.Fatalf("bad query: %v", err)
	}
}

// --tenant searches through the tenant's filtered alias: only its documents, whatever
// the query says.
func TestSearchCommandByTenant(t *testing.T) {
	dir := t.TempDir()
	url, stop, err := eslite.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	sink, err := es.Open(ctx, es.Options{Addresses: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	var items []crawl.Item
	for _, k := range []string{"acme/a1", "acme/a2", "globex/g1"} {
		tenant, key, _ := strings.Cut(k, "/")
		items = append(items, crawl.Item{Biz: "demo.story", Key: key, TS: ts, RunID: "r1", Tenant: tenant, Data: map[string]any{"title": "Go " + key}})
	}
	if err := sink.Write(ctx, items); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := searchCmd(&Settings{ES: url})
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	for _, c := range []struct {
		args []string
		want string
		not  string
	}{
		{[]string{"go", "--tenant", "acme"}, "2 hits, 2 shown", "g1"},
		{[]string{"tenant:globex", "--tenant", "acme"}, "0 hits, 0 shown", "g1"},
		{[]string{"--tenant", "globex", "--index", "trawler-demo-story"}, "1 hits, 1 shown", "a1"},
		{[]string{"go"}, "3 hits, 3 shown", "\x00"},
	} {
		out, err := run(c.args...)
		if err != nil || !strings.Contains(out, c.want) || strings.Contains(out, c.not) {
			t.Errorf("search %q: %v\n%s", c.args, err, out)
		}
	}
	_, err = run("go", "--tenant", "acme", "--index", "trawler.globex")
	if err == nil || err.Error() != `--index: index "trawler.globex" is another tenant's alias, not tenant acme's: use trawler.acme, or trawler.acme.<site>-<task> for one task` {
		t.Errorf("another tenant's alias: %v", err)
	}
}
