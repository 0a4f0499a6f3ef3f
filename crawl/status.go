package crawl

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CheckStatus turns a non-2xx response into the error a task returns: statuses a retry
// may cure (408, 425, 429, 5xx) are plain errors — with the site's Retry-After honoured
// through RetryAfter — and every other status is Permanent. The engine's fetcher already
// fails non-2xx answers this way; tasks call CheckStatus so they behave the same behind
// any Fetcher.
func CheckStatus(resp *Response, method, url string) error {
	code := resp.Status
	if code >= 200 && code < 300 {
		return nil
	}
	err := fmt.Errorf("%s %s: status %d %s", method, url, code, http.StatusText(code))
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return RetryAfter(err, d)
		}
		return err
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly || code >= 500:
		return err
	}
	return Permanent(err)
}

// maxRetryAfter caps absurd Retry-After values so they cannot overflow a Duration.
const maxRetryAfter = (1 << 31) * time.Second

// ParseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
