package archive

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// File is one finished WARC file at a destination, as its index describes it.
type File struct {
	Name   string // TENANT/RUN/STAMP-SEQ-WORKER.warc.gz, from the destination's root
	Tenant string
	RunID  string
	Pages  int // lines of its index
	// Records are its WARC records: the warcinfo, then a request and a response (or
	// revisit) per page.
	Records int
	Bytes   int64 // the WARC file and its index
	Oldest  time.Time
	Newest  time.Time // when its first and last pages were fetched
}

// Files lists the finished WARC files at a destination (of tenant, when not empty),
// by name, and the WARC files of which no index is there yet. A file is finished once
// its index is beside it: the index is written only after the file appears whole
// under its name. Names outside the layout TENANT/RUN/*.warc.gz, and the temporary
// files of those being written, are not listed.
func Files(ctx context.Context, b *blob.Bucket, tenant string) (files []File, unindexed []string, err error) {
	prefix := ""
	if tenant != "" {
		prefix = tenant + "/"
	}
	sizes, err := listKeys(ctx, b, prefix)
	if err != nil {
		return nil, nil, err
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range sizes {
			if strings.Count(k, "/") == 2 && strings.HasSuffix(k, ".warc.gz") && !yield(k) {
				return
			}
		}
	}) {
		index, ok := sizes[IndexName(name)]
		if !ok {
			unindexed = append(unindexed, name)
			continue
		}
		data, err := b.ReadAll(ctx, IndexName(name))
		if err != nil {
			return nil, nil, err
		}
		entries, err := ParseIndex(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", IndexName(name), err)
		}
		parts := strings.Split(name, "/")
		f := File{Name: name, Tenant: parts[0], RunID: parts[1], Pages: len(entries), Records: 1 + 2*len(entries), Bytes: sizes[name] + index}
		for i, e := range entries {
			if i == 0 || e.At.Before(f.Oldest) {
				f.Oldest = e.At
			}
			if e.At.After(f.Newest) {
				f.Newest = e.At
			}
		}
		files = append(files, f)
	}
	return files, unindexed, nil
}

// Retention is how long, and how much, a tenant's archive keeps.
type Retention struct {
	OlderThan time.Duration // files whose every page was fetched longer ago go; 0 keeps any age
	MaxBytes  int64         // per tenant, the oldest files go until the rest fit; 0 keeps any size
}

// Expired are the files r removes at time now, oldest first: those older than
// OlderThan, then, per tenant, the oldest of the rest until the tenant's files fit in
// MaxBytes. A file's age is that of its newest page.
func (r Retention) Expired(files []File, now time.Time) []File {
	oldestFirst := func(a, b File) int { return cmp.Or(a.Newest.Compare(b.Newest), cmp.Compare(a.Name, b.Name)) }
	files = slices.SortedFunc(slices.Values(files), oldestFirst)
	var out []File
	kept := map[string]int64{} // bytes per tenant of the files that stay
	for _, f := range files {
		if r.OlderThan > 0 && f.Newest.Before(now.Add(-r.OlderThan)) {
			out = append(out, f)
			continue
		}
		kept[f.Tenant] += f.Bytes
	}
	if r.MaxBytes <= 0 {
		return out
	}
	for _, f := range files {
		if kept[f.Tenant] <= r.MaxBytes || slices.ContainsFunc(out, func(g File) bool { return g.Name == f.Name }) {
			continue
		}
		out = append(out, f)
		kept[f.Tenant] -= f.Bytes
	}
	slices.SortFunc(out, oldestFirst)
	return out
}

// Remove deletes a finished WARC file and its index: the file first, so that a file
// is never left without its index, which would make it look like one being written
// (and kept forever). An index left behind by a failed delete names a file that is
// gone: readers ignore it, and RemoveOrphanIndexes (trawler archive prune) removes it.
func Remove(ctx context.Context, b *blob.Bucket, f File) error {
	if err := b.Delete(ctx, f.Name); err != nil {
		return fmt.Errorf("removing %s: %w", f.Name, err)
	}
	if err := b.Delete(ctx, IndexName(f.Name)); err != nil {
		return fmt.Errorf("removing the index of %s (the file is removed; the next prune removes its index): %w", f.Name, err)
	}
	return nil
}

// RemoveOrphanIndexes removes the indexes (of tenant, when not empty) whose WARC file
// is gone, as a Remove cut short leaves them, and returns their names; with dryRun it
// only lists them. A worker writes a file's index after the file, so a live file is
// never without one for long, and an index is never without its file.
func RemoveOrphanIndexes(ctx context.Context, b *blob.Bucket, tenant string, dryRun bool) ([]string, error) {
	prefix := ""
	if tenant != "" {
		prefix = tenant + "/"
	}
	keys, err := listKeys(ctx, b, prefix)
	if err != nil {
		return nil, err
	}
	var orphans []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		warc, isIndex := strings.CutSuffix(k, ".cdxj")
		if _, found := keys[warc+".warc.gz"]; isIndex && !found {
			if !dryRun {
				if err := b.Delete(ctx, k); err != nil {
					return orphans, fmt.Errorf("removing %s, an index whose WARC file is gone: %w", k, err)
				}
			}
			orphans = append(orphans, k)
		}
	}
	return orphans, nil
}

// listKeys is the names under prefix, with their sizes.
func listKeys(ctx context.Context, b *blob.Bucket, prefix string) (map[string]int64, error) {
	keys := map[string]int64{}
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, err
		}
		keys[obj.Key] = obj.Size
	}
}
