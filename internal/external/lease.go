package external

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// Lease is what one request borrowed: an item per pooled kind it needs, and the site's
// signer. Return gives the items back with the request's outcome.
type Lease struct {
	pools  *Pools
	scope  Scope
	items  []leased
	signer Signer
	signBy string // the signer's name or URL, for errors
	// Proxy is the proxy URL the request goes through ("" for none).
	Proxy string
}

type leased struct {
	kind Kind
	site string // the pool it came from: the scope's site or Shared
	cfg  Config
	res  Resource
	// bound items travel with a cookie (or come from the built-in user agents) and are
	// not checked out of a pool.
	bound bool
}

// DeviceHeader is the header a device id is sent in, unless the item's "header"
// attribute names another.
const DeviceHeader = "X-Device-Id"

// Lend checks out what the scope needs. A cookie comes first: the user agent and device
// id bound to it are used instead of pooled ones. An item that is busy or cooling down
// for at most MaxWait is waited for; otherwise Lend returns a WaitError and holds
// nothing.
func (p *Pools) Lend(ctx context.Context, s Scope) (*Lease, error) {
	l := &Lease{pools: p, scope: s}
	if s.needs(Sign) {
		signer, by, err := p.signerFor(ctx, s)
		if err != nil {
			return nil, err
		}
		l.signer, l.signBy = signer, by
	}
	for _, k := range Pooled {
		if !s.needs(k) {
			continue
		}
		if v, ok := l.boundValue(k); ok {
			l.items = append(l.items, leased{kind: k, site: s.Site, res: Resource{ID: ItemID(v), Value: v}, bound: true})
			continue
		}
		it, err := p.take(ctx, s, k)
		if err != nil {
			l.Return(context.WithoutCancel(ctx), Verdict{Outcome: Released})
			return nil, err
		}
		l.items = append(l.items, it)
		if k == Proxy {
			l.Proxy = it.res.Value
		}
	}
	return l, nil
}

// boundValue is the value a leased cookie binds for kind k.
func (l *Lease) boundValue(k Kind) (string, bool) {
	if k != UserAgent && k != DeviceID {
		return "", false
	}
	for _, it := range l.items {
		if it.kind == Cookie {
			v := it.res.Attrs[string(k)]
			return v, v != ""
		}
	}
	return "", false
}

// take checks one item out of the site's pool, then the tenant's shared pool; user
// agents fall back to a built-in list. It waits up to MaxWait for a busy item.
func (p *Pools) take(ctx context.Context, s Scope, k Kind) (leased, error) {
	sites := []string{s.Site}
	if k == Proxy || k == UserAgent {
		sites = append(sites, Shared)
	}
	deadline := p.now().Add(p.MaxWait)
	pause := 20 * time.Millisecond
	for {
		var first *WaitError
		for _, site := range sites {
			cfg, err := p.Config(ctx, s.Tenant, site, k)
			if err != nil {
				return leased{}, err
			}
			r, err := p.checkout(ctx, s.Tenant, site, k, cfg)
			if err == nil {
				return leased{kind: k, site: site, cfg: cfg, res: *r}, nil
			}
			var w *WaitError
			if !errors.As(err, &w) {
				return leased{}, err
			}
			if first == nil || (first.Size == 0 && w.Size > 0) {
				first = w
			}
		}
		if first.Size == 0 {
			if k == UserAgent {
				return leased{kind: k, res: builtinUserAgent(), bound: true}, nil
			}
			return leased{}, first
		}
		wait := max(first.After, pause)
		if p.now().Add(wait).After(deadline) {
			return leased{}, first
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return leased{}, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 250*time.Millisecond)
	}
}

// Prepare returns a copy of r carrying the leased items — Cookie, User-Agent and device
// id headers — signed by the site's signer when the task needs sign.
func (l *Lease) Prepare(ctx context.Context, r *crawl.Request) (*crawl.Request, error) {
	cp := *r
	cp.Header = r.Header.Clone()
	if cp.Header == nil {
		cp.Header = http.Header{}
	}
	for _, it := range l.items {
		switch it.kind {
		case Cookie:
			if old := cp.Header.Get("Cookie"); old != "" {
				cp.Header.Set("Cookie", old+"; "+it.res.Value)
			} else {
				cp.Header.Set("Cookie", it.res.Value)
			}
		case UserAgent:
			cp.Header.Set("User-Agent", it.res.Value)
		case DeviceID:
			h := DeviceHeader
			if v := it.res.Attrs["header"]; v != "" {
				h = v
			}
			cp.Header.Set(h, it.res.Value)
		}
	}
	if l.signer != nil {
		if err := l.signer.Sign(ctx, &cp); err != nil {
			return nil, fmt.Errorf("sign %s %s with signer %s: %w", cp.Method, cp.URL, l.signBy, err)
		}
	}
	return &cp, nil
}

