package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// The address guard. Chains come from many hands (chain files, the console, farming
// chains that fill proxy pools), so a URL is never trusted to point where it says: a
// name can resolve to anything and any page can redirect anywhere. The guard therefore
// judges the address the fetcher is about to connect to, after name resolution, on the
// first request, on every redirect hop, on robots.txt and on a proxy's address, and the
// socket is only ever connected to the very address that was judged (no second lookup a
// rebinding name server could answer differently).
//
// Link-local addresses, where cloud metadata services answer with the machine's
// credentials, are refused always. Loopback, private and other non-public ranges are
// refused unless the worker's operator allows them (Options.AllowPrivate, or one exact
// address and port in Options.AllowAddrs); nothing a chain or a request carries can
// change either rule.

// ErrBlocked matches (with errors.Is) a request the address guard refused.
var ErrBlocked = errors.New("address refused by the fetch guard")

// Network replaces how a Fetcher finds and connects to addresses; the guard still
// judges every address in between. Tests use it so that no packet leaves loopback.
type Network struct {
	// LookupIP returns the addresses of a host name; default net.DefaultResolver.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to an address the guard approved, always "ip:port"; default a
	// net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// addrRange is a range of addresses and what it is, for the error that refuses one.
type addrRange struct {
	prefix netip.Prefix
	what   string
}

// alwaysBlocked are addresses no crawl may reach, whatever the worker allows: cloud
// metadata services and the link-local ranges they live in.
var alwaysBlocked = []addrRange{
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata service"},
	{netip.MustParsePrefix("100.100.100.200/32"), "the Alibaba Cloud metadata service"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "the AWS metadata service (IPv6)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, where cloud metadata services answer"},
	{netip.MustParsePrefix("fe80::/10"), "link-local, where cloud metadata services answer"},
}

// privateRanges are refused unless the worker allows private addresses.
var privateRanges = []addrRange{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (it reaches this machine)"},
	{netip.MustParsePrefix("::/128"), "unspecified (it reaches this machine)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "private (carrier-grade NAT)"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fec0::/10"), "private (site-local)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "private (benchmarking)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// nat64 embeds IPv4 addresses in IPv6 (RFC 6052); the embedded address is judged.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// blockedError is a refused address. It names the host asked for, the address it
// resolved to, why the address is refused and what, if anything, allows it.
type blockedError struct {
	host   string // as asked for; the address itself for an IP literal
	addr   netip.Addr
	what   string
	always bool
}

func (e *blockedError) Error() string {
	where := "address " + e.addr.String()
	if e.host != "" && e.host != e.addr.String() {
		where = fmt.Sprintf("%s (address %s)", e.host, e.addr)
	}
	if e.always {
		return fmt.Sprintf("%s is %s: never fetched, whatever --allow-private says", where, e.what)
	}
	return fmt.Sprintf("%s is %s: this worker refuses private and loopback addresses (start it with --allow-private or TRAWLER_ALLOW_PRIVATE=1 to crawl them)", where, e.what)
}

func (e *blockedError) Is(target error) bool { return target == ErrBlocked }

func (e *blockedError) FailureCause() crawl.Cause { return crawl.CauseBlocked }

// schemeError is a redirect to a URL that is not http or https (file://, ftp://, …):
// refused like an address the guard refuses, since it would reach what no crawl may.
type schemeError struct{ scheme string }

func (e *schemeError) Error() string {
	return fmt.Sprintf("the fetcher follows only http and https URLs, never %s", e.scheme)
}

func (e *schemeError) Is(target error) bool { return target == ErrBlocked }

// guard judges addresses for one Fetcher.
type guard struct {
	allowPrivate bool
	allowAddrs   []netip.AddrPort
	timeout      time.Duration // the whole dial: lookup and connecting
	lookup       func(ctx context.Context, host string) ([]netip.Addr, error)
	dial         func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newGuard(o Options) *guard {
	g := &guard{allowPrivate: o.AllowPrivate, allowAddrs: o.AllowAddrs, timeout: o.ConnectTimeout}
	g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	// The Control hook re-judges the address the socket is about to connect to, so a
	// path that reached the dialer without the lookup below is refused all the same.
	d := &net.Dialer{KeepAlive: 30 * time.Second, Control: g.control}
	g.dial = d.DialContext
	if o.Network != nil {
		if o.Network.LookupIP != nil {
			g.lookup = o.Network.LookupIP
		}
		if o.Network.Dial != nil {
			g.dial = o.Network.Dial
		}
	}
	return g
}

// check returns a *blockedError when ip may not be reached on port; host names it in
// the error.
func (g *guard) check(host string, ip netip.Addr, port uint16) error {
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:16]))
	}
	for _, r := range alwaysBlocked {
		if r.prefix.Contains(ip) {
			return &blockedError{host: host, addr: ip, what: r.what, always: true}
		}
	}
	if g.allowPrivate || slices.Contains(g.allowAddrs, netip.AddrPortFrom(ip, port)) {
		return nil
	}
	for _, r := range privateRanges {
		if r.prefix.Contains(ip) {
			return &blockedError{host: host, addr: ip, what: r.what}
		}
	}
	return nil
}

// resolve returns the addresses of host (itself for an IP literal).
func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	ips, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return ips, nil
}

// dialContext resolves addr, refuses it when any of its addresses is blocked, and
// otherwise connects to the approved addresses in turn.
func (g *guard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", addr)
	}
	ips, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	// One blocked address refuses the host: a name that mixes public and internal
	// addresses is not one to trust with a retry on the next address.
	for _, ip := range ips {
		if err := g.check(host, ip, uint16(port)); err != nil {
			return nil, err
		}
	}
	var first error
	for _, ip := range ips {
		c, err := g.dial(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// control is the net.Dialer hook: the last look at the address before connect(2).
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("fetch guard: cannot read the address %q", address)
	}
	return g.check("", ap.Addr(), ap.Port())
}

// checkHost judges a host the fetcher will not connect to itself: the target of a
// request sent through a proxy, which the proxy resolves. A name the worker cannot
// resolve is left to the proxy, whose network is not the worker's.
func (g *guard) checkHost(ctx context.Context, host string, port uint16) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	ips, err := g.resolve(ctx, host)
	if err != nil {
		if _, literal := netip.ParseAddr(host); literal == nil {
			return err
		}
		return nil
	}
	for _, ip := range ips {
		if err := g.check(host, ip, port); err != nil {
			return err
		}
	}
	return nil
}

// proxy picks the proxy of a request (its lease's, else the environment's) and, when
// there is one, judges the request's own host, which only the proxy will resolve.
func (g *guard) proxy(req *http.Request) (*url.URL, error) {
	p, err := proxyFor(req)
	if err != nil || p == nil {
		return p, err
	}
	if err := g.checkHost(req.Context(), req.URL.Hostname(), urlPort(req.URL)); err != nil {
		return nil, err
	}
	return p, nil
}

// urlPort is the port a URL reaches: its own, else its scheme's.
func urlPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}
