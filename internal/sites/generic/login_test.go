package generic

import (
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/external"
)

// A login step without a success condition, with a password written in the chain file,
// or that does not render: each is named with its file, line and fix.
func TestLoginValidate(t *testing.T) {
	src := `name: farm
steps:
  - id: login
    task: generic.login
    params: {urls: [http://shop.example/login]}
    render:
      mode: always
      actions:
        - fill: {"#user": {secret_file: /run/secrets/user}}
        - fill: {"#password": hunter2}
        - click: button
    store: [jsonl]
  - id: again
    task: generic.login
    params: {success_url: /account$, urls: [http://shop.example/login]}
    store: [jsonl]
`
	_, err := crawl.Load("farm.yaml", []byte(src), crawl.LoadOptions{})
	got := ""
	if err != nil {
		got = err.Error()
	}
	for _, want := range []string{
		`farm.yaml:3: step "login": param success_selector: a login needs a success condition: add success_selector (a CSS selector that matches once logged in, e.g. "#account") or success_url (a regular expression of the address reached, e.g. /account$)`,
		`farm.yaml:10: step "login": render.actions[1] fill "#password": a login types nothing written in the chain file; declare the credential under the chain's secrets: (NAME: {file: /run/secrets/NAME} or {env: VARIABLE}) and write fill: {"#password": {secret: NAME}}`,
		`farm.yaml:13: step "again": task generic.login logs in in a browser; add render: {mode: always, actions: [...]} with the actions that fill and send the login form`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate says:\n%s\nwant a line:\n%s", got, want)
		}
	}
	if strings.Contains(got, "hunter2") {
		t.Errorf("the error shows the password:\n%s", got)
	}
	if strings.Count(got, "\n") != 2 {
		t.Errorf("validate says more than the three errors:\n%s", got)
	}
}

// A step that leases without naming whose pools, an unknown resource, a login that keeps
// its session under no site, and a pool_site nothing uses: each named with its line.
func TestPoolSiteValidate(t *testing.T) {
	src := `name: shop
steps:
  - id: login
    task: generic.login
    params: {urls: [http://shop.example/login], success_selector: "#account"}
    render:
      mode: always
      actions: [{click: button}]
    store: [pool:cookie]
  - id: pages
    task: generic.html_detail
    params: {urls: [http://shop.example/private/1], fields: {title: h1}}
    needs: [cookies]
    store: [jsonl]
  - id: more
    task: generic.html_detail
    params: {urls: [http://shop.example/private/2], fields: {title: h1}}
    pool_site: shop
    store: [jsonl]
`
	_, err := crawl.Load("shop.yaml", []byte(src), crawl.LoadOptions{Sinks: append([]string{"jsonl"}, external.SinkNames()...)})
	got := ""
	if err != nil {
		got = err.Error()
	}
	if strings.Count(got, "\n") != 3 {
		t.Errorf("validate says more than the four errors:\n%s", got)
	}
	for _, want := range []string{
		`shop.yaml:3: step "login": task generic.login keeps a session of one site: name it, pool_site: shop, and give the steps that use the session needs: [cookie] and the same pool_site`,
		`shop.yaml:13: step "pages": needs: unknown resource "cookies" (did you mean "cookie"?); a step leases cookie, device_id, proxy, user_agent`,
		`shop.yaml:13: step "pages": needs: name the site whose pools the step leases from: pool_site: shop, the same as the step that fills them (store: [pool:cookies])`,
		`shop.yaml:18: step "more": pool_site shop names the pools the step leases from (needs: [cookie]) or stores into (store: [pool:cookie]), and it does neither; add one or remove pool_site`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate says:\n%s\nwant a line:\n%s", got, want)
		}
	}
}
