package crawl

import "testing"

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://bob:hunter2pw@127.0.0.1:3129":           "http://bob:***@127.0.0.1:3129",
		"https://bob:p@ss@host/x?y=1":                   "https://bob:***@host/x?y=1",
		"redis://:s3cret@cache:6379/2":                  "redis://:***@cache:6379/2",
		"rediss://default:s3cret@cache:6380":            "rediss://default:***@cache:6380",
		"mongodb://app:pw@m1,m2/?replicaSet=rs0":        "mongodb://app:***@m1,m2/?replicaSet=rs0",
		"https://ghp_token123@github.com/o/r":           "https://***@github.com/o/r",
		"http://127.0.0.1:8089/item/3":                  "http://127.0.0.1:8089/item/3",
		"http://host/path/user@example.com":             "http://host/path/user@example.com",
		"http://host/?mail=a@b":                         "http://host/?mail=a@b",
		"":                                              "",
		"host:6379":                                     "host:6379",
		"http://bob:***@host":                           "http://bob:***@host",
		"http://elastic:PW@es:9200,http://x:Q@es2:9200": "http://elastic:***@es:9200,http://x:***@es2:9200",
		"https://sign.internal/sign?key=k3y&v=2":        "https://sign.internal/sign?key=***&v=2",
		"https://s:pw@h/a?v=2&API_KEY=k#top":            "https://s:***@h/a?v=2&API_KEY=***#top",
		"http://h/search?monkey=1&keys=2&key=":          "http://h/search?monkey=1&keys=2&key=",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactText(t *testing.T) {
	for in, want := range map[string]string{
		`GET http://bob:hunter2pw@site/item/3: HTTP 500 Internal Server Error (2 attempts)`: `GET http://bob:***@site/item/3: HTTP 500 Internal Server Error (2 attempts)`,
		`dial "redis://:pw@10.0.0.1:6379": refused; proxy http://u:p@p:3128 down`:           `dial "redis://:***@10.0.0.1:6379": refused; proxy http://u:***@p:3128 down`,
		"Authorization: Bearer abc.def\nnext":                                               "Authorization: ***\nnext",
		`{"cookie":"sid=0123456789abcdef; path=/","n":1}`:                                   `{"cookie":"***","n":1}`,
		"Cookie=sid=abc; theme=dark":                                                        "Cookie=***",
		"cookie pool of tenant t is empty":                                                  "cookie pool of tenant t is empty",
		"mail bob@example.com about http://site/a":                                          "mail bob@example.com about http://site/a",
		`signing service: Post "http://127.0.0.1:1/sign?token=s3cret": dial tcp: refused`:   `signing service: Post "http://127.0.0.1:1/sign?token=***": dial tcp: refused`,
	} {
		if got := RedactText(in); got != want {
			t.Errorf("RedactText(%q)\n got %q\nwant %q", in, got, want)
		}
	}
	f := Failure{Step: "s", Input: Input{URL: "http://bob:pw@h/x"}, Cause: "GET http://bob:pw@h/x: HTTP 404 Not Found"}.Redacted()
	if f.Input.URL != "http://bob:***@h/x" || f.Cause != "GET http://bob:***@h/x: HTTP 404 Not Found" {
		t.Errorf("Redacted failure %+v", f)
	}
}

func TestSecretParamsAreConfigurable(t *testing.T) {
	defer SetSecretParams(nil)
	SetSecretParams([]string{"sid", " "})
	if got, want := RedactURL("http://h/x?sid=abc&key=k&q=1"), "http://h/x?sid=***&key=***&q=1"; got != want {
		t.Errorf("RedactURL = %q, want %q", got, want)
	}
	SetSecretParams(nil)
	if got, want := RedactURL("http://h/x?sid=abc"), "http://h/x?sid=abc"; got != want {
		t.Errorf("after SetSecretParams(nil): RedactURL = %q, want %q", got, want)
	}
}

func TestStripUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		"http://bob:hunter2@site:8089/item/3":      "http://site:8089/item/3",
		"https://token@h/x#2":                      "https://h/x#2",
		"https://bob:p@ss@host/x?y=1":              "https://host/x?y=1",
		"http://site/item/3":                       "http://site/item/3",
		"mail bob@example.com about http://site/a": "mail bob@example.com about http://site/a",
		"demo:story:3":                             "demo:story:3",
	} {
		if got := StripUserinfo(in); got != want {
			t.Errorf("StripUserinfo(%q) = %q, want %q", in, got, want)
		}
	}
}
