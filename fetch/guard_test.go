package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// fakeNet resolves names from a table and connects only to the loopback servers it
// knows, recording every address the fetcher asked to connect to; an unknown address
// is a test failure, and nothing is dialed for it, so no packet leaves loopback.
type fakeNet struct {
	t     *testing.T
	names map[string][]netip.Addr
	// routes maps an approved "ip:port" to the loopback listener that plays it.
	routes map[string]string

	mu     sync.Mutex
	dialed []string
}

func (n *fakeNet) network() *Network {
	return &Network{
		LookupIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if ips, ok := n.names[host]; ok {
				return ips, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			n.mu.Lock()
			n.dialed = append(n.dialed, addr)
			n.mu.Unlock()
			to, ok := n.routes[addr]
			if !ok {
				n.t.Errorf("the fetcher connected to %s, which the guard should have refused", addr)
				return nil, fmt.Errorf("test network: no route to %s", addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, to)
		},
	}
}

func (n *fakeNet) dials() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.dialed...)
}

func TestGuardRefusesMetadataBeforeConnecting(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/go":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam", http.StatusFound)
		case "/named":
			http.Redirect(w, r, "http://metadata.test/computeMetadata/v1/", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "page")
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n := &fakeNet{t: t,
		names: map[string][]netip.Addr{
			"site.test":     {netip.MustParseAddr("127.0.0.1")},
			"metadata.test": {netip.MustParseAddr("169.254.169.254")},
			// A name that mixes a public address with a metadata one is refused whole.
			"mixed.test": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("169.254.169.254")},
		},
		routes: map[string]string{"127.0.0.1:" + port: srv.Listener.Addr().String()},
	}
	// Even a worker that allows private addresses never reaches metadata.
	f := New(Options{Retries: -1, AllowPrivate: true, Network: n.network()})
	site := "http://site.test:" + port

	resp, err := get(f, site+"/page")
	if err != nil || string(resp.Body) != "page" {
		t.Fatalf("an allowed loopback page: %v", err)
	}

	const never = "never fetched, whatever --allow-private says"
	for _, c := range []struct{ url, want string }{
		{"http://169.254.169.254/latest/meta-data/", "GET http://169.254.169.254/latest/meta-data/: address 169.254.169.254 is the cloud metadata service: " + never},
		{"http://metadata.test/computeMetadata/v1/", "GET http://metadata.test/computeMetadata/v1/: metadata.test (address 169.254.169.254) is the cloud metadata service: " + never},
		{"http://mixed.test/", "GET http://mixed.test/: mixed.test (address 169.254.169.254) is the cloud metadata service: " + never},
		{"http://[fd00:ec2::254]/latest/", "GET http://[fd00:ec2::254]/latest/: address fd00:ec2::254 is the AWS metadata service (IPv6): " + never},
		{"http://100.100.100.200/latest/meta-data/", "GET http://100.100.100.200/latest/meta-data/: address 100.100.100.200 is the Alibaba Cloud metadata service: " + never},
		{"http://169.254.170.2/v2/credentials", "GET http://169.254.170.2/v2/credentials: address 169.254.170.2 is link-local, where cloud metadata services answer: " + never},
		{"http://[fe80::1]:8080/", "GET http://[fe80::1]:8080/: address fe80::1 is link-local, where cloud metadata services answer: " + never},
		{"http://[::ffff:169.254.169.254]/", "GET http://[::ffff:169.254.169.254]/: ::ffff:169.254.169.254 (address 169.254.169.254) is the cloud metadata service: " + never},
		{"http://[64:ff9b::a9fe:a9fe]/", "GET http://[64:ff9b::a9fe:a9fe]/: 64:ff9b::a9fe:a9fe (address 169.254.169.254) is the cloud metadata service: " + never},
		// A redirect from an allowed page is judged like the first request.
		{site + "/go", "GET " + site + "/go: redirect to http://169.254.169.254/latest/meta-data/iam refused: address 169.254.169.254 is the cloud metadata service: " + never + " (1 attempt)"},
		{site + "/named", "GET " + site + "/named: redirect to http://metadata.test/computeMetadata/v1/ refused: metadata.test (address 169.254.169.254) is the cloud metadata service: " + never + " (1 attempt)"},
	} {
		_, err := get(f, c.url)
		if err == nil {
			t.Errorf("%s: fetched", c.url)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("error\n got %q\nwant %q", err.Error(), c.want)
		}
		if !crawl.IsPermanent(err) || crawl.CauseOf(err) != crawl.CauseBlocked || !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: permanent=%v cause=%q, want a permanent %q failure", c.url, crawl.IsPermanent(err), crawl.CauseOf(err), crawl.CauseBlocked)
		}
	}
	for _, d := range n.dials() {
		if d != "127.0.0.1:"+port {
			t.Errorf("connected to %s", d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(paths, " "); got != "/robots.txt /page /go /named" {
		t.Errorf("the site saw %s, want /robots.txt /page /go /named", got)
	}
}

func TestGuardRefusesPrivateUnlessAllowed(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	var seen int
	counting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen++ }))
	defer counting.Close()

	// The default: loopback and private ranges are refused, naming the setting.
	f := New(Options{Retries: -1})
	_, err := get(f, s.URL+"/page")
	want := fmt.Sprintf("GET %s/page: address 127.0.0.1 is loopback: this worker refuses private and loopback addresses (start it with --allow-private or TRAWLER_ALLOW_PRIVATE=1 to crawl them)", s.URL)
	if err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	if !crawl.IsPermanent(err) || crawl.CauseOf(err) != crawl.CauseBlocked || asError(t, err).Attempts != 0 {
		t.Fatalf("permanent=%v cause=%q: %v", crawl.IsPermanent(err), crawl.CauseOf(err), err)
	}
	if s.requests.Load() != 0 {
		t.Fatalf("the loopback server got %d requests", s.requests.Load())
	}

	n := &fakeNet{t: t, names: map[string][]netip.Addr{
		"intranet.test": {netip.MustParseAddr("10.1.2.3")},
		"cgnat.test":    {netip.MustParseAddr("100.64.0.9")},
		"v6.test":       {netip.MustParseAddr("fd12::5")},
		"zero.test":     {netip.MustParseAddr("0.0.0.0")},
	}}
	f = New(Options{Retries: -1, Network: n.network()})
	for host, what := range map[string]string{
		"intranet.test": "intranet.test (address 10.1.2.3) is private",
		"cgnat.test":    "cgnat.test (address 100.64.0.9) is private (carrier-grade NAT)",
		"v6.test":       "v6.test (address fd12::5) is private",
		"zero.test":     "zero.test (address 0.0.0.0) is unspecified (it reaches this machine)",
		"[::1]":         "address ::1 is loopback",
		"192.168.1.1":   "address 192.168.1.1 is private",
	} {
		_, err := f.Fetch(context.Background(), &crawl.Request{URL: "http://" + host + "/", IgnoreRobots: true})
		want := "GET http://" + host + "/: " + what + ": this worker refuses private and loopback addresses (start it with --allow-private or TRAWLER_ALLOW_PRIVATE=1 to crawl them)"
		if err == nil || err.Error() != want {
			t.Errorf("error\n got %v\nwant %s", err, want)
		}
	}
	if d := n.dials(); len(d) != 0 {
		t.Fatalf("connected to %v", d)
	}

	// A worker that allows private addresses connects to them (the test network then
	// plays the intranet host).
	_, port, _ := net.SplitHostPort(counting.Listener.Addr().String())
	n = &fakeNet{t: t, names: map[string][]netip.Addr{"intranet.test": {netip.MustParseAddr("10.1.2.3")}},
		routes: map[string]string{"10.1.2.3:" + port: counting.Listener.Addr().String()}}
	f = New(Options{Retries: -1, AllowPrivate: true, Network: n.network()})
	if _, err := f.Fetch(context.Background(), &crawl.Request{URL: "http://intranet.test:" + port + "/", IgnoreRobots: true}); err != nil {
		t.Fatal(err)
	}
	if seen != 1 || strings.Join(n.dials(), " ") != "10.1.2.3:"+port {
		t.Fatalf("allowed private address: %d requests, dials %v", seen, n.dials())
	}
}

