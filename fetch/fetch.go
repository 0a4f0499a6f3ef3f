// Package fetch is Trawler's HTTP fetcher: the crawl.Fetcher behind env.Fetch in every
// task. One Fetcher serves a whole worker process and is safe for concurrent use.
//
// A Fetcher is a chain of middlewares (crawl.Middleware) over one HTTP exchange. New
// builds it, outermost first:
//
//	StatusCheck   an answer the request does not accept becomes an *Error (the only place)
//	Metrics       time per fetch and host
//	[yours]       Options.Middlewares, then a chain's `middlewares:` (Fetcher.With)
//	Resources     leases from the task's pools, ban rules, lease switching
//	Robots        robots.txt, read through the layers below and cached per host
//	Retry         408/429/5xx and network errors, Retry-After, backoff
//	Politeness    per-host slot and rate token, per attempt
//	Transport     one exchange: address guard, redirects, timeouts, size limit, gzip
//
// Every layer inside StatusCheck gets every answer as a *crawl.Response, whatever its
// status, so a middleware can read a 403 or a 500; a task gets only the statuses its
// request accepts (crawl.Request.Accept, 2xx and 304 by default) and an error for any
// other. Each constructor's documentation says what its layer guarantees. Every error
// is an *Error (use errors.As) naming the method, the URL, the status or the cause, and
// the number of attempts; its text never shows a password or a credential.
package fetch

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Options configure a Fetcher. Zero values take the defaults noted.
type Options struct {
	ConnectTimeout time.Duration // dial and TLS handshake; default 10s
	Timeout        time.Duration // one attempt, body included; default 30s
	MaxBody        int64         // default 10 MiB; larger bodies fail permanently without reading the rest
	MaxRedirects   int           // default 10; negative follows none
	UserAgent      string        // default "Trawler/1.0"; a request's own User-Agent header wins
	// RateLimit is the default number of requests per second per host; 0 is unlimited.
	RateLimit float64
	// HostConcurrency is the default number of requests in flight per host, shared by
	// everything Budgets serves; default crawl.DefaultHostConcurrency (8).
	//
	// A request's crawl.Politeness, else its own non-zero RateLimit or HostConcurrency
	// (a task's), replace these defaults for that request (see Politeness).
	HostConcurrency int
	// Budgets hold every host's budget; nil keeps them in this process (LocalBudgets).
	// A worker with Redis shares them with the fleet (internal/polite).
	Budgets Budgets
	// Robots shares the robots.txt files read with the fleet; nil: each process reads
	// its own.
	Robots RobotsStore
	// Retries is the number of in-process retries on 429, 5xx, network errors and
	// timeouts; default 2, negative for none.
	Retries int
	// MaxRetryWait is the longest Retry-After honoured by sleeping; default 5s, negative
	// for none. A longer one returns crawl.RetryAfter(err, d) so the engine reschedules
	// the input durably instead of holding a slot.
	MaxRetryWait time.Duration
	// Backoff is the first pause between in-process retries when the server sent no
	// Retry-After; it doubles on each retry. Default 200ms.
	Backoff time.Duration
	// AllowPrivate lets requests reach loopback, private and other non-public
	// addresses (the worker's --allow-private). Link-local and cloud metadata
	// addresses are refused regardless. See guard.go.
	AllowPrivate bool
	// AllowAddrs are exact addresses (IP and port) reached even when AllowPrivate is
	// false: the dev stack's own demo site, say, without opening every loopback port.
	// Link-local and cloud metadata addresses are refused regardless.
	AllowAddrs []netip.AddrPort
	// Network, when set, replaces name lookups and connecting (tests).
	Network *Network
	// Middlewares are the worker's own layers, outermost first. They sit inside
	// StatusCheck and Metrics and outside resource lending, so they see the request as
	// the task made it and every answer as a Response, whatever its status (see the
	// package documentation for the whole chain).
	Middlewares []crawl.Middleware
}

