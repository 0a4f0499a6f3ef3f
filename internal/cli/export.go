package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage/es"
	"github.com/trawlerhq/trawler/internal/storage/file"
	"github.com/trawlerhq/trawler/internal/storage/hbase"
	"github.com/trawlerhq/trawler/internal/storage/jsonl"
	"github.com/trawlerhq/trawler/internal/storage/mongo"
)

// exportFlags are the settings of `trawler export`.
type exportFlags struct {
	from, out, outDir, format string
	runID, biz, since, query  string
	chain                     string
	index, versions, tenant   string
}

// exportSources are the stores `trawler export` reads, for messages.
const exportSources = "jsonl, mongo, es or hbase"

func exportCmd(s *Settings) *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export [--from jsonl|mongo|es|hbase] [--out FILE] [--format jsonl|csv|parquet]",
		Short: "Write a run's or a query's records to a JSON Lines, CSV or Parquet file (or stdout)",
		Long: `Export streams records from a store to a file, or to stdout, without holding them in
memory. Sources (--from):

  jsonl   the jsonl sink's files: --out-dir DIR (the worker's --out), else <data>/out of
          --data, else TRAWLER_OUT; filter with --run, --biz and/or --chain
  mongo   the hot store, one collection per biz: --biz is required; --run, --since
  es      Elasticsearch: --query (query-string syntax, as in trawler search) and/or --run,
          --biz, --since; pages with search_after, sorted by biz and key
  hbase   every stored version of each record of a --biz (--versions all), or the
          newest (--versions latest, the default), of one --tenant (default "default":
          history is kept per tenant, like dedup); --run, --since

The format comes from --format, else from the --out extension (.jsonl, .csv, .parquet),
else jsonl. JSON Lines holds the items as the jsonl sink writes them. CSV and Parquet
have the columns id, biz, key, url, ts, hash, chain, run_id, tenant, then one per data
field (data.title …): a first pass over the records finds every field any of them holds
(after a Go site task's declared ones, in their order), so no field is dropped; one that
appears only during the export stops it with its name. Lists and objects are JSON text.
A config-driven step stores under its own biz, CHAIN.STEP (e.g. --biz shop.detail);
records stored before that are under the task's name (--biz generic.html_detail), and
--chain NAME picks one chain's among them. Parquet columns are typed (int64, double, boolean, timestamps, strings) and need a
file: stdout takes jsonl and csv only.

A file is written as FILE.partial and renamed when complete, so a failed export leaves no
torn file. Progress goes to stderr: a count, and a bar when the store says how many
records match (mongo, es). --json prints JSON lines of progress and, last, the result
{"records","file","bytes","format","source"}: on stdout when the export goes to a file,
on stderr when it goes to stdout.`,
		Example: `  trawler export --data .data/dev --biz demo.story --out stories.csv
  trawler export --data .data/dev --run demo-20261122-071001-5e0c1a --out run.jsonl
  trawler export --from mongo --biz demo.comments --since 24h --out comments.parquet --data .data/dev
  trawler export --from es --query 'data.score:>100' --format csv --data .data/dev > top.csv
  trawler export --from hbase --biz demo.story --versions all --out history.parquet --data .data/dev
  trawler export --out-dir /var/lib/trawler/out --biz hn.item --format jsonl | jq .data.title`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd.Context(), s, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "jsonl", "store to read: jsonl, mongo, es or hbase")
	fl.StringVar(&f.out, "out", "", "write to `FILE` (its extension names the format); default stdout")
	fl.StringVar(&f.outDir, "out-dir", "", "with --from jsonl: the jsonl sink's directory `DIR` (default <data>/out, TRAWLER_OUT)")
	fl.StringVar(&f.format, "format", "", "jsonl, csv or parquet (default from the --out extension, else jsonl)")
	fl.StringVar(&f.runID, "run", "", "only records of this run `RUN_ID`")
	fl.StringVar(&f.biz, "biz", "", "only records of this biz, `SITE.TASK` or CHAIN.STEP (required for mongo and hbase)")
	fl.StringVar(&f.chain, "chain", "", "only records stored by the chain `NAME`")
	fl.StringVar(&f.since, "since", "", "only records fetched at or after `TIME` (RFC 3339) or this long ago (24h, 90m)")
	fl.StringVar(&f.query, "query", "", "with --from es: a query-string `QUERY` (as trawler search takes)")
	fl.StringVar(&f.index, "index", "", "with --from es: index, alias or pattern `INDEX` (default the --biz index, else trawler-items)")
	fl.StringVar(&f.versions, "versions", "latest", "with --from hbase: all (every stored version) or latest")
	fl.StringVar(&f.tenant, "tenant", crawl.DefaultTenant, "with --from hbase: the tenant `TENANT` whose records to export")
	return cmd
}