func TestGuardJudgesProxiedTargetsAndProxies(t *testing.T) {
	var proxied int
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied++
		_, _ = io.WriteString(w, "via proxy")
	}))
	defer proxy.Close()
	_, port, _ := net.SplitHostPort(proxy.Listener.Addr().String())
	n := &fakeNet{t: t, names: map[string][]netip.Addr{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"public.test":   {netip.MustParseAddr("93.184.216.34")},
	}, routes: map[string]string{"127.0.0.1:" + port: proxy.Listener.Addr().String()}}
	f := New(Options{Retries: -1, AllowPrivate: true, Network: n.network()})
	through := func(proxyURL, target string) error {
		ctx := context.WithValue(context.Background(), proxyKey{}, proxyURL)
		_, err := f.Fetch(ctx, &crawl.Request{Method: "GET", URL: target, IgnoreRobots: true})
		return err
	}
	// The proxy would resolve the target itself: the worker judges it first.
	err := through(proxy.URL, "http://metadata.test/latest/")
	if want := "GET http://metadata.test/latest/: metadata.test (address 169.254.169.254) is the cloud metadata service: never fetched, whatever --allow-private says"; err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	if proxied != 0 {
		t.Fatalf("the proxy was asked %d times", proxied)
	}
	if err := through(proxy.URL, "http://public.test/"); err != nil || proxied != 1 {
		t.Fatalf("a public target through the proxy: %v (%d requests)", err, proxied)
	}
	// A proxy at a metadata address (a pool a chain filled, say) is refused too.
	err = through("http://169.254.169.254:3128", "http://public.test/")
	if want := "GET http://public.test/: address 169.254.169.254 is the cloud metadata service: never fetched, whatever --allow-private says"; err == nil || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	for _, d := range n.dials() {
		if d != "127.0.0.1:"+port {
			t.Fatalf("connected to %s", d)
		}
	}
}

