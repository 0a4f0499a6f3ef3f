package tests

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/polite"
)

// `trawler status` lists the host budgets used in the last hour, newest first, as many
// as --hosts asks: the limit in force and where it comes from, in flight, a pause and
// why, the last 429/503; --json lists every budget Redis keeps.
func TestStatusShowsHostBudgets(t *testing.T) {
	rd := miniredis.RunT(t) // its own Redis: the rows are exactly these budgets
	rdb := redis.NewClient(&redis.Options{Addr: rd.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	f := polite.New(rdb, "w1")
	defer f.Close()
	// take holds a slot of b, and returns once the budget is listed, a little later
	// than the one before, so the order newest first is this order reversed.
	take := func(b fetch.Budget) {
		t.Helper()
		b.Lease, b.PauseWait = time.Minute, time.Second
		release, err := f.Take(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		eventually(t, 5*time.Second, b.Key+" listed", func() bool {
			hosts, err := polite.Hosts(ctx, rdb, 0)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(hosts, func(h polite.Host) bool { return h.Key == b.Key })
		})
		// The index orders by the millisecond of last use: the next host must be used
		// in a later one, which only the clock can give.
		time.Sleep(5 * time.Millisecond)
	}
	const old, idle, backedOff, paused = "http://old.test", "http://idle.test", "http://backed-off.test", "http://paused.test"
	take(fetch.Budget{Key: old, Concurrency: 8, Source: "default"})
	// Used two hours ago, as far as the hosts index knows.
	rdb.ZAdd(ctx, "trawler:polite:hosts", redis.Z{Score: float64(time.Now().Add(-2 * time.Hour).UnixMilli()), Member: old})
	take(fetch.Budget{Key: idle, Concurrency: 8, Source: "default"})
	take(fetch.Budget{Key: backedOff, Concurrency: 2, Interval: time.Second, Source: "robots"})
	const was503 = "HTTP 503 without Retry-After, 1 in a row"
	if err := f.Pause(ctx, backedOff, time.Now().Add(time.Millisecond), was503); err != nil {
		t.Fatal(err)
	}
	take(fetch.Budget{Key: paused, Concurrency: 2, Interval: 250 * time.Millisecond, Source: "declared"})
	const was429 = "HTTP 429 with Retry-After 1h0m0s"
	if err := f.Pause(ctx, paused, time.Now().Add(time.Hour), was429); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the clock passes the end of the 503's pause

	common := []string{"--temporal", shared.stack.Endpoints.Temporal, "--namespace", shared.stack.Endpoints.Namespace, "--redis", rd.Addr()}
	stdout, stderr, code := trawler(t, append([]string{"status", "--hosts", "2"}, common...)...)
	if code != 0 {
		t.Fatalf("trawler status: exit %d: %s %s", code, stdout, stderr)
	}
	t.Logf("trawler status --hosts 2:\n%s", stdout)
	rows := map[string][]string{}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "http://") {
			rows[f[0]] = f
		}
	}
	if len(rows) != 2 || !strings.Contains(stdout, "… 1 more (--hosts 3)") {
		t.Errorf("status --hosts 2 lists %d hosts, want the 2 newest of the 3 used in the last hour and \"… 1 more (--hosts 3)\":\n%s", len(rows), stdout)
	}
	if r := rows[paused]; len(r) < 6 || strings.Join(r[1:4], " ") != "1/2 4/s declared" || r[5] != "PAUSED" || !strings.HasSuffix(strings.Join(r, " "), ": "+was429) {
		t.Errorf("row of the paused host %q; want 1/2 in flight, 4/s, declared, PAUSED until …: %s", r, was429)
	}
	if r := rows[backedOff]; len(r) < 6 || strings.Join(r[1:4], " ") != "1/2 1/s robots" || !strings.Contains(strings.Join(r, " "), " last 429/503 ") || !strings.HasSuffix(strings.Join(r, " "), " ago: "+was503) {
		t.Errorf("row of the host that got a 503 %q; want 1/2 in flight, 1/s, robots, last 429/503 …s ago: %s", r, was503)
	}

	_, stderr, code = trawler(t, append([]string{"status", "--hosts", "0"}, common...)...)
	if want := "--hosts 0: give how many host budgets to list, at least 1 (e.g. --hosts 50); --json lists them all"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("status --hosts 0: exit %d, %q; want exit 1 and %q", code, stderr, want)
	}

	stdout, stderr, code = trawler(t, append([]string{"status", "--hosts", "2", "--json"}, common...)...)
	var ov struct {
		Hosts []polite.Host `json:"hosts"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &ov) != nil {
		t.Fatalf("trawler status --json: exit %d: %s %s", code, stdout, stderr)
	}
	var keys []string
	for _, h := range ov.Hosts {
		keys = append(keys, h.Key)
	}
	if !slices.Equal(keys, []string{paused, backedOff, idle, old}) {
		t.Errorf("status --json lists hosts %q; want all four, newest first", keys)
	}
	if h := ov.Hosts[0]; h.Concurrency != 2 || h.Interval != 250*time.Millisecond || h.Source != "declared" || h.InFlight != 1 || h.Reason != was429 || time.Until(h.PausedUntil) < 59*time.Minute {
		t.Errorf("status --json: %+v; want 2 at once, 250ms apart, declared, 1 in flight, paused an hour for %q", h, was429)
	}
}
