package tests

import (
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/devstack/demosite"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/external"
	"github.com/trawlerhq/trawler/internal/workflows"
)

// loginChains are the chains of the login test: farm logs in at the demo site's form
// with secrets from a file and the workers' environment, and keeps the session in
// site shop's cookie pool; crawl reads the protected pages /form/private/1..privatePages
// with it, rendered and plain.
type loginChains struct{ site, secrets string }

const privatePages = 4

// loginPasswordEnv is the workers' variable the farming chain reads the password from
// (the user name comes from a file).
const loginPasswordEnv = "TRAWLER_TEST_SHOP_PASSWORD"

func (c loginChains) farm(success string) string {
	return `name: shop-farm
secrets:
  shop_user: {file: ` + c.secrets + `/shop-user}
  shop_password: {env: ` + loginPasswordEnv + `}
steps:
  - id: login
    task: generic.login
    retries: 0
    pool_site: shop
    params:
      base_url: ` + c.site + `
      urls: [/form/login]
      success_selector: "` + success + `"
      local_storage: [api_token]
    render:
      mode: always
      timeout: 5s
      har: true
      actions:
        - fill: {"#user": {secret: shop_user}}
        - fill: {"#password": {secret: shop_password}}
        - click: "button[type=submit]"
    store: [pool:cookie]
`
}

// crawl reads the protected pages, rendered and plain (or plain only); with needs false
// its steps lease nothing.
func (c loginChains) crawl(needs, rendered bool) string {
	lease := ""
	if needs {
		lease = "    needs: [cookie]\n    pool_site: shop\n"
	}
	step := func(id, render string, from int) string {
		urls := []string{}
		for n := from; n < from+privatePages; n++ {
			urls = append(urls, "/form/private/"+string(rune('0'+n)))
		}
		return `  - id: ` + id + `
    task: generic.html_detail
    retries: 0
    dedup: off
` + lease + render + `    params:
      base_url: ` + c.site + `
      urls: [` + strings.Join(urls, ", ") + `]
      fields:
        title: {css: h1.private, required: true}
    store: [jsonl]
`
	}
	chain := "name: shop\nsteps:\n" + step("plain", "", 1+privatePages)
	if rendered {
		chain += step("rendered", "    render: {mode: always, timeout: 5s, har: true}\n", 1)
	}
	return chain
}

