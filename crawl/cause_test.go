package crawl_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch"
)

// TestCauseOfRealFailures produces each cause for real — statuses, a hang, robots.txt, a
// body over the limit, a closed port, an untrusted certificate, a name that does not
// resolve — and checks the cause CauseOf gives it. Nothing reads the error's text.
func TestCauseOfRealFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			w.Write([]byte("User-agent: *\nDisallow: /private\n"))
		case "/404", "/403", "/410", "/401":
			code := 0
			fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/"), &code)
			w.WriteHeader(code)
		case "/418":
			w.WriteHeader(http.StatusTeapot)
		case "/500":
			w.WriteHeader(http.StatusInternalServerError)
		case "/429":
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/hang":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		case "/huge":
			w.Write(make([]byte, 4096))
		default:
			w.Write([]byte("<p>ok</p>"))
		}
	}))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedAddr := closed.Addr().String()
	closed.Close()

	// The timeout must outlast a TLS handshake on a loaded machine (under -race): the
	// untrusted certificate has to fail as tls, not time out first.
	f := fetch.New(fetch.Options{Timeout: 2 * time.Second, Retries: -1, MaxRetryWait: -1, MaxBody: 1024, AllowPrivate: true})
	get := func(u string) error {
		_, err := f.Fetch(context.Background(), &crawl.Request{Method: http.MethodGet, URL: u})
		return err
	}
	for _, tc := range []struct {
		what string
		err  error
		want crawl.Cause
	}{
		{"404", get(srv.URL + "/404"), crawl.CauseHTTP404},
		{"403", get(srv.URL + "/403"), crawl.CauseHTTP403},
		{"410", get(srv.URL + "/410"), crawl.CauseHTTP410},
		{"418", get(srv.URL + "/418"), crawl.CauseHTTP4xx},
		{"500", get(srv.URL + "/500"), crawl.CauseHTTP5xx},
		{"hang", get(srv.URL + "/hang"), crawl.CauseTimeout},
		{"robots", get(srv.URL + "/private/x"), crawl.CauseRobots},
		{"huge", get(srv.URL + "/huge"), crawl.CauseTooLarge},
		// Last: the host asks for an hour's pause, which holds back what follows.
		{"429", get(srv.URL + "/429"), crawl.CauseHTTP429},
		{"closed port", get("http://" + closedAddr + "/"), crawl.CauseConnection},
		{"untrusted certificate", get(tlsSrv.URL + "/"), crawl.CauseTLS},
		{"unknown name", lookupFails(t), crawl.CauseDNS},
		{"store down", crawl.Dependency("store mongo", errors.New("connection refused")), crawl.CauseStore},
		{"canceled", context.Canceled, crawl.CauseCanceled},
		{"parse", crawl.Permanentf("no title"), crawl.CauseParse},
		{"marked", crawl.WithCause(errors.New("budget"), crawl.CauseQuota), crawl.CauseQuota},
		{"plain", errors.New("something"), crawl.CauseOther},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.what)
			continue
		}
		if got := crawl.CauseOf(tc.err); got != tc.want {
			t.Errorf("%s: cause %q, want %q (error: %v)", tc.what, got, tc.want, tc.err)
		}
	}
}

// lookupFails resolves a name through a DNS server on loopback that answers every
// query with NXDOMAIN, so no packet leaves the machine.
func lookupFails(t *testing.T) error {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			resp := append([]byte(nil), buf[:n]...)
			resp[2] = 0x81 | resp[2]&0x01 // a response, recursion desired as asked
			resp[3] = 0x83                // recursion available, NXDOMAIN
			for i := 6; i < 12; i++ {     // no answer, authority or additional records
				resp[i] = 0
			}
			pc.WriteTo(resp, from)
		}
	}()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = r.LookupHost(ctx, "no-such-host.example")
	return err
}
