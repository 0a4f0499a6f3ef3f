package render

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// inNetns is set in the copy of the test binary that runs in a network namespace of
// its own.
const inNetns = "TRAWLER_RENDER_NETNS"

// Chromium reaches no address by itself: whatever a page does — navigate its main frame,
// embed a frame, open a WebSocket, prefetch, preconnect, register a service worker,
// fetch, beacon, open a popup — and whatever the browser does in the background, every
// byte goes through the worker, whose guard refuses private, loopback and metadata
// addresses. The test runs in a network namespace where every IPv4 address is this
// machine and traps listen on ports 80, 443 and 53 of all of them: any connection or name
// lookup Chromium makes by itself lands there. The pages are served on localhost (a
// secure context, so service workers run), which the worker's fetcher reaches through a
// lookup of its own; the browser connecting there directly is counted too.
func TestChromiumReachesNothingItself(t *testing.T) {
	if os.Getenv(inNetns) == "" {
		if os.Geteuid() != 0 {
			t.Fatalf("this test makes a network namespace (unshare --net) and must run as root, as CI does; run `sudo go test -run TestChromiumReachesNothingItself ./fetch/render` (euid is %d)", os.Geteuid())
		}
		cmd := exec.Command("unshare", "--net", "--", os.Args[0], "-test.run=^TestChromiumReachesNothingItself$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), inNetns+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a network namespace of its own:\n%s", out)
		if err != nil {
			t.Fatalf("unshare --net %s: %v", os.Args[0], err)
		}
		return
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"route", "add", "local", "0.0.0.0/0", "dev", "lo"}, {"-6", "route", "add", "local", "::/0", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	traps := &trapLog{}
	for _, port := range []string{"80", "443", "53"} {
		traps.listenTCP(t, ":"+port)
	}
	traps.listenUDP(t, ":53", "DNS query for ")
	traps.listenUDP(t, ":3478", "STUN packet ")

	site, dialed := pagesSite(t)
	_, port, _ := net.SplitHostPort(site.Addr().String())
	base := "http://localhost:" + port
	// The worker refuses private addresses; only the name of the test's site leads to
	// it, through a lookup and a dial of the fetcher's own.
	public := netip.MustParseAddr("203.0.113.7")
	inner := fetch.New(fetch.Options{Network: &fetch.Network{
		LookupIP: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if host == "localhost" {
				return []netip.Addr{public}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if ap := netip.MustParseAddrPort(addr); ap.Addr() != public {
				return nil, fmt.Errorf("the test's network has no %s", addr)
			}
			dialed.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, site.Addr().String())
		},
	}})
	p := startPool(t, Options{Browsers: 1, Tabs: 2})
	r := Renderer{Pool: p, Inner: inner, Dial: inner.Dial, Opts: crawl.Render{Mode: crawl.RenderAlways, Timeout: 5 * time.Second, Viewport: crawl.DefaultViewport, Idle: true}}

	// Pages whose main frame goes to a blocked address fail with cause blocked.
	for path, want := range map[string]string{
		"/location": "http://10.0.0.1/: address 10.0.0.1 is private: this worker refuses private and loopback addresses",
		"/refresh":  "http://169.254.169.254/latest/meta-data/: address 169.254.169.254 is the cloud metadata service: never fetched",
	} {
		resp, err := r.Fetch(context.Background(), &crawl.Request{URL: base + path})
		if crawl.CauseOf(err) != crawl.CauseBlocked || !strings.Contains(fmt.Sprint(err), want) {
			body := ""
			if resp != nil {
				body = string(resp.Body)
			}
			t.Errorf("%s: cause %q, err %v, page %.300s; want cause blocked and %q", path, crawl.CauseOf(err), err, body, want)
		}
	}
	// The others render; what they reach for is refused.
	for _, path := range []string{"/iframe", "/websocket", "/prefetch", "/fetch", "/popup", "/webrtc"} {
		resp, err := r.Fetch(context.Background(), &crawl.Request{URL: base + path})
		if err != nil || !strings.Contains(string(resp.Body), `<p id="done">`) {
			t.Errorf("%s: %v; want the page rendered", path, err)
		}
	}
	// The service worker is registered and installed, through the worker, and its own
	// fetch is refused.
	sw := r
	sw.Opts.WaitFor = "#ready"
	if _, err := sw.Fetch(context.Background(), &crawl.Request{URL: base + "/sw"}); err != nil {
		t.Errorf("/sw: %v; want the service worker installed", err)
	}
	// A WebSocket to an address the worker may reach works, through a tunnel the
	// worker opens.
	ws := r
	ws.Opts.WaitFor, ws.Opts.Idle = "#ws", false
	resp, err := ws.Fetch(context.Background(), &crawl.Request{URL: base + "/websocket-ok"})
	if err != nil || !strings.Contains(string(resp.Body), `<p id="ws">hello through the worker</p>`) {
		t.Errorf("/websocket-ok: %v; want the message the socket got", err)
	}
	time.Sleep(time.Second) // what a page or the browser does after it was read
	if got := traps.all(); len(got) > 0 {
		t.Errorf("Chromium reached addresses by itself:\n  %s", strings.Join(got, "\n  "))
	}
	if a, d := site.accepted.Load(), dialed.Load(); a != d {
		t.Errorf("the test's site accepted %d connections and the worker's fetcher made %d: Chromium connected to localhost by itself", a, d)
	}
}

