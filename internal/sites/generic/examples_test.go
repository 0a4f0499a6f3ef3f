package generic

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/external"
)

// Every generic example chain validates (as `trawler validate` checks it) and compiles.
func TestExamplesValidate(t *testing.T) {
	names, err := fs.Glob(examples.Files, "generic-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 8 {
		t.Fatalf("%d generic examples, want one per executor (8): %v", len(names), names)
	}
	for _, name := range names {
		data, _ := examples.Files.ReadFile(name)
		c, err := crawl.Load("examples/"+name, data, crawl.LoadOptions{Sinks: append([]string{"jsonl"}, external.SinkNames()...), Sets: []string{"base_url=http://127.0.0.1:1"}})
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if _, err := c.Compile(nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, s := range c.Steps {
			if !strings.HasPrefix(s.Task, "generic.") {
				t.Errorf("%s: step %s runs %s", name, s.ID, s.Task)
			}
		}
	}
}