// Verdict is what a request's answer says about the leased items.
type Verdict struct {
	Outcome Outcome
	// Kind is the item blamed for a ban or throttle; "" blames the cookie, else the
	// device id, else the proxy.
	Kind Kind
	// Wait is how long a throttled item rests (a Retry-After), 0 for the pool's default.
	Wait time.Duration
	// Err, when set, fails the request with this error instead of the fetcher's: a
	// rejected signature is the signer's fault, not the cookie's.
	Err error
}

// BanRule reads an answer — its status and headers, before the fetcher turns a non-2xx
// status into an error — and says what it means for the leased items. Returning ok
// false leaves the answer to DefaultBanRule.
type BanRule func(status int, header http.Header) (v Verdict, ok bool)

// DefaultBanRule: 401 and 403 ban the blamed item, 429 throttles it for its Retry-After.
func DefaultBanRule(status int, header http.Header) Verdict {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return Verdict{Outcome: Banned}
	case http.StatusTooManyRequests:
		d, _ := crawl.ParseRetryAfter(header.Get("Retry-After"), time.Now())
		return Verdict{Outcome: Throttled, Wait: d}
	}
	if status >= 200 && status < 400 {
		return Verdict{Outcome: Success}
	}
	return Verdict{Outcome: Released}
}

// Judge turns a request's result into a verdict: the site's ban rule, then the default
// one; a request that got no answer at all is a strike against its proxy.
func (l *Lease) Judge(status int, header http.Header, err error) Verdict {
	if status == 0 {
		if err != nil && l.Proxy != "" && !errors.Is(err, context.Canceled) {
			return Verdict{Outcome: Failed, Kind: Proxy}
		}
		return Verdict{Outcome: Released}
	}
	if rule := banRule(l.scope.Site); rule != nil {
		if v, ok := rule(status, header); ok {
			if v.Err != nil && l.signer != nil {
				v.Err = fmt.Errorf("%w (signed by %s)", v.Err, l.signBy)
			}
			return v
		}
	}
	return DefaultBanRule(status, header)
}

// Blamed is the kind a verdict bans or throttles among the leased ones.
func (l *Lease) Blamed(v Verdict) Kind {
	if v.Kind != "" {
		for _, it := range l.items {
			if it.kind == v.Kind && it.bound && v.Kind != UserAgent {
				return Cookie // it came with the cookie: the session is what the site refuses
			}
		}
		return v.Kind
	}
	for _, k := range []Kind{Cookie, DeviceID, Proxy} {
		for _, it := range l.items {
			if it.kind == k {
				return k
			}
		}
	}
	return ""
}

// Return gives every item back. The blamed item takes a ban, throttle or strike; the
// others are released (on success, all count a success). It reports what happened to
// the blamed item ("banned", "dropped", …) for logs and errors.
func (l *Lease) Return(ctx context.Context, v Verdict) string {
	if l == nil {
		return ""
	}
	blamed := l.Blamed(v)
	var what []string
	for _, it := range l.items {
		if it.bound {
			continue // bound to the cookie, or built in: nothing to return
		}
		o := v.Outcome
		if o != Success && it.kind != blamed {
			o = Released
		}
		state, err := l.pools.release(ctx, l.scope.Tenant, it.site, it.kind, it.res.ID, o, v.Wait, it.cfg)
		if err != nil {
			l.pools.log.Warn("return a pool item", "kind", it.kind, "tenant", l.scope.Tenant, "site", it.site, "id", it.res.shownID(), "err", err)
			continue
		}
		if it.kind == blamed && o != Success && o != Released {
			what = append(what, fmt.Sprintf("%s %s %s", it.kind, it.res.label(it.kind), state))
		}
	}
	l.items = nil
	return strings.Join(what, ", ")
}

// Item is the value leased for kind k, if any.
func (l *Lease) Item(k Kind) (Resource, bool) {
	for _, it := range l.items {
		if it.kind == k {
			return it.res, true
		}
	}
	return Resource{}, false
}
