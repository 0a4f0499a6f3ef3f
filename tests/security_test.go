package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"trawler/console"
	"trawler/crawl"
	"trawler/fetch"
	"trawler/internal/devstack/demosite"
	"trawler/internal/engine"
)

// loopbackOnly is a test network for a worker's fetcher: names resolve from a table
// and only loopback addresses are connected to; any other address the fetcher asks
// for is recorded (and fails the test), so no packet leaves loopback.
type loopbackOnly struct {
	t     *testing.T
	names map[string]string
	// routes plays non-loopback ip:port addresses with loopback ones.
	routes map[string]string
	mu     sync.Mutex
	wrong  []string
}

func (n *loopbackOnly) network() *fetch.Network {
	return &fetch.Network{
		LookupIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if ip, ok := n.names[host]; ok {
				return []netip.Addr{netip.MustParseAddr(ip)}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if to, ok := n.routes[addr]; ok {
				addr = to
			}
			ap, err := netip.ParseAddrPort(addr)
			if err != nil || !ap.Addr().IsLoopback() {
				n.mu.Lock()
				n.wrong = append(n.wrong, addr)
				n.mu.Unlock()
				return nil, fmt.Errorf("test network: %s is not loopback", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

func (n *loopbackOnly) check() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.wrong) > 0 {
		n.t.Errorf("the worker connected to %v: the guard let them through", n.wrong)
	}
}

// A chain cannot make a worker fetch cloud metadata, whatever URL it names and however
// the worker is set up; a worker that does not allow private addresses refuses loopback
// and private ones too. Each refused input is one permanent failure, tried once, that
// says why.
func TestWorkerNeverFetchesMetadata(t *testing.T) {
	site := startSite(t, demosite.Options{Pages: 1})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(site, "http://"))
	// intranet.test is a private address, played by the demo site.
	n := &loopbackOnly{t: t, names: map[string]string{"metadata.test": "169.254.169.254", "intranet.test": "10.0.0.7"},
		routes: map[string]string{"10.0.0.7:" + port: "127.0.0.1:" + port}}
	defer n.check()
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprintf("allow-private=%v", allow), func(t *testing.T) {
			queue := fmt.Sprintf("guard-%v-%d", allow, time.Now().UnixNano())
			o := fastFetch
			o.AllowPrivate, o.Network = allow, n.network()
			w := testWorker(t, engine.WorkerOptions{TaskQueue: queue, Fetch: o})
			urls := []string{"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
				"http://metadata.test/computeMetadata/v1/", "http://[fd00:ec2::254]/latest/", "http://intranet.test:" + port + "/item/2", site + "/item/1"}
			yaml := fmt.Sprintf("name: guard\nsteps:\n  - id: page\n    task: generic.html_detail\n    retries: 3\n    params:\n      urls: ['%s']\n      fields: {title: h1.title}\n    store: [jsonl]\n",
				strings.Join(urls, "', '"))
			p := plan(t, "guard.yaml", yaml)
			s := wait(t, start(t, p, queue), time.Minute)

			const never = "never fetched, whatever --allow-private says"
			const private = "this worker refuses private and loopback addresses (start it with --allow-private or TRAWLER_ALLOW_PRIVATE=1 to crawl them)"
			want := []string{
				"GET http://169.254.169.254/latest/meta-data/iam/security-credentials/: address 169.254.169.254 is the cloud metadata service: " + never,
				"GET http://[fd00:ec2::254]/latest/: address fd00:ec2::254 is the AWS metadata service (IPv6): " + never,
				"GET http://metadata.test/computeMetadata/v1/: metadata.test (address 169.254.169.254) is the cloud metadata service: " + never,
			}
			if !allow {
				want = append(want, "GET http://intranet.test:"+port+"/item/2: intranet.test (address 10.0.0.7) is private: "+private,
					"GET "+site+"/item/1: address 127.0.0.1 is loopback: "+private)
			}
			var got []string
			for _, f := range s.Failures {
				got = append(got, strings.TrimPrefix(f.Cause, f.Input.URL+": "))
				if f.Class != crawl.CauseBlocked || f.Attempts != 1 {
					t.Errorf("%s: class %q after %d attempts, want one %q attempt", f.Input.URL, f.Class, f.Attempts, crawl.CauseBlocked)
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("failures\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if stored := len(runRecords(t, w.JSONL, s.RunID)); (allow && stored != 2) || (!allow && stored != 0) {
				t.Errorf("%d pages stored; want the loopback and private ones only when allowed", stored)
			}
		})
	}
}

// `trawler try` goes through the same guard: without --allow-private (or with
// TRAWLER_ALLOW_PRIVATE=0) a loopback page is refused before anything is sent to it.
func TestTryRefusesPrivateWithoutAllowPrivate(t *testing.T) {
	site, hits := countingSite(t, demosite.Options{Pages: 1})
	_, stderr, code := trawlerEnv(t, []string{"TRAWLER_ALLOW_PRIVATE=0"}, "try", "generic.html_detail", site+"/item/3", "--set", "fields.title=h1.title")
	want := "GET " + site + "/item/3: address 127.0.0.1 is loopback: this worker refuses private and loopback addresses (start it with --allow-private or TRAWLER_ALLOW_PRIVATE=1 to crawl them)\n(permanent: a retry will not help)\n"
	if code != 1 || stderr != want {
		t.Fatalf("exit %d, stderr\n%q\nwant\n%q", code, stderr, want)
	}
	if hits("/item/3") != 0 {
		t.Fatalf("the site got %d requests", hits("/item/3"))
	}
	_, stderr, code = trawlerEnv(t, []string{"TRAWLER_ALLOW_PRIVATE=0"}, "try", "generic.html_detail", site+"/item/3", "--set", "fields.title=h1.title", "--allow-private", "--no-robots")
	if code != 0 || hits("/item/3") != 1 {
		t.Fatalf("--allow-private: exit %d, %d requests: %s", code, hits("/item/3"), stderr)
	}
	_, stderr, code = trawlerEnv(t, []string{"TRAWLER_ALLOW_PRIVATE=maybe"}, "try", "generic.html_detail", site+"/item/3")
	if want := "trawler: TRAWLER_ALLOW_PRIVATE=\"maybe\": want 1 or 0 (true or false)\n"; code != 1 || stderr != want {
		t.Fatalf("exit %d, stderr %q, want %q", code, stderr, want)
	}
}

// No credential of a chain's URLs reaches anything a person or another program reads:
// the run summary, `trawler status` (text and JSON, one run and the fleet), the failure
// log, the console API and the worker's log. The run has failures, so causes quoting the
// URLs are there to leak.
func TestSecretsNeverShown(t *testing.T) {
	const secret = "hunter2pw"
	o := demosite.Options{Pages: 1, PerPage: 6, Faults: map[int]demosite.Fault{2: demosite.FaultStatus500, 4: demosite.FaultTruncated}}
	site := startSite(t, o)
	base := strings.Replace(site, "http://", "http://bob:"+secret+"@", 1)
	ep := shared.stack.Endpoints
	queue := fmt.Sprintf("secrets-%d", time.Now().UnixNano())
	out := t.TempDir()

	var logs bytes.Buffer
	worker := exec.Command(buildTrawler(t), "worker", "--temporal", ep.Temporal, "--namespace", ep.Namespace,
		"--task-queue", queue, "--out", out, "-v")
	worker.Stderr = &logs
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = worker.Process.Signal(os.Interrupt)
			_ = worker.Wait()
		}
	}
	t.Cleanup(stop)

	id := start(t, plan(t, "demo.yaml", "", "base_url="+base, "feed.pages=1"), queue)
	sum := wait(t, id, 2*time.Minute)
	if len(sum.Failures) != 2 {
		t.Fatalf("%d failures, want stories 2 and 4: %+v", len(sum.Failures), sum.Failures)
	}
	masked := strings.Replace(site, "http://", "http://bob:***@", 1)
	for _, f := range sum.Failures {
		if !strings.HasPrefix(f.Input.URL, masked+"/item/") || !strings.HasPrefix(f.Cause, masked+"/item/") {
			t.Errorf("failure %+v: want its URL and cause to show %s…", f, masked)
		}
	}

	shown := map[string]string{}
	js, _ := json.Marshal(sum)
	shown["run summary"] = string(js)
	st, err := engine.Describe(context.Background(), shared.client, id)
	if err != nil {
		t.Fatal(err)
	}
	js, _ = json.Marshal(st)
	shown["engine.Describe"] = string(js)
	at := []string{"--temporal", ep.Temporal, "--namespace", ep.Namespace}
	for _, args := range [][]string{{"status", id}, {"status", id, "--json"}, {"status"}, {"status", "--json"}} {
		stdout, stderr, code := trawler(t, append(args, at...)...)
		if code != 0 {
			t.Fatalf("trawler %v: exit %d: %s", args, code, stderr)
		}
		shown["trawler "+strings.Join(args, " ")] = stdout + stderr
	}
	if !strings.Contains(shown["trawler status "+id], masked) {
		t.Errorf("trawler status shows no masked URL:\n%s", shown["trawler status "+id])
	}
	failures, err := os.ReadFile(out + "/_failures.jsonl")
	if err != nil || strings.Count(string(failures), "\n") != 2 {
		t.Fatalf("failure log: %v\n%s", err, failures)
	}
	shown["_failures.jsonl"] = string(failures)

	srv, err := console.New(console.Config{Temporal: shared.client, Namespace: ep.Namespace, TaskQueue: queue, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, path := range []string{"/api/runs", "/api/runs/" + id, "/api/chains", "/runs/" + id} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		shown["console GET "+path] = rec.Body.String()
	}

	stop()
	shown["worker log"] = logs.String()

	// Stores that cannot be reached are named in the error, without their password.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"search", "--es", "http://elastic:" + secret + "@127.0.0.1:1", "title:x"}, "cannot reach Elasticsearch at http://elastic:***@127.0.0.1:1"},
		// A worker waits out a store that is down (see Outages); a command that reads the
		// store now fails and names it.
		{[]string{"items", "claim", "--biz", "demo.story", "--mongo", "mongodb://app:" + secret + "@127.0.0.1:1/?serverSelectionTimeoutMS=500"}, "mongodb://app:***@127.0.0.1:1/"},
		{[]string{"quota", "show", "acme", "--redis", "redis://:" + secret + "@127.0.0.1:1/0"}, "redis://:***@127.0.0.1:1/0"},
	} {
		_, stderr, code := trawler(t, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("trawler %s: exit %d, stderr %q; want it to name %s", c.args[0], code, stderr, c.want)
		}
		shown["trawler "+c.args[0]+" error"] = stderr
	}

	for where, text := range shown {
		if i := strings.Index(text, secret); i >= 0 {
			t.Errorf("%s shows the password: …%s…", where, text[max(0, i-120):min(len(text), i+40)])
		}
	}
}
