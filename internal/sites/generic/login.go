package generic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/andybalholm/cascadia"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/fetch/render"
	"github.com/trawlerhq/trawler/internal/external"
)

// LoginTask logs in in a browser and hands the session on to the cookie pool.
const LoginTask = "generic.login"

var loginSpec = crawl.TaskSpec{
	Name:  LoginTask,
	Doc:   "log in in a browser: the step's render.actions fill the form (each fill types a secret the chain declares under secrets:), the page must then show success_selector or reach success_url; stores the session — the Cookie header of the browser's cookies, the localStorage entries named — as one item for store: [pool:cookie]",
	Seeds: seedInputs,
	Params: []crawl.Param{
		urlsParam,
		baseURLParam,
		{Name: "success_selector", Type: crawl.String, Doc: "a CSS selector that matches once logged in (e.g. the account menu)"},
		{Name: "success_url", Type: crawl.String, Doc: "a regular expression the page's address matches once logged in, e.g. /account$"},
		{Name: "local_storage", Type: crawl.List, Doc: "localStorage entries kept with the cookies, where the site keeps its token"},
		{Name: "ttl", Type: crawl.String, Doc: "how long the session lives, e.g. 12h; default: until its first cookie expires"},
	},
	Output: []crawl.Field{
		{Name: "value", Type: crawl.String, Doc: "the session as a Cookie header"},
		{Name: "expires", Type: crawl.Time, Doc: "the earliest expiry of its cookies, or now + ttl"},
		{Name: render.AttrStorage, Type: crawl.String, Doc: "the localStorage entries named, as a JSON object"},
		{Name: render.AttrOrigin, Type: crawl.String, Doc: "the origin the entries belong to"},
	},
	Timeout: 60 * time.Second,
	Retries: 2,
	HTML:    true,
	Login:   true,
	Check: func(p crawl.Params) []error {
		_, errs := parseCommon(LoginTask, p)
		_, err := parseLogin(p)
		if err != nil {
			errs = append(errs, err)
		}
		return errs
	},
}

type loginParams struct {
	login crawl.Login
	ttl   time.Duration
}

func parseLogin(p crawl.Params) (loginParams, error) {
	l := loginParams{login: crawl.Login{Selector: str(p["success_selector"]), URL: str(p["success_url"]), Storage: strList(p["local_storage"])}}
	switch {
	case l.login.Selector == "" && l.login.URL == "":
		return l, fmt.Errorf("param success_selector: a login needs a success condition: add success_selector (a CSS selector that matches once logged in, e.g. \"#account\") or success_url (a regular expression of the address reached, e.g. /account$)")
	case l.login.Selector != "":
		if _, err := cascadia.Compile(l.login.Selector); err != nil {
			return l, fmt.Errorf("param success_selector: %q is not a CSS selector: %v", l.login.Selector, err)
		}
	}
	if l.login.URL != "" {
		if _, err := regexp.Compile(l.login.URL); err != nil {
			return l, fmt.Errorf("param success_url: %q is not a regular expression: %v", l.login.URL, err)
		}
	}
	if raw := str(p["ttl"]); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d <= 0 {
			return l, fmt.Errorf("param ttl: %q is not a duration; write e.g. 12h or 30m", raw)
		}
		l.ttl = d
	}
	return l, nil
}

// Login opens the login page in the browser; the renderer runs the step's actions,
// waits for the success condition and hands back the browser's session.
var Login = crawl.TaskFunc(loginSpec, func(ctx context.Context, env *crawl.Env, in crawl.Input) (crawl.Result, error) {
	lp, err := parseLogin(env.Params)
	if err != nil {
		return crawl.Result{}, crawl.WithCause(crawl.Permanent(err), crawl.CauseConfig)
	}
	// A pool at its target needs no new session (trawler pool add cookie --target N).
	if n, err := external.Wanted(ctx, env, external.Cookie, 1); err != nil {
		return crawl.Result{}, err
	} else if n == 0 {
		return crawl.Result{Skipped: 1, Notes: []string{"the cookie pool is at its target: no login"}}, nil
	}
	resp, err := env.Fetch(ctx, &crawl.Request{URL: in.URL, Login: &lp.login})
	if err != nil {
		return crawl.Result{}, err
	}
	if resp.Session == nil {
		return crawl.Result{}, crawl.WithCause(crawl.Permanentf("step %s: %s logs in in a browser; give the step render: {mode: always, actions: [...]}", env.Step, LoginTask), crawl.CauseConfig)
	}
	s := resp.Session
	var pairs []string
	var expires time.Time
	for _, c := range s.Cookies {
		pairs = append(pairs, c.Name+"="+c.Value)
		if !c.Expires.IsZero() && (expires.IsZero() || c.Expires.Before(expires)) {
			expires = c.Expires
		}
	}
	if len(pairs) == 0 {
		return crawl.Result{}, crawl.Permanentf("login at %s succeeded but the browser holds no cookie for the page: nothing to keep as a session", crawl.RedactURL(resp.URL))
	}
	if lp.ttl > 0 {
		expires = time.Now().Add(lp.ttl)
	}
	data := map[string]any{"value": strings.Join(pairs, "; ")}
	if !expires.IsZero() {
		data["expires"] = expires.UTC().Format(time.RFC3339)
	}
	if len(s.Storage) > 0 {
		b, _ := json.Marshal(s.Storage)
		u, _ := url.Parse(resp.URL)
		data[render.AttrStorage], data[render.AttrOrigin] = string(b), u.Scheme+"://"+u.Host
	}
	// One session per login page: a fresh login replaces the last one in the pool.
	return crawl.Result{Items: []crawl.Item{{Key: "login:" + crawl.RedactURL(in.URL), URL: in.URL, Data: data}}}, nil
})
