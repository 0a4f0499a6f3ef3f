// Package hbase is the HBase sink: it keeps every stored version of every item, so
// analysts can see how a record changed over time (`trawler history`).
//
// Layout: table `trawler:items` (namespace and table are created when missing,
// pre-split into one region per salt), one row per record of a tenant, row key = 1-byte
// salt (crc32(key) % 16) + biz + 0x00 + key for the default tenant, and salt + "@" +
// tenant + 0x00 + biz + 0x00 + key for any other, so writes spread over 16 key ranges,
// one record is one row, and tenants crawling the same task keep separate histories (as
// their dedup namespaces are separate). Family `d` keeps all versions.
// Every item field is a qualifier holding the field's JSON value, plus `_url`, `_hash`
// and `_run` (the run that stored the version), and every cell's timestamp is the
// item's fetch time in milliseconds. A version of a record is the set of its cells with
// one timestamp.
//
// Writes go through github.com/tsuna/gohbase in batches (Multi requests). A batch that
// fails is retried with backoff, only the puts that failed; a resent put writes the
// same cells (same row, column and timestamp), so retries leave no duplicates.
package hbase

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tsuna/gohbase"
	"github.com/tsuna/gohbase/filter"
	"github.com/tsuna/gohbase/hrpc"

	"github.com/trawlerhq/trawler/crawl"
)

const (
	// Namespace and Qualifier name the items table, Table is its full name.
	Namespace = "trawler"
	Qualifier = "items"
	Table     = Namespace + ":" + Qualifier
	// Family holds every field of an item, all versions.
	Family = "d"
	// Salts is how many key ranges the rows spread over.
	Salts = 16

	colURL   = "_url"
	colHash  = "_hash"
	colRun   = "_run"
	colID    = "_id"    // the item id, decimal; rows written before it have none
	colChain = "_chain" // the chain that stored the version; likewise
)

// Config configures a Sink.
type Config struct {
	// ZK is the ZooKeeper quorum of the HBase cluster, host:port[,host:port…].
	ZK string
	// Retries is how many times a batch's failed puts are resent (default 5); Backoff
	// is the first wait (default 200ms), doubled each time up to 5s.
	Retries int
	Backoff time.Duration
	// Timeout bounds one attempt of a batch, region lookups included (default 30s):
	// gohbase itself waits as long as it is allowed to for an unreachable cluster.
	Timeout time.Duration
	Log     *slog.Logger
}

// Sink writes item versions to HBase and reads them back.
type Sink struct {
	cfg    Config
	client gohbase.Client
	admin  gohbase.AdminClient

	mu    sync.Mutex
	ready bool // the table is known to exist
}

// Open returns a sink for the cluster; it connects on first use, so a cluster that is
// down fails the batches that write to it, not the worker.
func Open(c Config) (*Sink, error) {
	if strings.TrimSpace(c.ZK) == "" {
		return nil, errors.New("hbase sink: no ZooKeeper quorum (--hbase HOST:PORT)")
	}
	if c.Retries <= 0 {
		c.Retries = 5
	}
	if c.Backoff <= 0 {
		c.Backoff = 200 * time.Millisecond
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	opts := []gohbase.Option{gohbase.ZookeeperTimeout(10 * time.Second), gohbase.RegionLookupTimeout(10 * time.Second),
		gohbase.RegionReadTimeout(c.Timeout), gohbase.Logger(quietLogger(c.Log))}
	return &Sink{cfg: c, client: gohbase.NewClient(c.ZK, opts...), admin: gohbase.NewAdminClient(c.ZK, opts...)}, nil
}

// Reachable checks that some server of the ZooKeeper quorum accepts a connection, so a
// command reading HBase says at once that the store is down instead of waiting out its
// timeout while gohbase retries.
func (s *Sink) Reachable(ctx context.Context) error {
	var errs []error
	for _, addr := range strings.Split(s.cfg.ZK, ",") {
		d := net.Dialer{Timeout: 3 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", strings.TrimSpace(addr))
		if err == nil {
			conn.Close()
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("HBase's ZooKeeper quorum %s does not answer (%w); check --hbase (TRAWLER_HBASE) or start `trawler dev`", s.cfg.ZK, errors.Join(errs...))
}

// quietLogger keeps gohbase's retry chatter (it logs every failed lookup as an error)
// at debug level; the sink reports failures itself.
func quietLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demote{l.Handler()})
}

type demote struct{ slog.Handler }

func (d demote) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.Handler.Enabled(ctx, slog.LevelDebug)
}

func (d demote) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.Handler.Handle(ctx, r)
}