// exportSource is where records come from: how to stream them, how many there are
// (-1 when the store cannot say cheaply), and a name for messages.
type exportSource struct {
	each  file.Each
	total func(ctx context.Context) (int64, error)
	name  string
	close func()
}

type exportResult struct {
	Records int64  `json:"records"`
	File    string `json:"file"`
	Bytes   int64  `json:"bytes"`
	Format  string `json:"format"`
	Source  string `json:"source"`
}

func runExport(ctx context.Context, s *Settings, f exportFlags, stdout, stderr io.Writer) error {
	f.from = strings.ToLower(strings.TrimSpace(f.from))
	switch f.from {
	case "jsonl", "mongo", "es", "hbase":
	default:
		return fmt.Errorf("--from %q: export reads %s (e.g. --from mongo)", f.from, exportSources)
	}
	format := file.JSONL
	switch {
	case f.format != "":
		ff, err := file.ParseFormat(f.format)
		if err != nil {
			return fmt.Errorf("--format: %w", err)
		}
		format = ff
	case f.out != "" && f.out != "-":
		ff, ok := file.FormatOf(f.out)
		if !ok {
			return fmt.Errorf("--out %s: cannot tell the format from its extension; name it .jsonl, .csv or .parquet, or pass --format jsonl|csv|parquet", f.out)
		}
		format = ff
	}
	toStdout := f.out == "" || f.out == "-"
	if toStdout && format == file.Parquet {
		return errors.New("parquet needs a file: pass --out FILE.parquet (stdout takes --format jsonl or csv)")
	}
	if f.query != "" && f.from != "es" {
		return errors.New("--query searches Elasticsearch: use it with --from es (other stores filter with --run, --biz and --since)")
	}
	if !crawl.IsDefaultTenant(f.tenant) && f.from != "hbase" {
		return errors.New("--tenant picks whose HBase history to read: use it with --from hbase (other stores export every tenant's records, each with its tenant column)")
	}
	if f.index != "" && f.from != "es" {
		return errors.New("--index names an Elasticsearch index: use it with --from es")
	}
	allVersions := false
	switch strings.ToLower(f.versions) {
	case "all":
		allVersions = true
	case "latest", "":
	default:
		return fmt.Errorf("--versions %q: use all (every stored version) or latest", f.versions)
	}
	if f.biz != "" && !strings.Contains(f.biz, ".") {
		return fmt.Errorf("--biz %q: name the task as site.task (e.g. demo.story)", f.biz)
	}
	since, err := parseSince(f.since, time.Now())
	if err != nil {
		return err
	}
	if err := s.Resolve(); err != nil {
		return err
	}
	src, err := openExportSource(ctx, s, f, since, allVersions)
	if err != nil {
		return err
	}
	if src.close != nil {
		defer src.close()
	}
	// A Go site task's declared fields lead the columns; a config-driven task declares
	// none of its own (each chain maps its fields), so the records say which there are.
	var fields []crawl.Field
	if f.biz != "" {
		if t, ok := crawl.Default.Get(f.biz); ok && t.Spec().Schema == nil {
			fields = t.Spec().Output
		}
	}
	total := int64(-1)
	if src.total != nil {
		if n, err := src.total(ctx); err == nil {
			total = n
		}
	}
	// JSON lines of progress and the result go where the records do not.
	jsonOut := stdout
	if toStdout {
		jsonOut = stderr
	}
	prog := newExportProgress(s.JSON, jsonOut, stderr, total)

	var w io.Writer = stdout
	var fh *os.File
	partial := ""
	if !toStdout {
		partial = f.out + file.PartialExt
		if dir := filepath.Dir(f.out); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("--out %s: %w", f.out, err)
			}
		}
		fh, err = os.Create(partial)
		if err != nil {
			return fmt.Errorf("--out %s: %w", f.out, err)
		}
		w = fh
	}
	res, err := file.Export(ctx, w, src.each, file.ExportOptions{Format: format, Fields: fields, Progress: prog.update})
	prog.finish()
	if fh != nil {
		if err == nil {
			err = fh.Sync()
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(partial, f.out)
		}
		if err != nil {
			os.Remove(partial)
		}
	}
	if err != nil {
		return fmt.Errorf("export from %s stopped after %d records: %w", src.name, res.Records, err)
	}
	out := exportResult{Records: res.Records, File: f.out, Bytes: res.Bytes, Format: string(format), Source: src.name}
	if toStdout {
		out.File = "-"
	}
	if s.JSON {
		b, _ := json.Marshal(out)
		fmt.Fprintln(jsonOut, string(b))
		return nil
	}
	where := "stdout"
	if !toStdout {
		where = f.out
	}
	fmt.Fprintf(stderr, "exported %d record%s (%s) from %s to %s as %s\n", res.Records, plural(int(res.Records)), humanBytes(res.Bytes), src.name, where, format)
	return nil
}

