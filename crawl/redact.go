package crawl

import (
	"regexp"
	"strings"
	"sync/atomic"
)

// Redaction. Credentials ride in URLs (a base_url with user:password@, a proxy
// http://bob:pw@host:3129, redis://:pw@host, mongodb://user:pw@host, a signing service's
// ?key=…) and in headers (Authorization, Cookie). Everything a person or another
// program reads — run summaries, failures, status, the failure log, the console API,
// logs, store errors — passes through RedactURL or RedactText first, so that one rule
// decides what is shown: the user name and the parameter's name stay, so the reader can
// tell which credential was used, and the secret becomes ***.
//
// A stored record never holds user info at all: StripUserinfo takes it out of an item's
// url, key and fields, and of the keys dedup and recrawl plans keep, while the request
// still carries it.

// Masked replaces a secret.
const Masked = "***"

// userinfo finds scheme://user[:password]@ in text; the user info runs to the last @
// before the path, so a password with an unescaped @ is masked whole.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#\s"'<>@]*(?:@[^/?#\s"'<>@]*)*)@`)

// secretHeader finds the value of a header that carries a credential, in text that
// quotes headers (`Authorization: Bearer …`, `Cookie=sid=…`, JSON "cookie":"…").
var secretHeader = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key)("?\s*[:=]\s*"?)([^"\r\n,;]+(?:;[^"\r\n,]*)?)`)

// DefaultSecretParams are the query parameters whose values are masked wherever a URL
// is shown; SetSecretParams adds more (TRAWLER_SECRET_PARAMS).
var DefaultSecretParams = []string{"key", "token", "api_key", "apikey", "access_token", "signature", "password", "secret", "client_secret"}

// secretParam finds ?name= or &name= of a secret parameter and its value.
var secretParam atomic.Pointer[regexp.Regexp]

func init() { SetSecretParams(nil) }

// SetSecretParams makes the values of these query parameters, besides
// DefaultSecretParams, masked wherever a URL is shown. Names match in any case.
func SetSecretParams(extra []string) {
	var names []string
	for _, n := range append(append([]string{}, DefaultSecretParams...), extra...) {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, regexp.QuoteMeta(n))
		}
	}
	// The value runs to the next parameter, or to a space or quote in text; a trailing
	// colon or comma is the text's, not the value's ("…?key=***: connection refused").
	secretParam.Store(regexp.MustCompile(`(?i)([?&;](?:` + strings.Join(names, "|") + `)=)[^&#\s"'<>]*[^&#\s"'<>:;,.)]`))
}

// RedactURL returns u with the password of its user info masked
// (http://bob:***@host:3129), or the whole user info when it has no password, as a
// bare token (https://***@host), and the values of its secret query parameters masked
// (https://sign.internal/sign?key=***). Anything else comes back unchanged.
func RedactURL(u string) string {
	if strings.Contains(u, "@") {
		u = userinfo.ReplaceAllStringFunc(u, maskUserinfo)
	}
	if strings.Contains(u, "=") {
		u = secretParam.Load().ReplaceAllString(u, "${1}"+Masked)
	}
	return u
}

// RedactText masks the credentials of every URL in s (as RedactURL does) and the
// values of credential headers (Authorization, Proxy-Authorization, Cookie,
// Set-Cookie, X-Api-Key) quoted in it: an error message, a log line, a summary.
func RedactText(s string) string {
	s = RedactURL(s)
	if strings.ContainsAny(s, ":=") {
		s = secretHeader.ReplaceAllString(s, "${1}${2}"+Masked)
	}
	return s
}

// StripUserinfo takes the user info out of every URL in s
// (http://bob:pw@host/item/3 becomes http://host/item/3): what a stored URL, record
// key or dedup key is made of, so that no store holds a password and rotating one does
// not make every record new.
func StripUserinfo(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return userinfo.ReplaceAllString(s, "${1}")
}

func maskUserinfo(m string) string {
	sub := userinfo.FindStringSubmatch(m)
	scheme, info := sub[1], sub[2]
	if info == "" {
		return m
	}
	if user, _, ok := strings.Cut(info, ":"); ok {
		return scheme + user + ":" + Masked + "@"
	}
	return scheme + Masked + "@"
}

// Redacted is the failure as it may be shown and stored: its URL and cause with their
// credentials masked. A failure is a report, never run again, so nothing needs the
// secret back.
func (f Failure) Redacted() Failure {
	f.Cause = RedactText(f.Cause)
	f.Input.URL = RedactURL(f.Input.URL)
	return f
}
