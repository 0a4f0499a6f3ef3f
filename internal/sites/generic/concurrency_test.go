package generic

import (
	"sync"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

func TestConcurrentRunsShareOneConfig(t *testing.T) {
	base := site(t, map[string]any{"/x": `<table><tr><td><a href="/p/1">One</a></td></tr><tr><td><a href="/p/2">Two</a></td></tr></table>`}).URL
	p := params(t, HTMLListTask, "urls: ["+base+"/x]\nitems: //tr\nfields: {name: './td/a', href: {xpath: './td/a/@href', type: url}, n: {css: a, regex: '(\\w+)'}}")
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				res, err := runTask(t, HTMLList, p, crawl.Input{})
				if err != nil || len(res.Items) != 2 || res.Items[1].Data["name"] != "Two" {
					t.Errorf("run: %v %+v", err, res.Items)
					return
				}
			}
		}()
	}
	wg.Wait()
}