// parseSince reads --since: an RFC 3339 time, or a duration meaning that long ago.
func parseSince(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: give a time (2026-11-22T07:00:00Z, 2026-11-22) or how long ago (24h, 90m)", v)
}

// keep filters records a store could not filter itself.
func keep(f exportFlags, since time.Time, it crawl.Item) bool {
	return (f.runID == "" || it.RunID == f.runID) && (f.biz == "" || it.Biz == f.biz) && (f.chain == "" || it.Chain == f.chain) &&
		(since.IsZero() || !it.TS.Before(since))
}

func openExportSource(ctx context.Context, s *Settings, f exportFlags, since time.Time, allVersions bool) (*exportSource, error) {
	switch f.from {
	case "jsonl":
		return jsonlSource(s, f, since)
	case "mongo":
		return mongoSource(ctx, s, f, since)
	case "es":
		return esSource(ctx, s, f, since)
	}
	return hbaseSource(ctx, s, f, since, allVersions)
}

func jsonlSource(s *Settings, f exportFlags, since time.Time) (*exportSource, error) {
	dir := f.outDir
	if dir == "" {
		dir = s.Out
	}
	if dir == "" {
		return nil, errors.New("--from jsonl: no directory to read: pass --out-dir DIR (the worker's --out), --data DIR of a dev stack, or set TRAWLER_OUT")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--from jsonl: %s is not a directory of jsonl files; check --out-dir (or --data)", dir)
	}
	filter := func(fn func(crawl.Item) error) func(crawl.Item) error {
		return func(it crawl.Item) error {
			if !keep(f, since, it) {
				return nil
			}
			return fn(it)
		}
	}
	if f.biz != "" {
		path := filepath.Join(dir, f.biz+".jsonl")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--biz %s: no file %s; tasks with files there: %s", f.biz, path, jsonlTasks(dir))
		}
		return &exportSource{name: "jsonl " + path, each: func(ctx context.Context, fn func(crawl.Item) error) error {
			return jsonl.ReadFile(path, filter(fn))
		}}, nil
	}
	sink, err := jsonl.Open(dir)
	if err != nil {
		return nil, err
	}
	return &exportSource{name: "jsonl " + dir, each: func(ctx context.Context, fn func(crawl.Item) error) error {
		return sink.Scan(filter(fn))
	}}, nil
}

