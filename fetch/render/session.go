package render

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
)

// Attributes of a session in the cookie pool besides its Cookie header (the item's
// value): generic.login writes them, a page that leases the session is seeded with them.
const (
	// AttrStorage is the session's localStorage entries, as a JSON object.
	AttrStorage = "local_storage"
	// AttrOrigin is the origin (scheme://host[:port]) the entries belong to.
	AttrOrigin = "origin"
)

// leasedSession is the cookie-pool item a page leased, to put into its tab.
type leasedSession struct {
	cookies []*http.Cookie
	storage map[string]string
	origin  string
}

func sessionOf(l *external.Lease) *leasedSession {
	if l == nil {
		return nil
	}
	r, ok := l.Item(external.Cookie)
	if !ok {
		return nil
	}
	s := &leasedSession{origin: r.Attrs[AttrOrigin]}
	s.cookies, _ = http.ParseCookie(r.Value)
	if raw := r.Attrs[AttrStorage]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &s.storage)
	}
	return s
}

// seed puts the leased session into the tab before the page navigates: its cookies
// for the page's site, its localStorage entries for their origin (and only that one:
// a frame of another site gets nothing). The returned func stops seeding later pages
// of the tab; the tab's cookies and storage are cleared after the page anyway.
func (pg *pageRun) seed(ctx context.Context, deadline time.Time) (func(), error) {
	s := pg.session
	var params []*network.CookieParam
	for _, c := range s.cookies {
		params = append(params, &network.CookieParam{Name: c.Name, Value: c.Value, URL: pg.req.URL, Path: "/"})
	}
	if len(params) > 0 {
		if err := pg.call(ctx, deadline, network.SetCookies(params)); err != nil {
			return nil, err
		}
	}
	if len(s.storage) == 0 || s.origin == "" {
		return func() {}, nil
	}
	entries, _ := json.Marshal(s.storage)
	origin, _ := json.Marshal(s.origin)
	script := fmt.Sprintf(`if (location.origin === %s) { const e = %s; for (const k in e) localStorage.setItem(k, e[k]); }`, origin, entries)
	var id page.ScriptIdentifier
	err := pg.call(ctx, deadline, chromedp.ActionFunc(func(ctx context.Context) (err error) {
		id, err = page.AddScriptToEvaluateOnNewDocument(script).Do(ctx)
		return err
	}))
	if err != nil {
		return nil, err
	}
	return func() { _ = pg.call(ctx, time.Now().Add(hungAfter), page.RemoveScriptToEvaluateOnNewDocument(id)) }, nil
}

// login waits, once the actions ran, for the page to show the login's success
// condition, and takes the browser's session: its cookies for the page and the
// localStorage entries named. A page that never shows it failed to log in.
func (pg *pageRun) login(ctx context.Context, deadline time.Time) (*crawl.Session, error) {
	l := pg.req.Login
	var conds []string
	var what string
	if l.Selector != "" {
		sel, _ := json.Marshal(l.Selector)
		conds = append(conds, `document.querySelector(`+string(sel)+`) !== null`)
		what = fmt.Sprintf("success_selector %q matched nothing", l.Selector)
	}
	if l.URL != "" {
		if _, err := regexp.Compile(l.URL); err != nil {
			return nil, crawl.WithCause(crawl.Permanentf("success_url %q is not a regular expression: %v", l.URL, err), crawl.CauseConfig)
		}
		re, _ := json.Marshal(l.URL)
		conds = append(conds, `new RegExp(`+string(re)+`).test(location.href)`)
		if what != "" {
			what += " or "
		}
		what += fmt.Sprintf("success_url %q did not match the address", l.URL)
	}
	cond := `document.readyState === "complete"`
	for _, c := range conds {
		cond += " && " + c
	}
	ok, err := pg.waitFor(ctx, deadline, cond)
	if err != nil {
		return nil, err
	}
	if !ok {
		var at string
		_ = pg.eval(ctx, time.Now().Add(hungAfter), `location.href`, &at)
		// The site refused the credentials: trying again with the same ones does not help.
		return nil, crawl.WithCause(crawl.Permanentf("login failed: %s within %s (render.timeout); the page is at %s — check the credentials' secret files and the success condition", what, pg.r.Opts.Timeout, crawl.RedactURL(at)), crawl.CauseAction)
	}
	s := &crawl.Session{Storage: map[string]string{}}
	err = pg.call(ctx, deadline, chromedp.ActionFunc(func(ctx context.Context) error {
		cs, err := network.GetCookies().Do(ctx)
		for _, c := range cs {
			hc := &http.Cookie{Name: c.Name, Value: c.Value, Domain: c.Domain, Path: c.Path, HttpOnly: c.HTTPOnly, Secure: c.Secure}
			if !c.Session && c.Expires > 0 {
				hc.Expires = time.Unix(int64(c.Expires), 0)
			}
			s.Cookies = append(s.Cookies, hc)
		}
		return err
	}))
	if err != nil {
		return nil, fmt.Errorf("read the session's cookies: %w", err)
	}
	if len(l.Storage) > 0 {
		keys, _ := json.Marshal(l.Storage)
		var got map[string]*string
		if err := pg.eval(ctx, deadline, `Object.fromEntries(`+string(keys)+`.map(k => [k, localStorage.getItem(k)]))`, &got); err != nil {
			return nil, fmt.Errorf("read localStorage: %w", err)
		}
		for k, v := range got {
			if v != nil {
				s.Storage[k] = *v
			}
		}
	}
	return s, nil
}

// PoolUsable passes a farming task's question about its site's pools on to the step's
// fetcher (external.Wanted): a login rendered is still a farming step.
func (r Renderer) PoolUsable(ctx context.Context, k external.Kind) ([]string, int, error) {
	if v, ok := r.Inner.(external.PoolView); ok {
		return v.PoolUsable(ctx, k)
	}
	return nil, 0, nil
}
