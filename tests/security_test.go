package tests

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"trawler/crawl"
	"trawler/engine"
	"trawler/fetch"
	"trawler/internal/devstack/demosite"
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
