package archive

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// Entry is one archived page in a CDXJ index: the response (or revisit) record of its
// exchange and who fetched it.
type Entry struct {
	URL       string    `json:"url"`
	Canonical string    `json:"canonical"`
	At        time.Time `json:"fetched_at"`
	Status    int       `json:"status"`
	Mime      string    `json:"mime,omitempty"`
	Digest    string    `json:"digest"`
	Type      string    `json:"type"` // response | revisit
	Tenant    string    `json:"tenant"`
	RunID     string    `json:"run"`
	Step      string    `json:"step"`
	Task      string    `json:"task"`
	File      string    `json:"filename"` // the WARC file, from the destination's root
	Offset    int64     `json:"offset"`
	Length    int64     `json:"length"` // of the record's gzip member
}

// IndexName is the CDXJ index of a WARC file: beside it, .cdxj for .warc.gz.
func IndexName(warc string) string { return strings.TrimSuffix(warc, ".warc.gz") + ".cdxj" }

// writeIndex writes f's CDXJ index: one line per page, `SURT TIMESTAMP {json}`, sorted
// so that a URL's lines are found by binary search (and files merge with sort -m).
func writeIndex(b *blob.Bucket, f *file) error {
	lines := make([]string, 0, len(f.index))
	for _, e := range f.index {
		j, err := json.Marshal(e)
		if err != nil {
			return err
		}
		lines = append(lines, SURT(e.URL)+" "+e.At.Format("20060102150405")+" "+string(j))
	}
	slices.Sort(lines)
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	return b.WriteAll(context.Background(), IndexName(f.name), buf.Bytes(), &blob.WriterOptions{ContentType: "application/cdxj"})
}

// RunIndex reads the index of every finished WARC file of a run: a listing of
// TENANT/RUN/ and the .cdxj files in it.
func RunIndex(ctx context.Context, b *blob.Bucket, tenant, run string) ([]Entry, error) {
	return readIndexes(ctx, b, tenant+"/"+run+"/")
}

// readIndexes reads every .cdxj file whose name starts with prefix, but those whose
// WARC file is gone (a prune cut short between the two deletes).
func readIndexes(ctx context.Context, b *blob.Bucket, prefix string) ([]Entry, error) {
	keys, err := listKeys(ctx, b, prefix)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		warc, isIndex := strings.CutSuffix(k, ".cdxj")
		if _, found := keys[warc+".warc.gz"]; !isIndex || !found {
			continue
		}
		data, err := b.ReadAll(ctx, k)
		if err != nil {
			return nil, err
		}
		entries, err := ParseIndex(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out = append(out, entries...)
	}
	return out, nil
}

// ParseIndex reads CDXJ lines.
func ParseIndex(data []byte) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		_, rest, _ := strings.Cut(sc.Text(), " ")
		_, j, ok := strings.Cut(rest, " ")
		var e Entry
		if !ok || json.Unmarshal([]byte(j), &e) != nil {
			return nil, fmt.Errorf("line %d is no CDXJ line", n)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// ReadRecord is the bytes of an entry's record: one gzip member, which any WARC reader
// reads on its own.
func ReadRecord(ctx context.Context, b *blob.Bucket, e Entry) ([]byte, error) {
	r, err := b.NewRangeReader(ctx, e.File, e.Offset, e.Length, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// SURT is the sort key of a URL in a CDX index: host labels reversed and joined by
// commas (without www.), then `)` and the path and query, lower case:
// https://www.example.com/a?b → com,example)/a?b.
func SURT(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return strings.ToLower(raw)
	}
	host := strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
	labels := strings.Split(host, ".")
	slices.Reverse(labels)
	key := strings.Join(labels, ",")
	if p := u.Port(); p != "" && !(u.Scheme == "http" && p == "80") && !(u.Scheme == "https" && p == "443") {
		key += ":" + p
	}
	return key + ")" + strings.ToLower(u.RequestURI())
}