const (
	defaultConnectTimeout = 10 * time.Second
	defaultTimeout        = 30 * time.Second
	defaultMaxBody        = 10 << 20
	defaultMaxRedirects   = 10
	defaultUserAgent      = "Trawler/1.0"
	defaultConcurrency    = crawl.DefaultHostConcurrency
	defaultRetries        = 2
	defaultMaxRetryWait   = 5 * time.Second
	defaultBackoff        = 200 * time.Millisecond

	maxBackoff     = time.Minute
	robotsTTL      = time.Hour
	robotsRetryTTL = time.Minute
	robotsMaxBytes = 512 << 10
	errorBodyDrain = 64 << 10
	maxBodyCeiling = 1 << 40
)

func (o Options) withDefaults() Options {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = defaultConnectTimeout
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.MaxBody <= 0 {
		o.MaxBody = defaultMaxBody
	}
	if o.MaxBody > maxBodyCeiling {
		o.MaxBody = maxBodyCeiling
	}
	switch {
	case o.MaxRedirects == 0:
		o.MaxRedirects = defaultMaxRedirects
	case o.MaxRedirects < 0:
		o.MaxRedirects = 0
	}
	if strings.TrimSpace(o.UserAgent) == "" {
		o.UserAgent = defaultUserAgent
	}
	if o.RateLimit < 0 {
		o.RateLimit = 0
	}
	if o.HostConcurrency <= 0 {
		o.HostConcurrency = defaultConcurrency
	}
	switch {
	case o.Retries == 0:
		o.Retries = defaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	switch {
	case o.MaxRetryWait == 0:
		o.MaxRetryWait = defaultMaxRetryWait
	case o.MaxRetryWait < 0:
		o.MaxRetryWait = 0
	}
	if o.Backoff <= 0 {
		o.Backoff = defaultBackoff
	}
	return o
}

// Fetcher performs HTTP requests for tasks through the chain New builds; it implements
// crawl.Fetcher.
type Fetcher struct {
	// inner is resource lending down to the transport: the layers that hold state (the
	// host table, the robots.txt cache, the connection pool), built once and shared by
	// every Fetcher With returns.
	inner crawl.Fetcher
	user  []crawl.Middleware
	chain crawl.Fetcher
	guard *guard // for Dial
}

var _ crawl.Fetcher = (*Fetcher)(nil)

// New returns a Fetcher: the default chain (see the package documentation) with
// o.Middlewares in its place. It is safe for concurrent use by many goroutines and
// many tasks; make one per worker process so that per-host limits and robots.txt are
// shared.
func New(o Options) *Fetcher {
	// Each layer applies the defaults itself (applying them twice would turn "none",
	// a negative value, into the default).
	inner := crawl.Wrap(Transport(o), Resources(), Robots(o), Retry(o), Politeness(o))
	f := newFetcher(inner, o.Middlewares)
	f.guard = newGuard(o.withDefaults())
	return f
}

func newFetcher(inner crawl.Fetcher, user []crawl.Middleware) *Fetcher {
	outer := append([]crawl.Middleware{StatusCheck(), Tracing(), Metrics()}, user...)
	return &Fetcher{inner: inner, user: user, chain: crawl.Wrap(inner, outer...)}
}

// With returns a Fetcher with mws added inside this one's own middlewares (and outside
// resource lending), sharing its host limits, robots.txt cache and connections. A step
// whose chain file lists `middlewares:` fetches through f.With(those...).
func (f *Fetcher) With(mws ...crawl.Middleware) *Fetcher {
	if len(mws) == 0 {
		return f
	}
	g := newFetcher(f.inner, append(f.user[:len(f.user):len(f.user)], mws...))
	g.guard = f.guard
	return g
}

// Fetch performs r and returns the fully read response of an answer r accepts (2xx and
// 304 unless r.Accept says otherwise), with the resources its context asks for
// (WithResources). Every error but an empty pool's external.WaitError is an *Error.
func (f *Fetcher) Fetch(ctx context.Context, r *crawl.Request) (*crawl.Response, error) {
	return f.chain.Fetch(ctx, r)
}

// Dial connects to addr ("host:port") through the address guard, as the transport
// would: a refused address fails with ErrBlocked and nothing connects to it. It is for
// connections that are not HTTP requests the chain can make, such as the tunnels a
// rendering browser asks for (WebSockets, HTTPS outside the page's interception);
// nothing else of the chain (robots.txt, politeness, leased proxies) applies to them.
func (f *Fetcher) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return f.guard.dialContext(ctx, network, addr)
}
