package cli_test

import (
	"context"
	"fmt"

	"github.com/trawlerhq/trawler/cli"
	"github.com/trawlerhq/trawler/crawl"
)

// Headline is what the example task stores: the page's first h1.
type Headline struct {
	Title string `json:"title" css:"h1" required:"true"`
}

// title is a task of the binary's own: one item per page, keyed by the page's URL.
var title = crawl.HTMLTask("example.title", func(p *crawl.Page, out *crawl.Out[Headline]) error {
	out.PageItem(out.Scan(p))
	return nil
}, crawl.StartAt("https://example.com/"))

// The main package of a site repository: the whole trawler command, with its tasks.
func ExampleMain() {
	cli.Main(title)
}

// Run is Main without the exit, for a program that runs the command among other work.
// Here it checks a chain file of the new task, as `trawler validate` does.
func ExampleRun() {
	err := cli.Run(context.Background(), []string{"validate", "testdata/headlines.yaml"}, title)
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// testdata/headlines.yaml: ok
}
