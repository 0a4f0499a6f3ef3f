package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/internal/events"
)

// `trawler events tail --json` prints the newest events oldest first, one JSON object
// a line, and --tenant and --type pick among them.
func TestEventsTailPrintsEvents(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	var ids []string
	for _, e := range []events.Event{
		{Type: events.RunStarted, Tenant: "acme", Chain: "shop", RunID: "shop-1"},
		{Type: events.RunFinished, Tenant: "other", Chain: "blog", RunID: "blog-1"},
		{Type: events.RunFailed, Tenant: "acme", Chain: "shop", RunID: "shop-1", Detail: map[string]any{"outcome": "failed"}},
	} {
		got, err := events.Emit(ctx, rdb, e)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got.ID)
	}
	tail := func(args ...string) []events.Event {
		t.Helper()
		cmd := eventsCmd(&Settings{Redis: mr.Addr(), JSON: true})
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"tail"}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("events tail %s: %v", strings.Join(args, " "), err)
		}
		var list []events.Event
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var e events.Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			list = append(list, e)
		}
		return list
	}
	all := tail()
	if len(all) != 3 || all[0].ID != ids[0] || all[2].ID != ids[2] || all[2].Detail["outcome"] != "failed" || all[1].Tenant != "other" {
		t.Fatalf("events tail --json = %+v; want the 3 events %v oldest first", all, ids)
	}
	if got := tail("--tenant", "acme", "--type", "run_failed"); len(got) != 1 || got[0].ID != ids[2] {
		t.Fatalf("--tenant acme --type run_failed = %+v; want only %s", got, ids[2])
	}
}
