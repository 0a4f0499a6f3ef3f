package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gocloud.dev/blob"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/archive"
)

func archiveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "What a WARC archive (archive:) holds, and removing its oldest files",
		Long: `The WARC files steps with archive: write are kept under TENANT/RUN_ID/ at their
destination (archive.to), each with its CDXJ index beside it. archive stats counts
them per tenant and per run; archive prune removes whole files, oldest first, by age
or to fit a size per tenant. Only finished files (those with their index) are counted
or removed: a file being written is neither.`,
	}
	cmd.AddCommand(archiveStatsCmd(), archivePruneCmd())
	return cmd
}

// archiveTo is --to, else TRAWLER_ARCHIVE.
func archiveTo(to string) string {
	if to == "" {
		return os.Getenv("TRAWLER_ARCHIVE")
	}
	return to
}

// openArchive opens an existing destination for reading and removing: unlike a
// worker, it makes no directory.
func openArchive(ctx context.Context, to string) (*blob.Bucket, error) {
	if to == "" {
		return nil, errors.New("--to: name the archive, as a chain's archive.to: an absolute directory, file:///DIR or s3://BUCKET/PREFIX (or set TRAWLER_ARCHIVE)")
	}
	if err := crawl.CheckArchiveTo(to); err != nil {
		return nil, fmt.Errorf("--to %w", err)
	}
	dir := to
	if strings.HasPrefix(to, "file://") {
		u, _ := url.Parse(to) // CheckArchiveTo parsed it
		dir = u.Path
	}
	if !strings.Contains(dir, "://") {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--to %s: no such directory; give the archive.to of the chain whose archive to read", to)
		}
	}
	return archive.OpenBucket(ctx, to)
}

// archiveTotals are the files, pages, records and bytes of a tenant or of a run.
type archiveTotals struct {
	Tenant  string          `json:"tenant,omitempty"`
	RunID   string          `json:"run,omitempty"`
	Files   int             `json:"files"`
	Pages   int             `json:"pages"`
	Records int             `json:"records"`
	Bytes   int64           `json:"bytes"`
	Oldest  time.Time       `json:"oldest"`
	Newest  time.Time       `json:"newest"`
	Runs    []archiveTotals `json:"runs,omitempty"`
}

func (t *archiveTotals) add(f archive.File) {
	if t.Files == 0 || f.Oldest.Before(t.Oldest) {
		t.Oldest = f.Oldest
	}
	if f.Newest.After(t.Newest) {
		t.Newest = f.Newest
	}
	t.Files++
	t.Pages += f.Pages
	t.Records += f.Records
	t.Bytes += f.Bytes
}

func (t archiveTotals) line(name string) string {
	return fmt.Sprintf("%-40s %6d %8d %9d %12d  %s  %s", name, t.Files, t.Pages, t.Records, t.Bytes,
		t.Oldest.UTC().Format(time.RFC3339), t.Newest.UTC().Format(time.RFC3339))
}

func archiveStatsCmd() *cobra.Command {
	var to, tenant string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [--to DEST] [--tenant TENANT] [--json]",
		Short: "Count the finished WARC files of an archive per tenant and per run",
		Long: `Stats lists, per tenant and per run, the finished WARC files at DEST: files, pages
archived, WARC records (a warcinfo per file, a request and a response or revisit per
page), bytes (the WARC files and their indexes) and when the oldest and newest pages
were fetched. WARC files whose index is not written yet (a worker that stopped between
the two) are listed apart.`,
		Example: `  trawler archive stats --to /var/lib/trawler/warc
  trawler archive stats --to 's3://my-warcs/news?region=eu-west-1' --tenant shop --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := openArchive(ctx, archiveTo(to))
			if err != nil {
				return err
			}
			defer b.Close()
			files, unindexed, err := archive.Files(ctx, b, tenant)
			if err != nil {
				return fmt.Errorf("archive %s: %w", crawl.RedactURL(archiveTo(to)), err)
			}
			var tenants []archiveTotals
			for _, f := range files { // by name: by tenant, then run
				if len(tenants) == 0 || tenants[len(tenants)-1].Tenant != f.Tenant {
					tenants = append(tenants, archiveTotals{Tenant: f.Tenant})
				}
				t := &tenants[len(tenants)-1]
				t.add(f)
				if len(t.Runs) == 0 || t.Runs[len(t.Runs)-1].RunID != f.RunID {
					t.Runs = append(t.Runs, archiveTotals{RunID: f.RunID})
				}
				t.Runs[len(t.Runs)-1].add(f)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeJSONTo(out, map[string]any{"tenants": tenants, "unindexed": nonNil(unindexed)})
			}
			if len(tenants) == 0 {
				fmt.Fprintf(out, "archive %s holds no finished WARC files\n", crawl.RedactURL(archiveTo(to)))
			} else {
				fmt.Fprintf(out, "%-40s %6s %8s %9s %12s  %-20s  %s\n", "TENANT / RUN", "FILES", "PAGES", "RECORDS", "BYTES", "OLDEST", "NEWEST")
			}
			for _, t := range tenants {
				fmt.Fprintln(out, t.line(t.Tenant))
				for _, r := range t.Runs {
					fmt.Fprintln(out, r.line("  "+r.RunID))
				}
			}
			for _, name := range unindexed {
				fmt.Fprintf(out, "%s: no index yet (not counted)\n", name)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&to, "to", "", "the archive `DEST`, as a chain's archive.to (default $TRAWLER_ARCHIVE)")
	fl.StringVar(&tenant, "tenant", "", "only this `TENANT`'s files")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object: tenants, each with its runs, and unindexed files")
	return cmd
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func archivePruneCmd() *cobra.Command {
	var to, tenant, olderThan, maxGB string
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "prune --to DEST [--older-than AGE] [--max-gb N] [--tenant TENANT] [--dry-run] [--json]",
		Short: "Remove the oldest finished WARC files of an archive, by age or size per tenant",
		Long: `Prune removes whole finished WARC files with their index, oldest first (a file's age
is that of the newest page in it): every file older than --older-than, then, per
tenant, the oldest files until the tenant's files fit in --max-gb (WARC files and
indexes, 1 GB = 2^30 bytes). A file being written is never removed: it has no index
yet. The file goes first, then its index; an index whose file is gone (a prune cut
short between the two) names nothing, is ignored by readers, and is removed by the
next prune. Revisit records that refer to a removed response can no longer be
re-parsed.`,
		Example: `  trawler archive prune --to /var/lib/trawler/warc --older-than 30d --dry-run
  trawler archive prune --to 's3://my-warcs/news?region=eu-west-1' --max-gb 500 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := parseRetention(olderThan, maxGB)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			b, err := openArchive(ctx, archiveTo(to))
			if err != nil {
				return err
			}
			defer b.Close()
			return pruneArchive(ctx, b, cmd.OutOrStdout(), archiveTo(to), tenant, r, dryRun, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&to, "to", "", "the archive `DEST`, as a chain's archive.to (default $TRAWLER_ARCHIVE)")
	fl.StringVar(&tenant, "tenant", "", "only this `TENANT`'s files")
	fl.StringVar(&olderThan, "older-than", "", "remove files whose newest page is older than `AGE`: 30d, 12h, 1d12h")
	fl.StringVar(&maxGB, "max-gb", "", "per tenant, remove the oldest files until the rest fit in `N` GB (2^30 bytes; 0.5 too)")
	fl.BoolVar(&dryRun, "dry-run", false, "list what would be removed, remove nothing")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object: the files removed, their bytes, and those kept")
	return cmd
}