func TestGuardControlHook(t *testing.T) {
	g := newGuard(Options{})
	for addr, want := range map[string]string{
		"169.254.169.254:80": "address 169.254.169.254 is the cloud metadata service: never fetched, whatever --allow-private says",
		"[::1]:80":           "address ::1 is loopback: this worker refuses private and loopback addresses (start it with --allow-private or TRAWLER_ALLOW_PRIVATE=1 to crawl them)",
		"93.184.216.34:443":  "",
	} {
		err := g.control("tcp", addr, nil)
		if got := fmt.Sprint(err); (want == "" && err != nil) || (want != "" && got != want) {
			t.Errorf("control(%s) = %v, want %q", addr, err, want)
		}
	}
}

// AllowAddrs opens one exact address and port: the page there is fetched, while the
// same host on another port, another loopback address and link-local stay refused.
func TestGuardAllowsExactAddress(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	other := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") })
	f := New(Options{Retries: -1, AllowAddrs: []netip.AddrPort{netip.MustParseAddrPort(s.Listener.Addr().String())}})
	resp, err := get(f, s.URL+"/page")
	if err != nil || string(resp.Body) != "ok" {
		t.Fatalf("allowed address: %v %v", resp, err)
	}
	_, err = get(f, other.URL+"/page")
	want := fmt.Sprintf("GET %s/page: address 127.0.0.1 is loopback: this worker refuses private and loopback addresses (start it with --allow-private or TRAWLER_ALLOW_PRIVATE=1 to crawl them)", other.URL)
	if err == nil || err.Error() != want {
		t.Fatalf("another port\n got %v\nwant %s", err, want)
	}
	if other.requests.Load() != 0 {
		t.Fatalf("the other loopback server got %d requests", other.requests.Load())
	}
	g := newGuard(Options{AllowAddrs: []netip.AddrPort{netip.MustParseAddrPort("169.254.169.254:80")}})
	if err := g.control("tcp", "169.254.169.254:80", nil); err == nil {
		t.Fatal("AllowAddrs opened the cloud metadata address")
	}
}