// A login step fills the cookie pool from secret files; a generic step that leases the
// pool reads the protected pages (rendered and plain) that answer 403 without it; the
// password is nowhere in the logs, status, records, failures or HARs; and a session the
// site has ended is dropped from the pool at its first refusal, so the next farming run
// logs in again and the waiting pages are read with the new session.
func TestLoginSessionFeedsTheCookiePool(t *testing.T) {
	out := filepath.Join(shared.dir, "login-out")
	var logs syncBuffer
	w := renderWorkersWith(t, "login", engine.WorkerOptions{OutDir: out, Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	site := startSite(t, demosite.Options{})
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, "shop-user"), []byte(demosite.LoginUser+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(loginPasswordEnv, demosite.LoginPassword)
	c := loginChains{site: site, secrets: secrets}
	p := pools(t)
	ctx := context.Background()
	sessions := func() *external.PoolStats {
		t.Helper()
		st, err := p.Stats(ctx, tenantOf(t), "shop", external.Cookie, true)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	var summaries []*workflows.Summary
	run := func(name, yaml string) (string, *workflows.Summary) {
		t.Helper()
		id := start(t, plan(t, name, yaml), "login")
		s := wait(t, id, 2*time.Minute)
		summaries = append(summaries, s)
		return id, s
	}

	// Without a session every protected page is refused.
	_, s := run("shop.yaml", c.crawl(false, true))
	if len(s.Failures) != 2*privatePages {
		t.Fatalf("without a session: %d failures, want %d: %+v", len(s.Failures), 2*privatePages, s.Failures)
	}
	for _, f := range s.Failures {
		if !strings.Contains(f.Cause, "403") {
			t.Errorf("without a session %s failed with %q; want the site's 403", f.Input.URL, f.Cause)
		}
	}

	// A login whose success condition never shows fails with its HAR, and keeps nothing.
	_, s = run("shop-farm.yaml", c.farm("#nope"))
	if len(s.Failures) != 1 || s.Failures[0].Class != crawl.CauseAction || !strings.Contains(s.Failures[0].Cause, `login failed: success_selector "#nope" matched nothing`) {
		t.Fatalf("a login that never succeeds: failures %+v; want one, cause action, naming the condition", s.Failures)
	}
	if n := sessions().Size; n != 0 {
		t.Fatalf("a failed login left %d sessions in the pool", n)
	}

	// The login fills the pool with exactly one session, which the crawl leases.
	_, s = run("shop-farm.yaml", c.farm("#account"))
	noFailures(t, s)
	if st := sessions(); st.Size != 1 || st.Usable != 1 || st.Items[0].Expires.IsZero() || !strings.Contains(st.Items[0].Value, "sid=") {
		t.Fatalf("after the login the pool holds %+v; want one usable session with the sid cookie and its expiry", st)
	}
	crawlID, s := run("shop.yaml", c.crawl(true, true))
	noFailures(t, s)
	got := sinkItems(t, w.JSONL, crawlID)
	for _, biz := range []string{"shop.rendered", "shop.plain"} {
		if len(got[biz]) != privatePages {
			t.Errorf("stored %d %s pages, want %d: %v", len(got[biz]), biz, privatePages, sortedKeysOf(got[biz]))
		}
		for _, it := range got[biz] {
			if !strings.HasPrefix(it.Data["title"].(string), "Private page ") {
				t.Errorf("%s stored %v; want a private page's title", biz, it.Data)
			}
		}
	}

	// The site ends the session: its first refusal drops it (drop_after: 1) and the pages
	// wait for the pool; the next farming run logs in again and they are read with it.
	if err := p.Configure(ctx, tenantOf(t), "shop", external.Cookie, external.Config{DropAfter: 1}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(site+"/form/expire", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waiting := start(t, plan(t, "shop.yaml", c.crawl(true, false)), "login")
	deadline := time.Now().Add(time.Minute)
	for st := sessions(); st.Size != 0 || st.Counts["dropped"] != 1; st = sessions() {
		if time.Now().After(deadline) {
			t.Fatalf("the ended session is not dropped: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, s = run("shop-farm.yaml", c.farm("#account"))
	noFailures(t, s)
	if st := sessions(); st.Size != 1 || st.Usable != 1 {
		t.Fatalf("after logging in again the pool holds %+v; want one usable session", st)
	}
	s = wait(t, waiting, 2*time.Minute)
	summaries = append(summaries, s)
	noFailures(t, s)
	if n := len(sinkItems(t, w.JSONL, waiting)["shop.plain"]); n != privatePages {
		t.Errorf("with the new session the waiting run stored %d pages, want %d", n, privatePages)
	}
	checkNoPassword(t, out, logs.String(), summaries)
}

// checkNoPassword fails when the login's password shows in the worker's logs, a run's
// status, or any file the worker wrote (records, failures, HARs).
func checkNoPassword(t *testing.T, out, logs string, summaries []*workflows.Summary) {
	t.Helper()
	pw := demosite.LoginPassword
	if strings.Contains(logs, pw) {
		t.Errorf("the worker's logs show the password")
	}
	for _, s := range summaries {
		b, _ := json.Marshal(s)
		if strings.Contains(string(b), pw) {
			t.Errorf("run %s's status shows the password", s.RunID)
		}
	}
	sent := false // the failed login's HAR holds its form POST, the password masked
	_ = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".har") && strings.Contains(string(b), "password="+crawl.Masked) {
			sent = true
		}
		if strings.Contains(string(b), pw) {
			t.Errorf("%s shows the password", path)
		}
		return nil
	})
	if !sent {
		t.Errorf("no HAR in %s holds the login's form POST with the password masked", out)
	}
}