// parseRetention reads --older-than and --max-gb; one of them is needed.
func parseRetention(olderThan, maxGB string) (archive.Retention, error) {
	var r archive.Retention
	if olderThan == "" && maxGB == "" {
		return r, errors.New("give --older-than AGE (30d) or --max-gb N (per tenant), or both: what to keep")
	}
	if olderThan != "" {
		d, err := crawl.ParseDuration(olderThan)
		if err != nil || d <= 0 {
			return r, fmt.Errorf("--older-than %q: give a positive age with its unit: 30d (days), 12h, 90m, 1d12h", olderThan)
		}
		r.OlderThan = d
	}
	if maxGB != "" {
		gb, err := strconv.ParseFloat(maxGB, 64)
		if r.MaxBytes = int64(gb * (1 << 30)); err != nil || r.MaxBytes <= 0 {
			return r, fmt.Errorf("--max-gb %q: give the size to keep per tenant in GB, a number above 0: 500, 0.5", maxGB)
		}
	}
	return r, nil
}

func pruneArchive(ctx context.Context, b *blob.Bucket, out io.Writer, to, tenant string, r archive.Retention, dryRun, asJSON bool) error {
	files, _, err := archive.Files(ctx, b, tenant)
	if err != nil {
		return fmt.Errorf("archive %s: %w", crawl.RedactURL(to), err)
	}
	expired := r.Expired(files, time.Now())
	type removed struct {
		File   string    `json:"file"`
		Tenant string    `json:"tenant"`
		RunID  string    `json:"run"`
		Bytes  int64     `json:"bytes"`
		Newest time.Time `json:"newest"`
	}
	res := struct {
		DryRun  bool      `json:"dry_run"`
		Removed []removed `json:"removed"`
		Bytes   int64     `json:"bytes"`
		Kept    int       `json:"kept"`
		// Orphans are indexes whose WARC file is gone: an earlier prune removed the
		// file and could not remove its index. They name nothing, and go too.
		Orphans []string `json:"orphan_indexes"`
	}{DryRun: dryRun, Removed: []removed{}, Kept: len(files) - len(expired), Orphans: []string{}}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	var failed error
	for _, f := range expired {
		if !dryRun {
			if failed = archive.Remove(ctx, b, f); failed != nil {
				res.Kept += len(expired) - len(res.Removed)
				break
			}
		}
		res.Removed = append(res.Removed, removed{File: f.Name, Tenant: f.Tenant, RunID: f.RunID, Bytes: f.Bytes, Newest: f.Newest})
		res.Bytes += f.Bytes
		if !asJSON {
			fmt.Fprintf(out, "%s %s (%s, newest page %s)\n", verb, f.Name, humanBytes(f.Bytes), f.Newest.UTC().Format(time.RFC3339))
		}
	}
	if failed == nil {
		orphans, err := archive.RemoveOrphanIndexes(ctx, b, tenant, dryRun)
		res.Orphans = append(res.Orphans, orphans...)
		failed = err
	}
	if asJSON {
		if err := writeJSONTo(out, res); err != nil {
			return err
		}
	} else {
		for _, o := range res.Orphans {
			fmt.Fprintf(out, "%s %s, an index whose WARC file is gone\n", verb, o)
		}
		fmt.Fprintf(out, "%s %d file%s (%s), kept %d\n", verb, len(res.Removed), plural(len(res.Removed)), humanBytes(res.Bytes), res.Kept)
	}
	if failed != nil {
		return fmt.Errorf("archive %s: %w; the files listed are removed, run prune again for the rest", crawl.RedactURL(to), failed)
	}
	return nil
}