func (d demote) WithAttrs(a []slog.Attr) slog.Handler { return demote{d.Handler.WithAttrs(a)} }
func (d demote) WithGroup(n string) slog.Handler      { return demote{d.Handler.WithGroup(n)} }

// Name implements storage.Sink.
func (s *Sink) Name() string { return "hbase" }

// Close implements storage.Sink.
func (s *Sink) Close() error {
	s.client.Close()
	return nil
}

// Salt is the first byte of a record's row key.
func Salt(key string) byte { return byte(crc32.ChecksumIEEE([]byte(key)) % Salts) }

// SaltSplits are the split keys of the items table: one region per salt, so a cluster
// spreads the 16 key ranges (and the writes) over its region servers from the start,
// instead of one region taking every write until it grows big enough to split.
func SaltSplits() [][]byte {
	out := make([][]byte, 0, Salts-1)
	for i := 1; i < Salts; i++ {
		out = append(out, []byte{byte(i)})
	}
	return out
}

// tenantMark starts the row key of a tenant other than the default, after the salt. A
// biz is a task name ("site.task": lowercase letters, digits and _) and never starts
// with it, so the two layouts cannot be confused; the tenant and the biz hold no 0x00,
// so the key, which comes last, cannot move where they end whatever bytes it holds. No
// key of one tenant is thus the row of another's.
const tenantMark = '@'

// rowPrefix is what every row of tenant in one salt starts with: the salt alone for the
// default tenant, else salt + "@" + tenant + 0x00. Tenant names are lowercase letters,
// digits, - and _ (crawl validates them), so they hold no 0x00.
func rowPrefix(tenant string, salt byte) []byte {
	if crawl.IsDefaultTenant(tenant) {
		return []byte{salt}
	}
	row := make([]byte, 0, 3+len(tenant))
	row = append(row, salt, tenantMark)
	row = append(row, tenant...)
	return append(row, 0)
}

// RowKey is the row of tenant's record biz/key: salt + biz + 0x00 + key for the default
// tenant ("" or "default"), salt + "@" + tenant + 0x00 + biz + 0x00 + key for another.
func RowKey(tenant, biz, key string) []byte {
	row := rowPrefix(tenant, Salt(key))
	row = append(row, biz...)
	row = append(row, 0)
	return append(row, key...)
}

// splitRow is RowKey's inverse; a row of the original layout belongs to the default
// tenant.
func splitRow(row []byte) (tenant, biz, key string, ok bool) {
	if len(row) < 2 {
		return "", "", "", false
	}
	rest := string(row[1:])
	tenant = crawl.DefaultTenant
	if rest[0] == tenantMark {
		if tenant, rest, ok = strings.Cut(rest[1:], "\x00"); !ok || tenant == "" {
			return "", "", "", false
		}
	}
	biz, key, ok = strings.Cut(rest, "\x00")
	return tenant, biz, key, ok
}

// Write implements storage.Sink: one put per item, every field a cell at the item's
// fetch time.
func (s *Sink) Write(ctx context.Context, items []crawl.Item) error {
	if len(items) == 0 {
		return nil
	}
	if err := s.ensure(ctx); err != nil {
		return err
	}
	pending := make([]int, len(items))
	for i := range items {
		pending[i] = i
	}
	backoff := s.cfg.Backoff
	var failures []string
	for attempt := 0; ; attempt++ {
		var retry []int
		failures = failures[:0]
		permanent := false
		err := s.attempt(ctx, items, pending, func(i int, err error, again bool) {
			failures = append(failures, fmt.Sprintf("%s %s: %v", items[i].Biz, items[i].Key, firstLine(err)))
			retry = append(retry, i)
			permanent = permanent || !again
		})
		if err != nil {
			return err
		}
		if len(retry) == 0 {
			return nil
		}
		if permanent || attempt >= s.cfg.Retries || ctx.Err() != nil {
			return fmt.Errorf("hbase sink: %d of %d items not stored in %s after %d attempts: %s", len(retry), len(items), Table, attempt+1, strings.Join(limit(failures, 5), "; "))
		}
		s.cfg.Log.Warn("hbase sink: retrying failed puts", "failed", len(retry), "of", len(items), "attempt", attempt+1, "first", failures[0])
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(backoff*2, 5*time.Second)
		pending = retry
	}
}

