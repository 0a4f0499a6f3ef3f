package hbaselite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// query is what a Get or a Scan selects from each row.
type query struct {
	columns     map[string]map[string]bool // family → qualifiers (nil: the whole family); empty: every family
	from, to    uint64                     // time range [from, to)
	maxVersions int
	storeLimit  int // cells per family, 0: no limit
	storeOffset int
	filter      *filter
}

func newQuery(t *table, cols []*pb.Column, tr *pb.TimeRange, maxVersions, storeLimit, storeOffset uint32, f *pb.Filter) (*query, error) {
	q := &query{columns: map[string]map[string]bool{}, from: tr.GetFrom(), to: math.MaxInt64, maxVersions: 1,
		storeLimit: int(storeLimit), storeOffset: int(storeOffset)}
	if tr != nil && tr.To != nil {
		q.to = tr.GetTo()
	}
	if maxVersions > 0 {
		q.maxVersions = int(maxVersions)
	}
	for _, c := range cols {
		if t != nil && t.family(c.Family) == nil {
			return nil, noSuchFamily(t, c.Family)
		}
		if len(c.Qualifier) == 0 {
			q.columns[string(c.Family)] = nil
			continue
		}
		quals, ok := q.columns[string(c.Family)]
		if ok && quals == nil {
			continue // already the whole family
		}
		if quals == nil {
			quals = map[string]bool{}
			q.columns[string(c.Family)] = quals
		}
		for _, qual := range c.Qualifier {
			quals[string(qual)] = true
		}
	}
	if f != nil {
		var err error
		if q.filter, err = parseFilter(f, true); err != nil {
			return nil, err
		}
	}
	return q, nil
}

func noSuchFamily(t *table, fam []byte) error {
	names := make([]string, len(t.Families))
	for i, f := range t.Families {
		names[i] = f.Name
	}
	return rpcError{class: excNoSuchFamily, msg: fmt.Sprintf("column family %q does not exist in table %s (families: %s)", fam, t.Name(), strings.Join(names, ", "))}
}

// apply selects the cells of one row, given in HBase order (family, qualifier, newest
// first).
func (q *query) apply(row []byte, cells []cell) []cell {
	out, _ := q.applyCounted(row, cells)
	return out
}

// applyCounted is apply that also reports whether the filter dropped a row that had
// cells to select (a filtered row, in scan metrics).
func (q *query) applyCounted(row []byte, cells []cell) ([]cell, bool) {
	dropped := false
	var out []cell
	var lastFam, lastQual []byte
	versions, perFamily := 0, 0
	for _, c := range cells {
		if len(q.columns) > 0 {
			quals, ok := q.columns[string(c.family)]
			if !ok || (quals != nil && !quals[string(c.qualifier)]) {
				continue
			}
		}
		if c.ts < q.from || c.ts >= q.to {
			continue
		}
		if q.filter != nil && !q.filter.keep(row, &c) {
			dropped = true
			continue
		}
		if !bytes.Equal(c.family, lastFam) {
			perFamily = 0
			versions = 0
		} else if !bytes.Equal(c.qualifier, lastQual) {
			versions = 0
		}
		lastFam, lastQual = c.family, c.qualifier
		if versions++; versions > q.maxVersions {
			continue
		}
		if perFamily++; perFamily <= q.storeOffset || (q.storeLimit > 0 && perFamily > q.storeLimit+q.storeOffset) {
			continue
		}
		out = append(out, c)
	}
	if q.filter != nil {
		out = q.filter.transform(out)
	}
	return out, dropped && len(out) == 0
}

// filter is a compiled HBase filter: a cell predicate plus the first-key-only and
// key-only transforms.
type filter struct {
	keep      func(row []byte, c *cell) bool
	firstOnly bool
	keyOnly   bool
	lenAsVal  bool
}

func (f *filter) transform(cells []cell) []cell {
	if f.firstOnly && len(cells) > 1 {
		cells = cells[:1]
	}
	if f.keyOnly {
		for i := range cells {
			if f.lenAsVal {
				cells[i].value = binary.BigEndian.AppendUint32(nil, uint32(len(cells[i].value)))
			} else {
				cells[i].value = nil
			}
		}
	}
	return cells
}

// supportedFilters is what parseFilter understands, for error messages and the docs.
const supportedFilters = "PrefixFilter, ColumnPrefixFilter, KeyOnlyFilter, FirstKeyOnlyFilter, ValueFilter, QualifierFilter, RowFilter (BinaryComparator, BinaryPrefixComparator) and FilterList"

const filterPkg = "org.apache.hadoop.hbase.filter."

