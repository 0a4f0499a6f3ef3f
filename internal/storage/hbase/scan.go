package hbase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/tsuna/gohbase"
	"github.com/tsuna/gohbase/hrpc"
	"github.com/tsuna/gohbase/pb"

	"github.com/trawlerhq/trawler/crawl"
)

// ScanBiz streams tenant's stored records of a biz to fn: every version of every
// record, oldest first within a record (allVersions), or the newest version of each. It
// scans the tenant's biz key range in each of the 16 salts, one row at a time, so memory
// holds one record's versions. The tenant, biz and key come from the row key, the id,
// chain, run, url and hash from their cells (versions stored before the id and chain
// had cells have id 0 and no chain); data values are decoded from their JSON.
func (s *Sink) ScanBiz(ctx context.Context, tenant, biz string, allVersions bool, fn func(crawl.Item) error) error {
	for salt := 0; salt < Salts; salt++ {
		start := append(append(rowPrefix(tenant, byte(salt)), biz...), 0)
		stop := append(append(rowPrefix(tenant, byte(salt)), biz...), 1)
		scan, err := hrpc.NewScanRange(ctx, []byte(Table), start, stop,
			hrpc.Families(map[string][]string{Family: nil}), hrpc.MaxVersions(math.MaxInt32))
		if err != nil {
			return err
		}
		sc := s.client.Scan(scan)
		for {
			r, err := sc.Next()
			if isEOF(err) {
				break
			}
			if errors.Is(err, gohbase.TableNotFound) {
				sc.Close()
				return nil // nothing stored yet
			}
			if err != nil {
				sc.Close()
				return fmt.Errorf("scan %s in %s: %w", biz, Table, err)
			}
			if err := emitVersions(r, allVersions, fn); err != nil {
				sc.Close()
				return err
			}
		}
		sc.Close()
	}
	return nil
}

// emitVersions turns one row's cells into items, one per timestamp.
func emitVersions(r *hrpc.Result, allVersions bool, fn func(crawl.Item) error) error {
	if len(r.Cells) == 0 {
		return nil
	}
	tenant, biz, key, ok := splitRow(r.Cells[0].Row)
	if !ok {
		return nil
	}
	byTS := map[uint64]*crawl.Item{}
	for _, c := range r.Cells {
		ts := (*pb.Cell)(c).GetTimestamp()
		it := byTS[ts]
		if it == nil {
			it = &crawl.Item{Tenant: tenant, Biz: biz, Key: key, TS: time.UnixMilli(int64(ts)).UTC(), Data: map[string]any{}}
			byTS[ts] = it
		}
		switch q := string(c.Qualifier); q {
		case colURL:
			it.URL = string(c.Value)
		case colHash:
			it.Hash = string(c.Value)
		case colRun:
			it.RunID = string(c.Value)
		case colID:
			it.ID, _ = strconv.ParseInt(string(c.Value), 10, 64)
		case colChain:
			it.Chain = string(c.Value)
		default:
			var v any
			d := json.NewDecoder(bytes.NewReader(c.Value))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				v = string(c.Value)
			}
			it.Data[q] = v
		}
	}
	stamps := make([]uint64, 0, len(byTS))
	for ts := range byTS {
		stamps = append(stamps, ts)
	}
	sort.Slice(stamps, func(i, j int) bool { return stamps[i] < stamps[j] })
	if !allVersions {
		stamps = stamps[len(stamps)-1:]
	}
	for _, ts := range stamps {
		if err := fn(*byTS[ts]); err != nil {
			return err
		}
	}
	return nil
}
