package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
)

// storeHBase adds the hbase sink to every step that stores items.
func storeHBase(p *crawl.Plan) *crawl.Plan {
	for i := range p.Steps {
		if len(p.Steps[i].Store) > 0 && !slices.Contains(p.Steps[i].Store, "hbase") {
			p.Steps[i].Store = append(p.Steps[i].Store, "hbase")
		}
	}
	return p
}

func TestHBaseKeepsEveryVersion(t *testing.T) {
	zk, stopHBase, err := hbaselite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopHBase()
	queue := "hbase-" + fmt.Sprint(time.Now().UnixNano())
	w, err := engine.NewWorker(shared.client, engine.WorkerOptions{
		TaskQueue: queue, OutDir: t.TempDir(), Log: quiet, Redis: shared.redis.Addr(), HBase: zk,
		Fetch: fastFetch,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	sink := w.Sinks["hbase"].(*hbase.Sink)
	ctx := context.Background()
	tenant := tenantOf(t) // plan's tenant

	// First crawl: every record is new and gets its first version.
	o := demosite.Options{Pages: 1}
	first := start(t, storeHBase(plan(t, "demo.yaml", "", "base_url="+startSite(t, o), "feed.pages=1")), queue)
	wait(t, first, 2*time.Minute)
	stories, comments := demosite.Expected(o, 1)
	if n, err := sink.Count(ctx, first); err != nil || n != stories+comments {
		t.Fatalf("first run: hbase holds %d records (%v), want %d", n, err, stories+comments)
	}

	// Two stories gain a point; the crawl again stores exactly those, as second versions.
	o.Upvoted = map[int]bool{4: true, 17: true}
	second := start(t, storeHBase(plan(t, "demo.yaml", "", "base_url="+startSite(t, o), "feed.pages=1")), queue)
	s2 := wait(t, second, 2*time.Minute)
	if n, err := sink.Count(ctx, second); err != nil || n != 2 {
		t.Fatalf("second run: hbase holds %d records (%v), want 2", n, err)
	}
	if s2.Unchanged() != stories+comments-2 {
		t.Errorf("second run: %d unchanged, want %d", s2.Unchanged(), stories+comments-2)
	}
	for _, id := range []int{4, 17} {
		rec, err := sink.History(ctx, tenant, "demo.story", fmt.Sprintf("demo:story:%d", id), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Versions) != 2 {
			t.Fatalf("story %d: %d versions, want 2", id, len(rec.Versions))
		}
		newer, older := rec.Versions[0], rec.Versions[1]
		var was, now int
		json.Unmarshal(older.Fields["score"], &was)
		json.Unmarshal(newer.Fields["score"], &now)
		if newer.RunID != second || older.RunID != first || now != was+1 || !slices.Equal(newer.Changed, []string{"score"}) || !newer.TS.After(older.TS) {
			t.Errorf("story %d: newest %+v (score %d), oldest %+v (score %d)", id, newer, now, older, was)
		}
	}
	for _, key := range []string{"demo:story:5", "demo:story:30"} {
		if rec, err := sink.History(ctx, tenant, "demo.story", key, 0); err != nil || len(rec.Versions) != 1 || rec.Versions[0].RunID != first {
			t.Errorf("unchanged %s: %+v, %v; want one version from the first run", key, rec, err)
		}
	}

	// Another tenant's crawl of story 4 is its own record: neither history shows the
	// other's runs.
	other := crawl.Item{Tenant: "other", Biz: "demo.story", Key: "demo:story:4", URL: "http://other/4", TS: time.Now(), Hash: "h", RunID: "other-run",
		Data: map[string]any{"score": -1}}
	if err := sink.Write(ctx, []crawl.Item{other}); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := trawler(t, "history", "demo:story:4", "--tenant", "other", "--hbase", zk)
	if code != 0 || !strings.Contains(stdout, "1 version, newest first") || !strings.Contains(stdout, "run other-run") || strings.Contains(stdout, first) || strings.Contains(stdout, second) {
		t.Errorf("trawler history --tenant other: exit %d, want only other-run:\n%s%s", code, stdout, stderr)
	}

	// What a user sees.
	stdout, stderr, code = trawler(t, "history", "demo:story:4", "--tenant", tenant, "--hbase", zk)
	if code != 0 {
		t.Fatalf("trawler history: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"demo:story:4 (demo.story): 2 versions, newest first", "run " + second + "  (1 changed: score)", "run " + first + "  (oldest shown)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("trawler history output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stdout, "* score") || !strings.Contains(stdout, "(was ") {
		t.Errorf("trawler history does not mark the changed score:\n%s", stdout)
	}
	if strings.Contains(stdout, "other-run") {
		t.Errorf("trawler history --tenant %s shows the other tenant's run:\n%s", tenant, stdout)
	}
	stdout, stderr, code = trawler(t, "history", "demo:story:4", "--tenant", tenant, "--biz", "demo.story", "--versions", "1", "--hbase", zk, "--json")
	var rec hbase.Record
	if code != 0 || json.Unmarshal([]byte(stdout), &rec) != nil || len(rec.Versions) != 1 || rec.Versions[0].RunID != second || rec.Tenant != tenant {
		t.Errorf("trawler history --json --versions 1: exit %d, %q %s", code, stdout, stderr)
	}
	_, stderr, code = trawler(t, "history", "demo:story:999", "--tenant", tenant, "--hbase", zk)
	if code != 1 || !strings.Contains(stderr, `no record with key "demo:story:999"`) {
		t.Errorf("history of a missing key: exit %d, %s", code, stderr)
	}
}
