package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/bson"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
	"github.com/trawlerhq/trawler/internal/console"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/devstack/eslite"
	"github.com/trawlerhq/trawler/internal/devstack/hbaselite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
	"github.com/trawlerhq/trawler/internal/workflows"
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
		"--task-queue", queue, "--out", out, "--redis", shared.redis.Addr(), "-v")
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
	// A signing service's key rides in its URL's query; this one is down, so signing
	// fails and the failure names the service.
	const signKey = "signkey7secret"
	configure(t, pools(t), external.Sign, external.Config{Signer: "http://127.0.0.1:1/sign?key=" + signKey})
	signed := start(t, plan(t, "signed.yaml", "name: signed\nsteps:\n  - {id: list, task: demo.signed_feed, retries: 0, params: {pages: 1}}\n", "base_url="+site), queue)
	ssum := wait(t, signed, 2*time.Minute)
	if len(ssum.Failures) != 1 || !strings.Contains(ssum.Failures[0].Cause, "with signer http://127.0.0.1:1/sign?key=***: ") {
		t.Fatalf("signed run failures %+v: want the one page, failed naming the signer with its key masked", ssum.Failures)
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
	for _, args := range [][]string{{"status", id}, {"status", id, "--json"}, {"status", signed}, {"status", signed, "--json"}, {"status"}, {"status", "--json"}} {
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
	if err != nil || strings.Count(string(failures), "\n") != 3 {
		t.Fatalf("failure log: %v\n%s", err, failures)
	}
	shown["_failures.jsonl"] = string(failures)

	srv, err := console.New(console.Config{Temporal: shared.client, Namespace: ep.Namespace, TaskQueue: queue, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, path := range []string{"/api/runs", "/api/runs/" + id, "/api/runs/" + signed, "/api/chains", "/runs/" + id} {
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
		for _, s := range []string{secret, signKey} {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s shows the secret %s: …%s…", where, s, text[max(0, i-120):min(len(text), i+40)])
			}
		}
	}
}

// authSite puts a recorder of the Basic auth each request carried in front of a demo
// site: path → the user:password of every request for it ("" for none).
func authSite(t *testing.T, o demosite.Options) (string, func() map[string][]string) {
	t.Helper()
	target, err := url.Parse(startSite(t, o))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, _ := r.BasicAuth()
		mu.Lock()
		if user != "" {
			seen[r.URL.Path] = append(seen[r.URL.Path], user+":"+pw)
		} else {
			seen[r.URL.Path] = append(seen[r.URL.Path], "")
		}
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() map[string][]string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = map[string][]string{}
		return out
	}
}

// redisText is everything a Redis holds, key names and values, as text.
func redisText(t *testing.T, addr string) string {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "\n")
		var v any
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			v, err = rdb.Get(ctx, k).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, k).Result()
		case "zset":
			v, err = rdb.ZRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, k).Result()
		case "list":
			v, err = rdb.LRange(ctx, k, 0, -1).Result()
		case "stream": // events, audit
			v, err = rdb.XRange(ctx, k, "-", "+").Result()
		default:
			t.Fatalf("redis key %s of type %s: read it too", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%v\n", v)
	}
	return b.String()
}

