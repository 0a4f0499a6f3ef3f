package fetch

import (
	"net"
	"net/url"
	"strings"
	"time"
)

const (
	// A host nobody has used for this long is forgotten (its limiter and slots); the
	// next request for it starts afresh.
	hostIdle   = time.Hour
	sweepEvery = 5 * time.Minute
)

// hostKey is scheme://host:port, lower-cased, with the default port made explicit, so
// that http://Example.com and http://example.com:80 share limits and robots.txt.
func hostKey(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		default:
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
