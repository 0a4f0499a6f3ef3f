// Package budgettest checks what every fetch.Budgets must do, so the budgets a process
// keeps (fetch.LocalBudgets) and those a fleet keeps in Redis (internal/polite) are held
// to the same tests.
package budgettest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/fetch"
)

// UrgentGoesFirst holds b's only slot while five requests and then an urgent one (the
// next page of a paged list) wait for it, frees it, and checks that the urgent one
// starts first, that all six start, and that no two are ever in flight at once.
func UrgentGoesFirst(t *testing.T, budgets fetch.Budgets, b fetch.Budget) {
	t.Helper()
	if b.Concurrency != 1 {
		t.Fatalf("UrgentGoesFirst needs a budget of one slot, not %d", b.Concurrency)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release, err := budgets.Take(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var inFlight, peak atomic.Int32
	var wg sync.WaitGroup
	start := func(name string, b fetch.Budget) {
		wg.Go(func() {
			release, err := budgets.Take(ctx, b)
			if err != nil {
				t.Error(err)
				return
			}
			if k := inFlight.Add(1); k > peak.Load() {
				peak.Store(k)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			inFlight.Add(-1)
			release()
		})
	}
	for i := range 5 {
		start(fmt.Sprint("plain ", i), b)
	}
	time.Sleep(100 * time.Millisecond) // they wait for the slot
	urgent := b
	urgent.Urgent = true
	start("urgent", urgent)
	time.Sleep(100 * time.Millisecond)
	release()
	wg.Wait()
	if len(order) != 6 || order[0] != "urgent" {
		t.Fatalf("order of starts %v: all six should start, the urgent request first", order)
	}
	if p := peak.Load(); p > 1 {
		t.Fatalf("%d requests in flight at once; the budget is 1", p)
	}
}

// UrgentDoesNotStarve checks that urgent requests that keep coming (a site crawl's pages
// are all urgent) do not starve the others: a plain request yields to them for at most
// fetch.UrgentYield, then takes its turn among them.
func UrgentDoesNotStarve(t *testing.T, budgets fetch.Budgets, b fetch.Budget) {
	t.Helper()
	urgent := b
	urgent.Urgent = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stop atomic.Bool
	var urgentDone atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				release, err := budgets.Take(ctx, urgent)
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(2 * time.Millisecond)
				release()
				urgentDone.Add(1)
				time.Sleep(time.Millisecond) // reads the page before it asks for the next
			}
		})
	}
	for urgentDone.Load() < 10 && ctx.Err() == nil { // the urgent stream is flowing
		time.Sleep(time.Millisecond)
	}
	release, err := budgets.Take(ctx, b)
	ranBeside := !stop.Load()
	stop.Store(true)
	if err == nil {
		release()
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !ranBeside {
		t.Fatal("the plain request started only after the urgent ones stopped")
	}
}
