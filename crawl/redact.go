package crawl

import (
	"regexp"
	"strings"
)

// Redaction. Credentials ride in URLs (a base_url with user:password@, a proxy
// http://bob:pw@host:3129, redis://:pw@host, mongodb://user:pw@host) and in headers
// (Authorization, Cookie). Everything a person or another program reads — run
// summaries, failures, status, the failure log, the console API, logs, store errors —
// passes through RedactURL or RedactText first, so that one rule decides what is shown:
// the user name stays, so the reader can tell which credential was used, and the
// secret becomes ***.

// Masked replaces a secret.
const Masked = "***"

// userinfo finds scheme://user[:password]@ in text; the user info runs to the last @
// before the path, so a password with an unescaped @ is masked whole.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^/?#\s"'<>@]*(?:@[^/?#\s"'<>@]*)*)@`)

// secretHeader finds the value of a header that carries a credential, in text that
// quotes headers (`Authorization: Bearer …`, `Cookie=sid=…`, JSON "cookie":"…").
var secretHeader = regexp.MustCompile(`(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key)("?\s*[:=]\s*"?)([^"\r\n,;]+(?:;[^"\r\n,]*)?)`)

// RedactURL returns u with the password of its user info masked
// (http://bob:***@host:3129), or the whole user info when it has no password, as a
// bare token (https://***@host). Anything that is not a URL with user info comes
// back unchanged.
func RedactURL(u string) string {
	if !strings.Contains(u, "@") {
		return u
	}
	return userinfo.ReplaceAllStringFunc(u, maskUserinfo)
}

// RedactText masks the credentials of every URL in s (as RedactURL does) and the
// values of credential headers (Authorization, Proxy-Authorization, Cookie,
// Set-Cookie, X-Api-Key) quoted in it: an error message, a log line, a summary.
func RedactText(s string) string {
	if strings.Contains(s, "@") {
		s = userinfo.ReplaceAllStringFunc(s, maskUserinfo)
	}
	if strings.ContainsAny(s, ":=") {
		s = secretHeader.ReplaceAllString(s, "${1}${2}"+Masked)
	}
	return s
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
