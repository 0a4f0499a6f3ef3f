package generic

import (
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/crawl"
)

// A login step without a success condition, with a password written in the chain file,
// or that does not render: each is named with its file, line and fix.
func TestLoginValidate(t *testing.T) {
	src := `name: farm
steps:
  - id: login
    task: generic.login
    urls: [http://shop.example/login]
    render:
      mode: always
      actions:
        - fill: {"#user": {secret_file: /run/secrets/user}}
        - fill: {"#password": hunter2}
        - click: button
    store: [jsonl]
  - id: again
    task: generic.login
    params: {success_url: /account$}
    urls: [http://shop.example/login]
    store: [jsonl]
`
	_, err := crawl.Load("farm.yaml", []byte(src), crawl.LoadOptions{})
	got := ""
	if err != nil {
		got = err.Error()
	}
	for _, want := range []string{
		`farm.yaml:3: step "login": param success_selector: a login needs a success condition: add success_selector (a CSS selector that matches once logged in, e.g. "#account") or success_url (a regular expression of the address reached, e.g. /account$)`,
		`farm.yaml:10: step "login": render.actions[1] fill "#password": a login types nothing written in the chain file; put the value in a file on the workers and write fill: {"#password": {secret_file: /run/secrets/NAME}}`,
		`farm.yaml:13: step "again": task generic.login logs in in a browser; add render: {mode: always, actions: [...]} with the actions that fill and send the login form`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("validate says:\n%s\nwant a line:\n%s", got, want)
		}
	}
	if strings.Contains(got, "hunter2") {
		t.Errorf("the error shows the password:\n%s", got)
	}
}