func jsonlTasks(dir string) string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []string
	for _, n := range names {
		if b := filepath.Base(n); !strings.HasPrefix(b, "_") {
			out = append(out, strings.TrimSuffix(b, ".jsonl"))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func mongoSource(ctx context.Context, s *Settings, f exportFlags, since time.Time) (*exportSource, error) {
	if f.biz == "" {
		return nil, errors.New("--from mongo needs --biz SITE.TASK: MongoDB keeps one collection per task (e.g. --biz demo.story)")
	}
	if s.Mongo == "" {
		return nil, errors.New("--from mongo: no MongoDB configured: pass --mongo mongodb://HOST:PORT (or TRAWLER_MONGO, or --data of a running `trawler dev`)")
	}
	r, err := mongo.OpenReader(s.Mongo, "")
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Ping(pctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("cannot reach MongoDB at %s: %v\n  check --mongo (TRAWLER_MONGO), or start a local stack with `trawler dev --data .data/dev` and pass --data .data/dev", crawl.RedactURL(s.Mongo), err)
	}
	filter := mongo.Filter{RunID: f.runID, Chain: f.chain, Since: since}
	return &exportSource{
		name:  "mongo trawler." + mongo.Collection(f.biz),
		each:  func(ctx context.Context, fn func(crawl.Item) error) error { return r.Each(ctx, f.biz, filter, fn) },
		total: func(ctx context.Context) (int64, error) { return r.CountMatching(ctx, f.biz, filter) },
		close: func() { _ = r.Close() },
	}, nil
}

func esSource(ctx context.Context, s *Settings, f exportFlags, since time.Time) (*exportSource, error) {
	addr, err := searchAddress(s)
	if err != nil {
		return nil, err
	}
	auth, err := s.esAuth()
	if err != nil {
		return nil, err
	}
	c, err := auth.NewClient([]string{addr}, nil)
	if err != nil {
		//lint:ignore ST1005 starts with the name of the store, as users know it
		return nil, fmt.Errorf("Elasticsearch at %s: %s", crawl.RedactURL(addr), crawl.RedactText(err.Error()))
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := c.Info(c.Info.WithContext(pctx))
	if err == nil {
		res.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach Elasticsearch at %s: %v\n  check --es (TRAWLER_ES), or start a local stack with `trawler dev --data .data/dev` and pass --data .data/dev", crawl.RedactURL(addr), err)
	}
	index := f.index
	if index == "" {
		index = es.Alias
		if f.biz != "" {
			index = es.IndexName(f.biz)
		}
	}
	sel := es.Selection{Query: f.query, RunID: f.runID, Biz: f.biz, Chain: f.chain, Since: since}
	return &exportSource{
		name: "es " + index,
		each: func(ctx context.Context, fn func(crawl.Item) error) error {
			return es.Scan(ctx, c, index, sel, 500, fn)
		},
		total: func(ctx context.Context) (int64, error) { return es.CountSelected(ctx, c, index, sel) },
	}, nil
}

func hbaseSource(ctx context.Context, s *Settings, f exportFlags, since time.Time, allVersions bool) (*exportSource, error) {
	if f.biz == "" {
		return nil, errors.New("--from hbase needs --biz SITE.TASK: rows are keyed by task (e.g. --biz demo.story)")
	}
	if s.HBase == "" {
		return nil, errors.New("--from hbase: no HBase configured: pass --hbase HOST:PORT (its ZooKeeper quorum), set TRAWLER_HBASE, or --data DIR of a running `trawler dev`")
	}
	sink, err := hbase.Open(hbase.Config{ZK: s.HBase, Timeout: 30 * time.Second, Log: s.Logger()})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sink.Reachable(pctx); err != nil {
		sink.Close()
		return nil, err
	}
	tenant := cmp.Or(f.tenant, crawl.DefaultTenant)
	which := "latest"
	if allVersions {
		which = "all versions"
	}
	return &exportSource{
		name: fmt.Sprintf("hbase %s %s of tenant %s (%s)", hbase.Table, f.biz, tenant, which),
		each: func(ctx context.Context, fn func(crawl.Item) error) error {
			return sink.ScanBiz(ctx, tenant, f.biz, allVersions, func(it crawl.Item) error {
				if !keep(f, since, it) {
					return nil
				}
				return fn(it)
			})
		},
		close: func() { _ = sink.Close() },
	}, nil
}

// exportProgress reports how far an export is: JSON lines with --json, a count (and a
// bar when the total is known) on a terminal, nothing otherwise.
type exportProgress struct {
	json     bool
	jsonOut  io.Writer
	tty      io.Writer // nil when stderr is no terminal
	total    int64
	start    time.Time
	lastDraw time.Time
	drawn    bool
}

func newExportProgress(asJSON bool, jsonOut, stderr io.Writer, total int64) *exportProgress {
	p := &exportProgress{json: asJSON, jsonOut: jsonOut, total: total, start: time.Now()}
	if f, ok := stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = stderr
		}
	}
	return p
}

func (p *exportProgress) update(n int64) {
	if p.json {
		m := map[string]any{"records": n}
		if p.total >= 0 {
			m["total"] = p.total
		}
		b, _ := json.Marshal(map[string]any{"progress": m})
		fmt.Fprintln(p.jsonOut, string(b))
		return
	}
	if p.tty == nil || time.Since(p.lastDraw) < 200*time.Millisecond {
		return
	}
	p.lastDraw = time.Now()
	rate := float64(n) / max(time.Since(p.start).Seconds(), 0.001)
	if p.total > 0 {
		const width = 24
		frac := min(float64(n)/float64(p.total), 1)
		filled := int(frac * width)
		fmt.Fprintf(p.tty, "\r[%s%s] %d/%d records | %.0f/s ", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), n, p.total, rate)
	} else {
		fmt.Fprintf(p.tty, "\r%d records | %.0f/s ", n, rate)
	}
	p.drawn = true
}

func (p *exportProgress) finish() {
	if p.drawn {
		fmt.Fprintln(p.tty)
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return strconv.FormatInt(n, 10) + " B"
}

// parseSize reads a byte size: 1048576, 500KB, 100MB, 1GB (powers of 1024; KiB … too).
func parseSize(v string) (int64, error) {
	v = strings.TrimSpace(strings.ToUpper(v))
	if v == "" || v == "0" {
		return 0, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is no size: use bytes or 500KB, 100MB, 1GB", v)
	}
	return int64(n * float64(mult)), nil
}