// trapLog records the connections and name lookups that reach the traps.
type trapLog struct {
	mu  sync.Mutex
	hit []string
}

func (l *trapLog) add(s string) {
	l.mu.Lock()
	l.hit = append(l.hit, s)
	l.mu.Unlock()
}

func (l *trapLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.hit...)
	sort.Strings(out)
	return out
}

func (l *trapLog) listenTCP(t *testing.T, addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			what := "connection to " + c.LocalAddr().String()
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			switch line = strings.TrimSpace(line); {
			case strings.HasPrefix(line, "\x16\x03"):
				what += ": a TLS handshake"
			case strings.ContainsFunc(line, func(r rune) bool { return r < ' ' || r > '~' }):
				what += ": binary"
			case line != "":
				what += ": " + line
			}
			l.add(what)
			_ = c.Close()
		}
	}()
}

// listenUDP records each packet to addr; what names it.
func (l *trapLog) listenUDP(t *testing.T, addr, what string) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if what == "DNS query for " {
				what += dnsName(buf[:n])
			}
			l.add(what)
		}
	}()
}

// dnsName is the name the first question of a DNS query asks for.
func dnsName(q []byte) string {
	var labels []string
	for i := 12; i < len(q) && q[i] != 0; i += int(q[i]) + 1 {
		end := min(i+1+int(q[i]), len(q))
		labels = append(labels, string(q[i+1:end]))
	}
	return strings.Join(labels, ".")
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// pagesSite serves the pages that reach for blocked addresses; dialed is for the
// fetcher to count the connections it makes to it.
func pagesSite(t *testing.T) (*countingListener, *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	const done = `<p id="done">rendered</p>`
	pages := map[string]string{
		"/location":  `<script>location.href = "http://10.0.0.1/"</script>`,
		"/refresh":   `<meta http-equiv="refresh" content="0; url=http://169.254.169.254/latest/meta-data/">`,
		"/iframe":    `<iframe src="http://10.0.0.1/"></iframe><iframe src="http://127.0.0.1/"></iframe><iframe src="https://169.254.169.254/"></iframe>` + done,
		"/websocket": `<script>for (const u of ["ws://10.0.0.1/", "wss://169.254.169.254/", "ws://127.0.0.1/", "ws://example.com/"]) new WebSocket(u)</script>` + done,
		"/prefetch": `<link rel="prefetch" href="http://169.254.169.254/"><link rel="preconnect" href="http://10.0.0.1"><link rel="preconnect" href="https://127.0.0.1">` +
			`<link rel="dns-prefetch" href="//metadata.google.internal"><link rel="prerender" href="http://10.0.0.1/next">` +
			`<script type="speculationrules">{"prefetch": [{"source": "list", "urls": ["http://10.0.0.1/a"]}], "prerender": [{"source": "list", "urls": ["http://127.0.0.1/b"]}]}</script>` + done,
		"/fetch": `<script>fetch("http://10.0.0.1/").catch(() => {}); fetch("https://169.254.169.254/latest/").catch(() => {});` +
			`navigator.sendBeacon("http://127.0.0.1/beacon", "x"); new Image().src = "http://10.0.0.1/pixel.gif"</script>` + done,
		"/websocket-ok": `<script>new WebSocket("ws://" + location.host + "/echo").onmessage = e => document.body.insertAdjacentHTML("beforeend", '<p id="ws">' + e.data + '</p>')</script>`,
		"/popup":        `<script>window.open("http://10.0.0.1/popup")</script>` + done,
		"/webrtc": `<script>const pc = new RTCPeerConnection({iceServers: [{urls: "stun:10.0.0.1:3478"}, {urls: "turn:169.254.169.254:3478", username: "u", credential: "c"}]});` +
			`pc.createDataChannel("x"); pc.createOffer().then(o => pc.setLocalDescription(o))</script>` + done,
		"/sw": `<script>navigator.serviceWorker.register("/sw.js").then(() => navigator.serviceWorker.ready).then(() => document.body.insertAdjacentHTML("beforeend", '<p id="ready"></p>'))</script>`,
	}
	const sw = `self.addEventListener("install", e => e.waitUntil(Promise.all(["http://10.0.0.1/", "https://169.254.169.254/", "http://127.0.0.1/"].map(u => fetch(u).catch(() => {})))));`
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/echo" {
			sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
			c, rw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			const msg = "hello through the worker"
			_, _ = fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n%s",
				base64.StdEncoding.EncodeToString(sum[:]), append([]byte{0x81, byte(len(msg))}, msg...))
			_ = rw.Flush()
			_, _ = io.Copy(io.Discard, rw) // until the browser closes it
			return
		}
		if req.URL.Path == "/sw.js" {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(sw))
			return
		}
		page, ok := pages[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>t</title></head><body>%s</body></html>", page)
	})}
	go func() { _ = srv.Serve(cl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return cl, new(atomic.Int64)
}
