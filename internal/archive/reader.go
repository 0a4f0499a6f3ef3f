package archive

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sync"

	"github.com/nlnwa/gowarc/v3"
	"gocloud.dev/blob"

	"github.com/trawlerhq/trawler/crawl"
)

// Reader answers requests from the pages archived at a destination: a run's (or, for
// `trawler try --from-archive`, any run's), looked up by canonical URL through their
// CDXJ indexes. A revisit record is answered with the response it refers to.
type Reader struct {
	bucket *blob.Bucket
	from   string // the destination, redacted, for messages
	sel    crawl.Reparse
	pages  map[string]Entry // the newest archived page of each canonical URL

	once      sync.Once
	responses map[string]Entry // responses of the tenant by URL and digest, for revisits
	err       error
}

// OpenReader reads the index of the pages of run sel.Run of tenant at sel.From, those
// sel.URL, sel.Since and sel.Until select. Without a tenant it looks for the run among
// every tenant's; without a run it reads every run at the destination. A run of which
// no page is archived there is an error that says so.
func OpenReader(ctx context.Context, sel crawl.Reparse, tenant string) (*Reader, error) {
	var match *regexp.Regexp
	if sel.URL != "" {
		var err error
		if match, err = regexp.Compile(sel.URL); err != nil {
			return nil, fmt.Errorf("--url %q: %v; give a regular expression (RE2) the page URLs must match", sel.URL, err)
		}
	}
	bucket, err := OpenBucket(ctx, sel.From)
	if err != nil {
		return nil, err
	}
	r := &Reader{bucket: bucket, from: crawl.RedactURL(sel.From), sel: sel, pages: map[string]Entry{}}
	prefix := ""
	if sel.Run != "" && tenant != "" {
		prefix = tenant + "/" + sel.Run + "/"
	}
	entries, err := readIndexes(ctx, bucket, prefix)
	if err != nil {
		bucket.Close()
		return nil, fmt.Errorf("archive %s: %w", r.from, err)
	}
	ofTenant := ""
	if tenant != "" {
		ofTenant = " of tenant " + tenant
	}
	if !slices.ContainsFunc(entries, func(e Entry) bool { return sel.Run == "" || e.RunID == sel.Run }) {
		bucket.Close()
		if sel.Run == "" {
			return nil, fmt.Errorf("archive %s holds no finished WARC files; check the directory or URL (a chain's archive.to)", r.from)
		}
		return nil, fmt.Errorf("archive %s holds no pages of run %s%s; check the run id (`trawler status`) and that the chain's archive.to is where that run archived", r.from, sel.Run, ofTenant)
	}
	for _, e := range entries {
		if (sel.Run != "" && e.RunID != sel.Run) || (match != nil && !match.MatchString(e.URL)) || (!sel.Since.IsZero() && e.At.Before(sel.Since)) || (!sel.Until.IsZero() && !e.At.Before(sel.Until)) {
			continue
		}
		if old, ok := r.pages[e.Canonical]; !ok || !e.At.Before(old.At) {
			r.pages[e.Canonical] = e
		}
	}
	return r, nil
}

// Close closes the destination.
func (r *Reader) Close() error { return r.bucket.Close() }

// Pages are the archived pages the reader answers with, by URL.
func (r *Reader) Pages() []Entry {
	out := slices.Collect(func(yield func(Entry) bool) {
		for _, e := range r.pages {
			if !yield(e) {
				return
			}
		}
	})
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.URL, b.URL) })
	return out
}

// NotArchivedError is a page the reader does not hold.
type NotArchivedError struct {
	URL, From, Run string
}

func (e *NotArchivedError) Error() string {
	if e.Run == "" {
		return fmt.Sprintf("%s is not in the archive %s", crawl.RedactURL(e.URL), e.From)
	}
	return fmt.Sprintf("%s is not in the archive of run %s (%s); reparse with --fetch-missing to fetch it", crawl.RedactURL(e.URL), e.Run, e.From)
}

// Archived is a page's response as the archive holds it.
type Archived struct {
	Entry  Entry // the page's index line (a revisit's, when it was archived as one)
	Status int
	Header http.Header // as received
	Body   []byte      // as received: a gzip body stays gzip
}

// Page is the archived page of rawURL the reader answers with.
func (r *Reader) Page(rawURL string) (Entry, bool) {
	canonical, err := crawl.CanonicalURL(rawURL, crawl.CanonOptions{})
	if err != nil {
		canonical = rawURL
	}
	e, ok := r.pages[canonical]
	return e, ok
}

