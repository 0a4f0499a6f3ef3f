package hbase

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/tsuna/gohbase"
	"github.com/tsuna/gohbase/filter"
	"github.com/tsuna/gohbase/hrpc"
	"github.com/tsuna/gohbase/pb"

	"github.com/trawlerhq/trawler/crawl"
)

// Record is the stored history of one record of a tenant, newest version first.
type Record struct {
	Tenant   string    `json:"tenant"`
	Biz      string    `json:"biz"`
	Key      string    `json:"key"`
	Versions []Version `json:"versions"`
}

// Version is one stored version of a record: its fields as JSON values, and which of
// them differ from the version before it (added, changed or removed).
type Version struct {
	TS      time.Time                  `json:"ts"`
	RunID   string                     `json:"run_id"`
	Hash    string                     `json:"hash"`
	URL     string                     `json:"url,omitempty"`
	Chain   string                     `json:"chain,omitempty"`
	Fields  map[string]json.RawMessage `json:"fields"`
	Changed []string                   `json:"changed,omitempty"`
}

// ErrNotFound is returned by History for a record HBase has no versions of.
var ErrNotFound = errors.New("no stored versions")

func marshalField(v any) ([]byte, error) { return json.Marshal(v) }

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// History reads up to n versions (n <= 0: all) of tenant's record biz/key, newest
// first. Another tenant's versions of the same biz/key live in another row.
func (s *Sink) History(ctx context.Context, tenant, biz, key string, n int) (*Record, error) {
	tenant = cmp.Or(tenant, crawl.DefaultTenant)
	versions := uint32(math.MaxInt32)
	if n > 0 {
		versions = uint32(n)
	}
	get, err := hrpc.NewGet(ctx, []byte(Table), RowKey(tenant, biz, key), hrpc.Families(map[string][]string{Family: nil}), hrpc.MaxVersions(versions))
	if err != nil {
		return nil, err
	}
	res, err := s.client.Get(get)
	if errors.Is(err, gohbase.TableNotFound) {
		return nil, fmt.Errorf("%s %s of tenant %s: %w (table %s does not exist yet at %s)", biz, key, tenant, ErrNotFound, Table, s.cfg.ZK)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s from %s: %w", biz, key, Table, err)
	}
	byTS := map[uint64]*Version{}
	for _, c := range res.Cells {
		ts := (*pb.Cell)(c).GetTimestamp()
		v := byTS[ts]
		if v == nil {
			v = &Version{TS: time.UnixMilli(int64(ts)).UTC(), Fields: map[string]json.RawMessage{}}
			byTS[ts] = v
		}
		switch q := string(c.Qualifier); q {
		case colURL:
			v.URL = string(c.Value)
		case colHash:
			v.Hash = string(c.Value)
		case colRun:
			v.RunID = string(c.Value)
		case colChain:
			v.Chain = string(c.Value)
		case colID: // differs every run: no field of the record
		default:
			v.Fields[q] = json.RawMessage(bytes.Clone(c.Value))
		}
	}
	if len(byTS) == 0 {
		return nil, fmt.Errorf("%s %s of tenant %s: %w in %s", biz, key, tenant, ErrNotFound, Table)
	}
	rec := &Record{Tenant: tenant, Biz: biz, Key: key}
	for _, v := range byTS {
		rec.Versions = append(rec.Versions, *v)
	}
	sort.Slice(rec.Versions, func(i, j int) bool { return rec.Versions[i].TS.After(rec.Versions[j].TS) })
	if n > 0 && len(rec.Versions) > n {
		rec.Versions = rec.Versions[:n]
	}
	for i := 0; i+1 < len(rec.Versions); i++ {
		rec.Versions[i].Changed = changed(rec.Versions[i+1].Fields, rec.Versions[i].Fields)
	}
	return rec, nil
}

// changed lists the fields that differ between two versions, sorted.
func changed(older, newer map[string]json.RawMessage) []string {
	var out []string
	for k, v := range newer {
		if o, ok := older[k]; !ok || !bytes.Equal(o, v) {
			out = append(out, k)
		}
	}
	for k := range older {
		if _, ok := newer[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Find lists the bizes that hold a record of tenant with this key. The key alone fixes
// the salt, so this scans one of the 16 key ranges (for a tenant other than the
// default, only its part of it), reading row keys only.
func (s *Sink) Find(ctx context.Context, tenant, key string) ([]string, error) {
	tenant = cmp.Or(tenant, crawl.DefaultTenant)
	prefix := rowPrefix(tenant, Salt(key))
	scan, err := hrpc.NewScanRange(ctx, []byte(Table), prefix, []byte{Salt(key) + 1},
		hrpc.Filters(filter.NewList(filter.MustPassAll, filter.NewPrefixFilter(prefix), filter.NewKeyOnlyFilter(false))))
	if err != nil {
		return nil, err
	}
	sc := s.client.Scan(scan)
	defer sc.Close()
	var bizes []string
	for {
		r, err := sc.Next()
		if isEOF(err) {
			return bizes, nil
		}
		if errors.Is(err, gohbase.TableNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("look up %s in %s: %w", key, Table, err)
		}
		if len(r.Cells) == 0 {
			continue
		}
		// The default tenant's prefix (the salt) also matches other tenants' rows.
		if t, biz, k, ok := splitRow(r.Cells[0].Row); ok && t == tenant && k == key {
			bizes = append(bizes, biz)
		}
	}
}
