package render

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// BenchmarkActionCost measures what each kind of action costs a rendered page on the
// demo site: each iteration renders one page with the action, and the action's own time
// (from its outcome) is reported as ms/action beside the whole page's ms/page. The
// "none" case is the same kind of page without an action, for the ratio.
//
//	go test -run X -bench BenchmarkActionCost -benchtime 10x ./fetch/render
func BenchmarkActionCost(b *testing.B) {
	base := demo(b, demosite.Options{})
	p := startPool(b, Options{Browsers: 1, Tabs: 1})
	click := crawl.Action{Kind: crawl.ActionClick, Selector: "button.more"}
	fill := crawl.Action{Kind: crawl.ActionFill, Selector: "#q", Value: "boots"}
	for _, c := range []struct {
		name, url string
		acts      []crawl.Action
	}{
		{"none", "/js/more?total=1000&per=10", nil},
		{"click_loads_more", "/js/more?total=1000&per=10", []crawl.Action{click}},
		{"scroll_loads_more", "/js/scroll?total=1000&per=20", []crawl.Action{{Kind: crawl.ActionScroll}}},
		{"fill", "/js/search", []crawl.Action{fill}},
		{"select", "/js/search", []crawl.Action{{Kind: crawl.ActionSelect, Selector: "#sort", Value: "Newest"}}},
		{"press", "/js/search", []crawl.Action{fill, {Kind: crawl.ActionPress, Value: "Enter"}}},
		{"wait_for_present", "/js/more?total=1000&per=10", []crawl.Action{{Kind: crawl.ActionWaitFor, Selector: ".item"}}},
		{"script", "/js/more?total=1000&per=10", []crawl.Action{{Kind: crawl.ActionScript, Value: `document.title = "seen"`}}},
		{"optional_absent_300ms", "/js/more?total=1000&per=10", []crawl.Action{{Kind: crawl.ActionClick, Selector: "#consent .accept", Optional: true, Timeout: 300 * time.Millisecond}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := renderer(p, actionsOpts(c.acts...))
			var took time.Duration
			r.Observe = func(o ActionOutcome) {
				if o.Err != nil {
					b.Errorf("%s %s: %v", o.Path, o.Action, o.Err)
				}
				if o.Path == fmt.Sprintf("render.actions[%d]", len(c.acts)-1) {
					took += o.Took
				}
			}
			start := time.Now()
			for b.Loop() {
				if _, err := r.Fetch(context.Background(), &crawl.Request{URL: base + c.url}); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(time.Since(start).Milliseconds())/n, "ms/page")
			b.ReportMetric(float64(took.Milliseconds())/n, "ms/action")
		})
	}
}
