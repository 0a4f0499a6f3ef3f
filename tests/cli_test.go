package tests

import (
	"bytes"
	"encoding/json"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/examples"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/endpoints"
)

// trawler runs the real binary and returns stdout, stderr and the exit code.
func trawler(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return trawlerEnv(t, nil, args...)
}

// trawlerEnv runs the real binary with extra environment variables (NAME=value).
func trawlerEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(buildTrawler(t), args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestCLIValidateReportsEveryProblem(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: bad\nsteps:\n  - id: story\n    task: demo.stroy\n    from: fede\n    timeout: 30\n"), 0o644)
	_, stderr, code := trawler(t, "validate", "examples/demo.yaml", bad)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{
		bad + `:3: step "story": unknown task "demo.stroy" (did you mean "demo.story"?)`,
		bad + ":3: step \"story\": `from: fede` names no step",
		bad + ":6: `timeout`: bad duration \"30\": give a unit, e.g. 30s or 30m",
		"1 of 2 files have problems",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	out, _, code := trawler(t, "validate", "examples/demo.yaml", "examples/hackernews.yaml", "--json")
	if code != 0 || !strings.Contains(out, `"ok":true`) {
		t.Fatalf("examples do not validate: exit %d %s", code, out)
	}
}

func TestCLIDemoJSONSummary(t *testing.T) {
	stdout, stderr, code := trawler(t, "demo", "--pages", "2", "--json", "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Chain     string         `json:"chain"`
		RunID     string         `json:"run_id"`
		Pages     int            `json:"pages"`
		Items     int            `json:"items"`
		Failed    int            `json:"failed"`
		DurationS float64        `json:"duration_s"`
		Sinks     map[string]int `json:"sinks"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil {
		t.Fatalf("last line is not the JSON summary: %v\n%s", err, stdout)
	}
	stories, comments := demosite.Expected(demosite.Options{Pages: 10}, 2)
	if res.Chain != "demo" || res.RunID == "" || res.Items != stories+comments || res.Failed != 0 || res.Sinks["jsonl"] != stories+comments || res.DurationS <= 0 {
		t.Fatalf("summary %+v, want %d items read back from jsonl", res, stories+comments)
	}
	if res.Pages <= stories {
		t.Fatalf("pages %d should count feed, story and comment pages", res.Pages)
	}
}

func TestCLIRunWaitAndStatusAgainstDevStack(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	// shared.dir holds the endpoints.json of the package's stack, as `trawler dev` writes it.
	common := []string{"--data", shared.dir, "--task-queue", taskQueue, "--out", shared.sink.Dir()}
	stdout, stderr, code := trawler(t, append([]string{"run", "examples/demo.yaml", "--set", "base_url=" + site, "--set", "feed.pages=1", "--wait", "--json"}, common...)...)
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	var res struct {
		RunID string         `json:"run_id"`
		Items int            `json:"items"`
		Sinks map[string]int `json:"sinks"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil {
		t.Fatal(err)
	}
	stories, comments := demosite.Expected(demosite.Options{Pages: 1}, 1)
	if res.Items != stories+comments || res.Sinks["jsonl"] != stories+comments {
		t.Fatalf("run summary %+v, want %d items", res, stories+comments)
	}
	stdout, stderr, code = trawler(t, append([]string{"status", res.RunID, "--json"}, common...)...)
	if code != 0 || !strings.Contains(stdout, `"state":"completed"`) {
		t.Fatalf("status exit %d: %s %s", code, stdout, stderr)
	}
	_, stderr, code = trawler(t, "status", "--temporal", "127.0.0.1:1")
	if code != 1 || !strings.Contains(stderr, "cannot reach Temporal at 127.0.0.1:1") || !strings.Contains(stderr, "trawler dev --data") {
		t.Fatalf("unreachable Temporal: exit %d, stderr %q", code, stderr)
	}
}

func TestCLIDedupBenchAndStats(t *testing.T) {
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	stdout, stderr, code := trawler(t, "dedup", "bench", "--redis", srv.Addr, "--n", "50000", "--json")
	if code != 0 {
		t.Fatalf("bench exit %d: %s", code, stderr)
	}
	var b struct {
		BytesPerEntry    float64  `json:"bytes_per_entry"`
		SetBytesPerEntry float64  `json:"set_sha1_bytes_per_entry"`
		Ratio            float64  `json:"ratio"`
		ChecksPerS       float64  `json:"checks_per_s"`
		FalseDupRate     *float64 `json:"false_dup_rate"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &b); err != nil {
		t.Fatal(err)
	}
	if b.BytesPerEntry <= 0 || b.SetBytesPerEntry <= b.BytesPerEntry || b.Ratio <= 1 || b.ChecksPerS <= 0 || b.FalseDupRate == nil {
		t.Fatalf("bench result %+v", b)
	}
	// The structures stay for inspection: stats reads the bench namespace back.
	stdout, stderr, code = trawler(t, "dedup", "stats", "--redis", srv.Addr, "--ns", "bench", "--json")
	if code != 0 {
		t.Fatalf("stats exit %d: %s", code, stderr)
	}
	var st []struct {
		Items     int64          `json:"items"`
		Encodings map[string]int `json:"encodings"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &st); err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Items < 49990 || st[0].Items > 50000 || st[0].Encodings["listpack"] == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Commands that read a store that is down name the store and the fix at once, rather
// than "context deadline exceeded" after their timeout.
func TestCLIUnreachableStoresAreNamed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "demo:story:1", "--hbase", closed}, "HBase's ZooKeeper quorum " + closed + " does not answer"},
		{[]string{"dedup", "stats", "--redis", closed}, "Redis at " + closed},
	} {
		_, stderr, code := trawler(t, tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("trawler %s: exit %d, stderr %q; want it to say %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}

// The README's dev sequence runs an example verbatim: `trawler run examples/demo.yaml
// --data DIR` crawls the stack's own demo site (its endpoints.json's demo_site), wherever
// its port is, not whatever holds 8089.
func TestCLIExamplesFollowTheStack(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	ep, err := endpoints.Read(shared.dir)
	if err != nil {
		t.Fatal(err)
	}
	ep.DemoSite = site
	dir := t.TempDir()
	if err := endpoints.Write(dir, ep); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := trawler(t, "run", "examples/demo.yaml", "--set", "feed.pages=1", "--wait", "--json",
		"--data", dir, "--task-queue", taskQueue, "--out", shared.sink.Dir())
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	var res struct {
		Items     int `json:"items"`
		Unchanged int `json:"unchanged"` // another test may have stored the same site already
		Failed    int `json:"failed"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil {
		t.Fatal(err)
	}
	stories, comments := demosite.Expected(demosite.Options{Pages: 1}, 1)
	if res.Items+res.Unchanged != stories+comments || res.Failed != 0 {
		t.Fatalf("run summary %+v, want %d items from the stack's demo site:\n%s", res, stories+comments, stdout)
	}
}

// The README and docs/ say what the files and commands are: the complete chain example
// is examples/demo.yaml as it is, the README's command table names every command, and
// its sample `trawler demo --json` line has the keys the command prints.
func TestReadmeEqualsFilesAndCommands(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := allDocs(t)
	demo, err := examples.Files.ReadFile("demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(docs, "`examples/demo.yaml` as it is:\n\n```yaml\n"+string(demo)+"```\n") {
		t.Error("the docs' complete example is not examples/demo.yaml as it is")
	}
	help, _, _ := trawler(t, "--help")
	_, cmds, _ := strings.Cut(help, "Available Commands:")
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	for _, line := range strings.Split(strings.TrimSpace(cmds), "\n") {
		name := strings.Fields(line)[0]
		if name == "help" || name == "completion" {
			continue
		}
		if !strings.Contains(string(readme), "| `trawler "+name) {
			t.Errorf("README's command table lacks trawler %s", name)
		}
	}
	var sample map[string]any
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, `{"chain":"demo"`) {
			if err := json.Unmarshal([]byte(strings.ReplaceAll(line, "[…]", "[]")), &sample); err != nil {
				t.Fatalf("README's sample summary is not JSON: %v", err)
			}
		}
	}
	stdout, stderr, code := trawler(t, "demo", "--pages", "1", "--json", "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, stderr)
	}
	var real map[string]any
	if err := json.Unmarshal([]byte(lastLine(stdout)), &real); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) string { return strings.Join(slices.Sorted(maps.Keys(m)), ",") }
	if keys(sample) != keys(real) {
		t.Errorf("README's sample summary has keys %s; trawler demo --json prints %s", keys(sample), keys(real))
	}
	if s, r := sample["sinks"].(map[string]any), real["sinks"].(map[string]any); keys(s) != keys(r) {
		t.Errorf("README's sample sinks %s; trawler demo stores in %s", keys(s), keys(r))
	}
}
