package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/polite"
)

// busyReason is what a worker writes when a host answers 429 with a long Retry-After.
const busyReason = "HTTP 429 with Retry-After 1h0m0s"

// pausedHost holds one slot of key's budget (3 at once, one start every 250ms,
// declared) and pauses it for an hour, as a worker does on a 429; the slot goes back
// when the test ends.
func pausedHost(t *testing.T, key string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: stack.redis.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	f := polite.New(rdb, "w1")
	t.Cleanup(f.Close)
	release, err := f.Take(ctx, fetch.Budget{Key: key, Concurrency: 3, Interval: 250 * time.Millisecond, Source: "declared", Lease: time.Minute, PauseWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	if err := f.Pause(ctx, key, time.Now().Add(time.Hour), busyReason); err != nil {
		t.Fatal(err)
	}
}

// /api/hosts lists the fleet's host budgets as the workers left them in Redis: the
// limit in force and its source, what is in flight, and a pause with its reason.
func TestHostBudgets(t *testing.T) {
	const key = "http://hosts-api.test:8080"
	pausedHost(t, key)
	// A worker adds a budget to the index just after its first slot, in the background.
	var host map[string]any
	for deadline := time.Now().Add(5 * time.Second); host == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		status, out := api(t, "GET", "/api/hosts", nil)
		if status != http.StatusOK {
			t.Fatalf("hosts: %d %v", status, out)
		}
		for _, h := range list(out["hosts"]) {
			if obj(h)["host"] == key {
				host = obj(h)
			}
		}
	}
	if host == nil {
		t.Fatalf("/api/hosts never listed %s", key)
	}
	if host["concurrency"] != 3.0 || host["source"] != "declared" || host["in_flight"] != 1.0 || host["interval_ns"] != float64(250*time.Millisecond) {
		t.Errorf("host %v: want 3 at once, one start every 250ms, declared, 1 in flight", host)
	}
	if host["reason"] != busyReason || host["busy"] != busyReason {
		t.Errorf("host %v: want paused and last busy for %q", host, busyReason)
	}
	until, err := time.Parse(time.RFC3339Nano, host["paused_until"].(string))
	if err != nil || time.Until(until) < 59*time.Minute || time.Until(until) > time.Hour {
		t.Errorf("paused until %v (%v): want an hour from now", host["paused_until"], err)
	}
}

// The dashboard's Hosts panel shows a paused host's row: in flight of its limit, the
// pace, its source and why it is paused.
func TestBrowserHostsPanel(t *testing.T) {
	const key = "http://hosts-panel.test:8080"
	pausedHost(t, key)
	b := newBrowser(t)
	b.run("open the dashboard", chromedp.Navigate(stack.console.URL+"/"), chromedp.WaitReady("#hosts", chromedp.ByQuery))
	row := b.waitText(`#hosts tr[data-host="`+key+`"]`, "the paused host's row", 15*time.Second, func(s string) bool { return s != "" })
	for _, want := range []string{"1/3", "4/s", "declared", "PAUSED until ", ": " + busyReason} {
		if !strings.Contains(row, want) {
			t.Errorf("hosts row %q lacks %q", row, want)
		}
	}
	b.shot("hosts")
}
