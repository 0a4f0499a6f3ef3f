package render

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
)

// A login in the browser: credentials typed from secret files into a form with a CSRF
// token, a POST answered by a redirect that sets the session cookie; the session comes
// back with its cookie and the localStorage entry asked for. A wrong password fails
// with the success condition named.
func TestLogin(t *testing.T) {
	base := demo(t, demosite.Options{})
	p := startPool(t, Options{Browsers: 1, Tabs: 1})
	dir := t.TempDir()
	secret := func(name, v string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	user, good, bad := secret("user", demosite.LoginUser), secret("good", demosite.LoginPassword), secret("bad", "wrong-pw-7")
	login := func(pw string) (*crawl.Response, error) {
		r := renderer(p, actionsOpts(
			crawl.Action{Kind: crawl.ActionFill, Selector: "#user", SecretFile: user},
			crawl.Action{Kind: crawl.ActionFill, Selector: "#password", SecretFile: pw},
			crawl.Action{Kind: crawl.ActionClick, Selector: "button[type=submit]"}))
		return r.Fetch(context.Background(), &crawl.Request{URL: base + "/form/login",
			Login: &crawl.Login{Selector: "#account", URL: "/form/account$", Storage: []string{"api_token"}}})
	}
	resp, err := login(good)
	if err != nil {
		t.Fatal(err)
	}
	s := resp.Session
	if s == nil || len(s.Cookies) != 1 || s.Cookies[0].Name != "sid" || s.Cookies[0].Expires.IsZero() || s.Storage["api_token"] != "tok-alice" {
		t.Fatalf("session %+v; want the sid cookie with its expiry and api_token", s)
	}
	if resp.URL != base+"/form/account" {
		t.Errorf("the login ended at %s", resp.URL)
	}

	_, err = login(bad)
	want := `render ` + base + `/form/login: login failed: success_selector "#account" matched nothing or success_url "/form/account$" did not match the address within 10s (render.timeout); the page is at ` + base + `/form/login`
	if err == nil || !strings.HasPrefix(err.Error(), want) || crawl.CauseOf(err) != crawl.CauseAction {
		t.Errorf("wrong password: %v\nwant %s", err, want)
	}
}
