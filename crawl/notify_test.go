package crawl_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// A chain's notify: lists its webhooks; a URL that is not http(s), an unknown event
// type and a secret written in the file are each an error on their line with the fix.
func TestLoadNotifyWebhooks(t *testing.T) {
	reg := testRegistry()
	const head = "name: x\nsteps:\n  - id: feed\n    task: news.feed\nnotify:\n  webhooks:\n"
	good := head + "    - url: https://hooks.example.com/t\n      secret_env: HOOK_SECRET\n      events: [run_failed, expectation_broken]\n      format: slack\n"
	c, err := crawl.Load("f.yaml", []byte(good), crawl.LoadOptions{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	want := []crawl.Notify{{URL: "https://hooks.example.com/t", SecretEnv: "HOOK_SECRET", Events: []string{"run_failed", "expectation_broken"}, Format: "slack", Line: 7}}
	if !reflect.DeepEqual(c.Notify, want) {
		t.Fatalf("notify = %+v, want %+v", c.Notify, want)
	}
	bad := head + "    - url: ftp://hooks.example.com/t\n      events: [run_faild]\n      secret: hunter2\n"
	_, err = crawl.Load("f.yaml", []byte(bad), crawl.LoadOptions{Registry: reg})
	for _, w := range []string{
		`f.yaml:7: webhook url "ftp://hooks.example.com/t" is not an http(s) URL: write it as https://host/path`,
		`f.yaml:8: webhook event "run_faild" is not an event type (did you mean "run_failed"?)`,
		"f.yaml:9: a webhook's secret is not written in the chain file, where every reader sees it: put it in an environment variable of the workers and write `secret_env: NAME`",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v\nlacks %s", err, w)
		}
	}
}
