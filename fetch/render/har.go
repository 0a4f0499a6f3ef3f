package render

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trawlerhq/trawler/crawl"
)

// A HAR (HTTP Archive 1.2) of a page's requests, kept with a failure when the step asks
// (render.har): what the page asked for, in order, and what the worker's fetcher
// answered. It is written for a person to read in a browser's network panel, so every
// secret is masked: credential headers and URL parameters as in logs, and the values
// the page's fill actions typed wherever a request carried them.

type harNV struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type harEntry struct {
	Started string  `json:"startedDateTime"`
	Time    float64 `json:"time"` // milliseconds
	Request struct {
		Method      string   `json:"method"`
		URL         string   `json:"url"`
		HTTPVersion string   `json:"httpVersion"`
		Headers     []harNV  `json:"headers"`
		QueryString []harNV  `json:"queryString"`
		Cookies     []harNV  `json:"cookies"`
		HeadersSize int      `json:"headersSize"`
		BodySize    int      `json:"bodySize"`
		PostData    *harPost `json:"postData,omitempty"`
	} `json:"request"`
	Response struct {
		Status      int     `json:"status"`
		StatusText  string  `json:"statusText"`
		HTTPVersion string  `json:"httpVersion"`
		Headers     []harNV `json:"headers"`
		Cookies     []harNV `json:"cookies"`
		Content     struct {
			Size     int    `json:"size"`
			MimeType string `json:"mimeType"`
		} `json:"content"`
		RedirectURL string `json:"redirectURL"`
		HeadersSize int    `json:"headersSize"`
		BodySize    int    `json:"bodySize"`
	} `json:"response"`
	Cache   struct{}       `json:"cache"`
	Timings map[string]any `json:"timings"`
	// Error is why the request got no answer (refused, blocked by render.block).
	Error string `json:"_error,omitempty"`
}

type harPost struct {
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

// mask hides what a HAR must not show: credentials, and the fill values of the step,
// as typed and as a form posts them or a URL carries them ("a b&c" is "a+b%26c" in a
// form body and "a%20b%26c" in a path).
func (pg *pageRun) mask(s string) string {
	s = crawl.RedactText(s)
	for _, v := range pg.fills {
		if v == "" {
			continue
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			s = strings.ReplaceAll(s, form, crawl.Masked)
		}
	}
	return s
}

// readFills reads what the actions type, each secret once for the page: the values to
// mask, the longest first (so one that contains another is masked whole), and the
// secrets as read, by fillSource, which the actions then type (so what is typed is what
// is masked, even if a secret's file changes meanwhile).
func readFills(acts []crawl.Action) (masked []string, secrets map[string]string) {
	secrets = map[string]string{}
	var walk func([]crawl.Action)
	walk = func(acts []crawl.Action) {
		for _, a := range acts {
			if a.Kind == crawl.ActionFill {
				src := fillSource(a)
				if _, read := secrets[src]; src == "" || !read {
					if v, err := fillValue(a); err == nil { // unreadable: the action fails, typing nothing
						masked = append(masked, v)
						if src != "" {
							secrets[src] = v
						}
					}
				}
			}
			walk(a.Do)
		}
	}
	walk(acts)
	slices.SortFunc(masked, func(a, b string) int { return len(b) - len(a) })
	return masked, secrets
}

// harHeaders are headers as HAR lists them, masked.
func (pg *pageRun) harHeaders(h http.Header) []harNV {
	out := []harNV{}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			out = append(out, harNV{Name: k, Value: pg.mask(k + ": " + v)[len(k)+2:]})
		}
	}
	return out
}

// record notes one request of the page and what came of it, when the step keeps a HAR.
func (pg *pageRun) record(req *crawl.Request, started time.Time, resp *crawl.Response, err error) {
	if !pg.r.Opts.HAR {
		return
	}
	e := harEntry{Started: started.UTC().Format(time.RFC3339Nano), Time: float64(time.Since(started).Microseconds()) / 1000}
	e.Request.Method = cmp.Or(req.Method, http.MethodGet)
	e.Request.URL = pg.mask(req.URL)
	e.Request.HTTPVersion, e.Response.HTTPVersion = "HTTP/1.1", "HTTP/1.1"
	e.Request.Headers, e.Request.QueryString, e.Request.Cookies, e.Response.Cookies = pg.harHeaders(req.Header), []harNV{}, []harNV{}, []harNV{}
	e.Request.HeadersSize, e.Response.HeadersSize = -1, -1
	e.Request.BodySize = len(req.Body)
	if len(req.Body) > 0 {
		e.Request.PostData = &harPost{MimeType: req.Header.Get("Content-Type"), Text: pg.mask(string(req.Body))}
	}
	e.Response.Headers = []harNV{}
	if resp != nil {
		e.Response.Status, e.Response.StatusText = resp.Status, http.StatusText(resp.Status)
		e.Response.Headers = pg.harHeaders(resp.Header)
		e.Response.Content.Size, e.Response.BodySize = len(resp.Body), len(resp.Body)
		e.Response.Content.MimeType = resp.Header.Get("Content-Type")
		e.Response.RedirectURL = pg.mask(resp.Header.Get("Location"))
	}
	if err != nil {
		e.Error = pg.mask(err.Error())
	}
	e.Timings = map[string]any{"send": 0, "wait": e.Time, "receive": 0}
	pg.mu.Lock()
	pg.har = append(pg.har, e)
	pg.mu.Unlock()
}

// writeHAR keeps the page's requests in dir and says where.
func (pg *pageRun) writeHAR(dir string) (string, bool) {
	pg.mu.Lock()
	entries := slices.Clone(pg.har)
	pg.mu.Unlock()
	if entries == nil {
		entries = []harEntry{}
	}
	doc := map[string]any{"log": map[string]any{
		"version": "1.2",
		"creator": map[string]string{"name": "trawler", "version": "1"},
		"pages":   []any{},
		"entries": entries,
	}}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil || os.MkdirAll(dir, 0o755) != nil {
		return "", false
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%d.har", safeName(pg.req.URL), time.Now().UnixNano()))
	if os.WriteFile(name, data, 0o644) != nil {
		return "", false
	}
	return name, true
}