func parseFilter(f *pb.Filter, top bool) (*filter, error) {
	name := strings.TrimPrefix(f.GetName(), filterPkg)
	bad := func(err error) (*filter, error) {
		return nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("cannot decode filter %s: %v", f.GetName(), err)}
	}
	switch name {
	case "PrefixFilter":
		var m pb.PrefixFilter
		if err := proto.Unmarshal(f.SerializedFilter, &m); err != nil {
			return bad(err)
		}
		p := m.Prefix
		return &filter{keep: func(row []byte, _ *cell) bool { return bytes.HasPrefix(row, p) }}, nil
	case "ColumnPrefixFilter":
		var m pb.ColumnPrefixFilter
		if err := proto.Unmarshal(f.SerializedFilter, &m); err != nil {
			return bad(err)
		}
		p := m.Prefix
		return &filter{keep: func(_ []byte, c *cell) bool { return bytes.HasPrefix(c.qualifier, p) }}, nil
	case "KeyOnlyFilter", "FirstKeyOnlyFilter":
		if !top {
			return nil, rpcError{class: excDoNotRetry, msg: name + " is supported at the top level only, not inside a FilterList"}
		}
		fl := &filter{keep: func([]byte, *cell) bool { return true }}
		if name == "FirstKeyOnlyFilter" {
			fl.firstOnly = true
			return fl, nil
		}
		var m pb.KeyOnlyFilter
		if err := proto.Unmarshal(f.SerializedFilter, &m); err != nil {
			return bad(err)
		}
		fl.keyOnly, fl.lenAsVal = true, m.GetLenAsVal()
		return fl, nil
	case "ValueFilter", "QualifierFilter", "RowFilter":
		var cf *pb.CompareFilter
		switch name {
		case "ValueFilter":
			var m pb.ValueFilter
			if err := proto.Unmarshal(f.SerializedFilter, &m); err != nil {
				return bad(err)
			}
			cf = m.CompareFilter
		case "QualifierFilter":
			var m pb.QualifierFilter
			if err := proto.Unmarshal(f.SerializedFilter, &m); err != nil {
				return bad(err)
			}
			cf = m.CompareFilter
		default:
			var m pb.RowFilter
			if err := proto.Unmarshal(f.SerializedFilter, &m); err != nil {
				return bad(err)
			}
			cf = m.CompareFilter
		}
		match, err := parseCompare(cf)
		if err != nil {
			return nil, err
		}
		switch name {
		case "ValueFilter":
			return &filter{keep: func(_ []byte, c *cell) bool { return match(c.value) }}, nil
		case "QualifierFilter":
			return &filter{keep: func(_ []byte, c *cell) bool { return match(c.qualifier) }}, nil
		}
		return &filter{keep: func(row []byte, _ *cell) bool { return match(row) }}, nil
	case "FilterList":
		var m pb.FilterList
		if err := proto.Unmarshal(f.SerializedFilter, &m); err != nil {
			return bad(err)
		}
		all := m.GetOperator() != pb.FilterList_MUST_PASS_ONE
		out := &filter{}
		var preds []func([]byte, *cell) bool
		for _, sub := range m.Filters {
			sf, err := parseFilter(sub, top && all)
			if err != nil {
				return nil, err
			}
			preds = append(preds, sf.keep)
			out.firstOnly = out.firstOnly || sf.firstOnly
			out.keyOnly = out.keyOnly || sf.keyOnly
			out.lenAsVal = out.lenAsVal || sf.lenAsVal
		}
		out.keep = func(row []byte, c *cell) bool {
			for _, p := range preds {
				if p(row, c) != all {
					return !all
				}
			}
			return all || len(preds) == 0
		}
		return out, nil
	}
	return nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("filter %s is not supported by hbaselite; supported: %s", f.GetName(), supportedFilters)}
}

// parseCompare turns a CompareFilter into a predicate on bytes: the bytes compared to
// the comparator's value with the filter's operator (LESS keeps bytes < value).
func parseCompare(cf *pb.CompareFilter) (func([]byte) bool, error) {
	if cf == nil || cf.Comparator == nil {
		return nil, rpcError{class: excDoNotRetry, msg: "compare filter without a comparator"}
	}
	value, prefix, err := parseComparator(cf.Comparator)
	if err != nil {
		return nil, err
	}
	op := cf.GetCompareOp()
	return func(b []byte) bool {
		if prefix && len(b) > len(value) {
			b = b[:len(value)]
		}
		return opMatches(op, bytes.Compare(b, value))
	}, nil
}

// parseComparator reads a BinaryComparator's or BinaryPrefixComparator's value.
func parseComparator(c *pb.Comparator) (value []byte, prefix bool, err error) {
	switch strings.TrimPrefix(c.GetName(), filterPkg) {
	case "BinaryComparator":
		var m pb.BinaryComparator
		if err := proto.Unmarshal(c.SerializedComparator, &m); err != nil {
			return nil, false, rpcError{class: excDoNotRetry, msg: "cannot decode BinaryComparator: " + err.Error()}
		}
		return m.GetComparable().GetValue(), false, nil
	case "BinaryPrefixComparator":
		var m pb.BinaryPrefixComparator
		if err := proto.Unmarshal(c.SerializedComparator, &m); err != nil {
			return nil, false, rpcError{class: excDoNotRetry, msg: "cannot decode BinaryPrefixComparator: " + err.Error()}
		}
		return m.GetComparable().GetValue(), true, nil
	}
	return nil, false, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("comparator %s is not supported by hbaselite; supported: BinaryComparator, BinaryPrefixComparator", c.GetName())}
}

// opMatches applies a compare operator to the result of a comparison.
func opMatches(op pb.CompareType, c int) bool {
	switch op {
	case pb.CompareType_LESS:
		return c < 0
	case pb.CompareType_LESS_OR_EQUAL:
		return c <= 0
	case pb.CompareType_EQUAL:
		return c == 0
	case pb.CompareType_NOT_EQUAL:
		return c != 0
	case pb.CompareType_GREATER_OR_EQUAL:
		return c >= 0
	case pb.CompareType_GREATER:
		return c > 0
	}
	return true // NO_OP
}