// A password in a chain's base_url authenticates every request, and is stored nowhere:
// not in any record's url, key or fields in any store (JSON Lines, Kafka, MongoDB,
// Elasticsearch, HBase row keys and cells), nor in Redis (dedup buckets, recrawl plans).
// Rotating it changes nothing: the next run finds every record unchanged, and the
// recrawl visits it plans go out with the new password.
func TestCredentialsNeverStored(t *testing.T) {
	const secret, rotated = "hunter2-cred", "rotated9-cred"
	startHot(t)
	esURL, stopES, err := eslite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopES()
	zk, stopHBase, err := hbaselite.Start(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopHBase()
	begin := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := demosite.NewClock(begin)
	out := t.TempDir()
	queue := fmt.Sprintf("creds-%d", time.Now().UnixNano())
	w, err := engine.NewWorker(shared.client, engine.WorkerOptions{TaskQueue: queue, OutDir: out, Log: quiet,
		Redis: shared.redis.Addr(), Kafka: hot.kafka, Mongo: hot.mongo, ES: esURL, HBase: zk, Fetch: fastFetch, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	k, m := hotReaders(t)

	o := demosite.Options{Pages: 1}
	site, requests := authSite(t, o)
	stories, _ := demosite.Expected(o, 1)
	// demo.story keeps its own keys (demo:story:N); generic.html_detail keys a record by
	// its URL, and resolves the author's link against it.
	const pages = 5
	run := func(password string) (string, *workflows.Summary) {
		base := strings.Replace(site, "http://", "http://bob:"+password+"@", 1)
		var urls []string
		for i := 1; i <= pages; i++ {
			urls = append(urls, fmt.Sprintf("'%s/item/%d'", base, i))
		}
		chain := `
name: creds
steps:
  - {id: feed, task: demo.feed, from: feed, max_depth: 10, params: {pages: 1}}
  - id: story
    task: demo.story
    from: feed
    store: [jsonl, kafka, mongo, es, hbase]
    recrawl: {min: 10m, max: 1h}
  - id: page
    task: generic.html_detail
    params:
      urls: [` + strings.Join(urls, ", ") + `]
      fields: {title: h1.title, author: {css: a.author, attr: href, type: url}}
    store: [jsonl, kafka, mongo, es, hbase]
`
		id := start(t, plan(t, "creds.yaml", chain, "base_url="+base), queue)
		return id, wait(t, id, 2*time.Minute)
	}
	steps := func(s *workflows.Summary) map[string]workflows.StepStats {
		byID := map[string]workflows.StepStats{}
		for _, st := range s.Steps {
			byID[st.ID] = st
		}
		return byID
	}
	// Every page of the site was asked for with the password in force (robots.txt is
	// asked for without).
	assertAuth := func(password string) {
		t.Helper()
		items := 0
		for path, auths := range requests() {
			for _, a := range auths {
				if path == "/robots.txt" {
					continue
				}
				if a != "bob:"+password {
					t.Errorf("%s was requested with Basic auth %q, want bob:%s", path, a, password)
				}
			}
			if strings.HasPrefix(path, "/item/") {
				items++
			}
		}
		if items != stories {
			t.Errorf("%d story pages requested, want %d", items, stories)
		}
	}

	id, sum := run(secret)
	if st := steps(sum); st["story"].Items != stories || st["page"].Items != pages || sum.FailuresTotal != 0 {
		t.Fatalf("first run: %+v, want %d stories and %d pages stored", sum, stories, pages)
	}
	assertAuth(secret)

	ctx := context.Background()
	shown := map[string]string{}
	var files strings.Builder
	if err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files.Write(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	shown["jsonl files"] = files.String()
	records := map[string]int{}
	read := func(store string, it crawl.Item) {
		b, _ := json.Marshal(it)
		shown[store] += string(b) + "\n"
		records[store]++
	}
	if err := k.Scan(ctx, func(it crawl.Item) error {
		if it.RunID == id {
			read("kafka", it)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hb := w.Sinks["hbase"].(*hbase.Sink)
	for _, biz := range []string{"demo.story", "creds.page"} {
		recs, err := m.Find(ctx, biz, bson.D{{Key: "run_id", Value: id}})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range recs {
			read("mongo", it)
		}
		if err := hb.ScanBiz(ctx, tenantOf(t), biz, true, func(it crawl.Item) error {
			read("hbase", it)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := es.Auth{}.NewClient([]string{esURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hits := esSearch(t, c, `{"size":100,"query":{"term":{"run_id":"`+id+`"}}}`)["hits"].(map[string]any)["hits"].([]any)
	for _, h := range hits {
		b, _ := json.Marshal(h)
		shown["es"] += string(b) + "\n"
		records["es"]++
	}
	for _, store := range []string{"kafka", "mongo", "hbase", "es"} {
		if records[store] != stories+pages {
			t.Errorf("%s holds %d records of the run, want %d", store, records[store], stories+pages)
		}
	}
	if want := `"url":"` + site + `/item/1"`; !strings.Contains(shown["mongo"], want) {
		t.Errorf("mongo records do not hold %s:\n%s", want, shown["mongo"])
	}
	if want := `"key":"` + site + `/item/1"`; !strings.Contains(shown["kafka"], want) {
		t.Errorf("kafka records do not hold %s:\n%s", want, shown["kafka"])
	}
	shown["redis"] = redisText(t, shared.redis.Addr())
	for where, text := range shown {
		if i := strings.Index(text, secret); i >= 0 {
			t.Errorf("%s holds the password: …%s…", where, text[max(0, i-120):min(len(text), i+40)])
		}
	}

	// The password changes; an hour later every story is due again. Nothing is new.
	clock.Set(begin.Add(2 * time.Hour))
	_, sum = run(rotated)
	st := steps(sum)
	for s, n := range map[string]int{"story": stories, "page": pages} {
		if st[s].Pages != n || st[s].Items != 0 || st[s].Unchanged != n {
			t.Errorf("after rotating the password, step %s visited %d pages, stored %d, found %d unchanged; want %d visited, 0 stored, all unchanged",
				s, st[s].Pages, st[s].Items, st[s].Unchanged, n)
		}
	}
	assertAuth(rotated)
}
