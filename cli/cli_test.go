package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/cli"
	"github.com/trawlerhq/trawler/crawl"
)

// A task named like a built-in one is refused before any command runs, with the name
// and the fix.
func TestRunRefusesATaskNamedLikeABuiltInOne(t *testing.T) {
	clash := crawl.FollowTask("demo.story", func(*crawl.Page) error { return nil })
	err := cli.Run(context.Background(), []string{"validate", "testdata/headlines.yaml"}, clash)
	want := `cli.Main: task "demo.story" registered twice: two different tasks have this name; rename one: a task's name is unique in a binary (the binary's tasks: [`
	if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "demo.story") {
		t.Fatalf("got %v\nwant %s…", err, want)
	}
}
