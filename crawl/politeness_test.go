package crawl_test

import (
	"context"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// A chain's politeness reaches each step's plan: the step's block over the defaults'
// over the task's own limits, with host patterns most specific first.
func TestPolitenessPlan(t *testing.T) {
	reg := crawl.NewRegistry()
	noop := func(context.Context, *crawl.Env, crawl.Input) (crawl.Result, error) { return crawl.Result{}, nil }
	reg.Register(
		crawl.TaskFunc(crawl.TaskSpec{Name: "shop.list", RateLimit: 5, HostConcurrency: 3}, noop),
		crawl.TaskFunc(crawl.TaskSpec{Name: "shop.item"}, noop),
	)
	src := `name: shop
defaults:
  politeness:
    delay: 250ms
    jitter: 50ms
    group: domain
    hosts:
      "*.cdn.test": {rate: 30/m, robots: ignore}
      img.cdn.test: {concurrency: 1}
steps:
  - id: list
    task: shop.list
  - id: item
    task: shop.item
    from: list
    politeness:
      rate: 2/s
      autothrottle: {target: 2, max_delay: 30s}
`
	c, err := crawl.Load("shop.yaml", []byte(src), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Compile(reg)
	if err != nil {
		t.Fatal(err)
	}
	list, item := p.Steps[0].Politeness, p.Steps[1].Politeness
	if list.Rate != 5 || list.Concurrency != 3 || list.Delay != 250*time.Millisecond || list.Group != crawl.GroupDomain {
		t.Errorf("list: %+v; want the task's rate 5 and concurrency 3 under the chain's delay and group", list)
	}
	if item.Rate != 2 || item.Concurrency != 0 || item.AutoThrottle == nil || item.AutoThrottle.Target != 2 || item.AutoThrottle.Max != 30*time.Second {
		t.Errorf("item: %+v; want its own rate and autothrottle", item)
	}
	img := item.ForHost("img.cdn.test")
	if img.Concurrency != 1 || img.Rate != 2 || img.Robots != "" {
		t.Errorf("img.cdn.test: %+v; want the exact pattern (concurrency 1) over the step's rate", img)
	}
	www := item.ForHost("www.cdn.test")
	if www.Rate != 0.5 || www.Robots != crawl.RobotsIgnore || www.Delay != 250*time.Millisecond {
		t.Errorf("www.cdn.test: %+v; want the wildcard's 30/m and robots: ignore", www)
	}
	if apex := item.ForHost("cdn.test"); apex.Rate != 2 {
		t.Errorf("cdn.test: %+v; *.cdn.test must not match the domain itself", apex)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"2/s": 2, "30/m": 0.5, "360/h": 0.1, "4": 4, "1.5 / s": 1.5} {
		if got, err := crawl.ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "0/s", "-1/s", "2/d", ""} {
		if _, err := crawl.ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) took it", in)
		}
	}
}