// attempt sends the puts of items[pending] as one batch, reporting each failed one and
// whether resending it may help. A cluster that did not answer in time is not retried
// here: the batch fails at once and Temporal retries it, heartbeats and all.
func (s *Sink) attempt(ctx context.Context, items []crawl.Item, pending []int, failed func(i int, err error, again bool)) error {
	actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	calls := make([]hrpc.Call, 0, len(pending))
	for _, i := range pending {
		put, err := s.put(actx, &items[i])
		if err != nil {
			return err
		}
		calls = append(calls, put)
	}
	res, ok := s.client.SendBatch(actx, calls)
	if ok {
		return nil
	}
	for j, r := range res {
		if r.Error != nil {
			err, again := r.Error, retryable(r.Error)
			if actx.Err() != nil && ctx.Err() == nil {
				err, again = fmt.Errorf("HBase at %s did not answer within %s: %w", s.cfg.ZK, s.cfg.Timeout, err), false
			}
			failed(pending[j], err, again)
		}
	}
	return nil
}

// put builds the put of one item version.
func (s *Sink) put(ctx context.Context, it *crawl.Item) (*hrpc.Mutate, error) {
	cols := make(map[string][]byte, len(it.Data)+3)
	for k, v := range it.Data {
		b, err := marshalField(v)
		if err != nil {
			return nil, fmt.Errorf("hbase sink: item %s field %s: %w", it.Key, k, err)
		}
		cols[k] = b
	}
	cols[colURL] = []byte(it.URL)
	cols[colHash] = []byte(it.Hash)
	cols[colRun] = []byte(it.RunID)
	cols[colID] = strconv.AppendInt(nil, it.ID, 10)
	cols[colChain] = []byte(it.Chain)
	return hrpc.NewPut(ctx, []byte(Table), RowKey(it.Tenant, it.Biz, it.Key), map[string]map[string][]byte{Family: cols}, hrpc.Timestamp(it.TS))
}

// retryable says whether resending a put may help: not when HBase refused it for good
// (too large, unknown table or family).
func retryable(err error) bool {
	msg := err.Error()
	return !strings.Contains(msg, "DoNotRetryIOException") && !strings.Contains(msg, "NoSuchColumnFamilyException") &&
		!errors.Is(err, gohbase.TableNotFound)
}

// firstLine shortens an error to its first line. gohbase renders an HBase exception as
// "HBase Java exception CLASS:" and the server's stack trace, whose first line is
// "CLASS: message": that line is the one to show.
func firstLine(err error) string {
	msg := err.Error()
	if head, trace, ok := strings.Cut(msg, "\n"); ok && strings.HasPrefix(head, "HBase Java exception ") {
		msg = trace
	}
	line, _, _ := strings.Cut(msg, "\n")
	return strings.TrimSpace(line)
}

func limit(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}

// Count implements storage.Sink: the records a run stored, read back by scanning the
// `_run` column (every version) for the run id.
func (s *Sink) Count(ctx context.Context, runID string) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	scan, err := hrpc.NewScanStr(cctx, Table,
		hrpc.Families(map[string][]string{Family: {colRun}}),
		hrpc.MaxVersions(math.MaxInt32),
		hrpc.Filters(filter.NewValueFilter(filter.NewCompareFilter(filter.Equal, filter.NewBinaryComparator(filter.NewByteArrayComparable([]byte(runID)))))))
	if err != nil {
		return 0, err
	}
	sc := s.client.Scan(scan)
	defer sc.Close()
	n := 0
	for {
		_, err := sc.Next()
		if err != nil {
			if isEOF(err) {
				return n, nil
			}
			if errors.Is(err, gohbase.TableNotFound) {
				return 0, nil // nothing was ever stored
			}
			return 0, fmt.Errorf("hbase sink: count run %s in %s: %w", runID, Table, err)
		}
		n++
	}
}