// Archived reads the response archived for rawURL; a revisit is answered with the
// response it refers to.
func (r *Reader) Archived(ctx context.Context, rawURL string) (*Archived, error) {
	page, ok := r.Page(rawURL)
	if !ok {
		return nil, &NotArchivedError{URL: rawURL, From: r.from, Run: r.sel.Run}
	}
	e := page
	if e.Type == "revisit" {
		var err error
		if e, err = r.revisited(ctx, e); err != nil {
			return nil, err
		}
	}
	data, err := ReadRecord(ctx, r.bucket, e)
	if err != nil {
		return nil, fmt.Errorf("archive %s: reading %s at %d: %w", r.from, e.File, e.Offset, err)
	}
	rec, _, _, err := newUnmarshaler().Unmarshal(bufio.NewReader(bytes.NewReader(data)))
	if err != nil {
		return nil, fmt.Errorf("archive %s: the record of %s in %s at %d: %w", r.from, crawl.RedactURL(e.URL), e.File, e.Offset, err)
	}
	defer rec.Close()
	block, ok := rec.Block().(gowarc.HttpResponseBlock)
	if !ok {
		return nil, fmt.Errorf("archive %s: the record of %s in %s at %d holds no HTTP response", r.from, crawl.RedactURL(e.URL), e.File, e.Offset)
	}
	payload, err := block.PayloadBytes()
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(payload)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	if h := block.HttpHeader(); h != nil {
		header = h.Clone()
	}
	return &Archived{Entry: page, Status: block.HttpStatusCode(), Header: header, Body: body}, nil
}

// Response is the archived answer to rawURL: status, headers and body as the fetcher
// hands them to a task (a gzip body decoded).
func (r *Reader) Response(ctx context.Context, rawURL string) (*crawl.Response, error) {
	a, err := r.Archived(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	body, err := Decoded(a.Header, a.Body)
	if err != nil {
		return nil, fmt.Errorf("archive %s: the body of %s: %w", r.from, crawl.RedactURL(a.Entry.URL), err)
	}
	return &crawl.Response{URL: a.Entry.URL, Status: a.Status, Header: a.Header, Body: body, Attempts: 1}, nil
}

// Decoded is a body as received made what the fetcher hands a task: gzip decoded, and
// the header without its Content-Encoding.
func Decoded(header http.Header, body []byte) ([]byte, error) {
	switch header.Get("Content-Encoding") {
	case "gzip", "x-gzip":
		header.Del("Content-Encoding")
		header.Del("Content-Length")
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err == io.EOF {
			return []byte{}, nil
		}
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		return io.ReadAll(zr)
	}
	return body, nil
}

// revisited is the response a revisit record refers to: the one of its URL and payload
// digest, in any run of the tenant at this destination.
func (r *Reader) revisited(ctx context.Context, rev Entry) (Entry, error) {
	r.once.Do(func() {
		var all []Entry
		all, r.err = readIndexes(context.WithoutCancel(ctx), r.bucket, rev.Tenant+"/")
		r.responses = map[string]Entry{}
		for _, e := range all {
			if e.Type == "response" {
				r.responses[e.URL+" "+e.Digest] = e
			}
		}
	})
	if r.err != nil {
		return Entry{}, fmt.Errorf("archive %s: %w", r.from, r.err)
	}
	e, ok := r.responses[rev.URL+" "+rev.Digest]
	if !ok {
		return Entry{}, fmt.Errorf("archive %s: %s was archived as a revisit of a response no finished WARC file of tenant %s holds (pruned?)", r.from, crawl.RedactURL(rev.URL), rev.Tenant)
	}
	return e, nil
}

// Fetcher answers every request from the archive by its URL, whatever its method;
// a page the archive does not hold goes to missing when it is not nil, and fails
// permanently (crawl.CauseNotArchived) when it is.
func (r *Reader) Fetcher(missing crawl.Fetcher) crawl.Fetcher {
	return crawl.FetcherFunc(func(ctx context.Context, req *crawl.Request) (*crawl.Response, error) {
		resp, err := r.Response(ctx, req.URL)
		var na *NotArchivedError
		switch {
		case errors.As(err, &na) && missing != nil:
			return missing.Fetch(ctx, req)
		case errors.As(err, &na):
			return nil, crawl.WithCause(crawl.Permanent(err), crawl.CauseNotArchived)
		}
		return resp, err
	})
}
