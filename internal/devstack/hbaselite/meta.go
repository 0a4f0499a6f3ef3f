package hbaselite

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// metaTable is the catalog table that maps a table's row ranges to regions and servers.
// hbaselite builds its rows from the table descriptors when they are read: one row per
// region of every table, plus the region of hbase:namespace.
const metaTable = "hbase:meta"

// metaRegionPrefix starts the name of the hbase:meta region ("hbase:meta,,1").
const metaRegionPrefix = "hbase:meta,,"

// namespaceTable is HBase 2's catalog of namespaces, served read-only from the store's
// namespaces: one row per namespace, column info:d holding its NamespaceDescriptor.
var namespaceTable = &table{Namespace: "hbase", Qualifier: "namespace", Families: []family{{Name: "info", MaxVersions: 10}}, Enabled: true, RegionID: 1}

var pbufMagic = []byte("PBUF")

// region is one row range of a table, [start, end); an empty end is the table's end.
// A table's regions are cut at its split keys.
type region struct {
	t          *table
	start, end []byte
}

// regions lists a table's regions in key order.
func (t *table) regions() []region {
	out := make([]region, 0, len(t.Splits)+1)
	var start []byte
	for _, sp := range t.Splits {
		out = append(out, region{t: t, start: start, end: sp})
		start = sp
	}
	return append(out, region{t: t, start: start})
}

// contains reports whether row lies in the region.
func (r region) contains(row []byte) bool {
	return bytes.Compare(row, r.start) >= 0 && (len(r.end) == 0 || bytes.Compare(row, r.end) < 0)
}

// name is the region's name: "table,<start key>,<region id>.<md5>.", which is also its
// row in hbase:meta. Every region of a table shares the table's region id; the start
// keys tell them apart.
func (r region) name() []byte {
	base := fmt.Appendf(nil, "%s,%s,%d", r.t.Name(), r.start, r.t.RegionID)
	sum := md5.Sum(base)
	return fmt.Appendf(base, ".%s.", hex.EncodeToString(sum[:]))
}

// encodedName is the md5 part of the name, which the admin calls on regions take.
func (r region) encodedName() []byte {
	n := r.name()
	return n[len(n)-33 : len(n)-1]
}

// metaRows builds the rows of hbase:meta for the regions of the enabled and disabled
// tables, sorted as HBase sorts them.
func (s *server) metaRows() []metaRow {
	var rows []metaRow
	for _, t := range append(s.store.tableList(), namespaceTable) {
		for _, r := range t.regions() {
			info, _ := proto.Marshal(&pb.RegionInfo{
				RegionId:  proto.Uint64(t.RegionID),
				TableName: &pb.TableName{Namespace: []byte(t.Namespace), Qualifier: []byte(t.Qualifier)},
				StartKey:  append([]byte{}, r.start...),
				EndKey:    append([]byte{}, r.end...),
				Offline:   proto.Bool(false),
				Split:     proto.Bool(false),
			})
			ts := t.RegionID
			fam := []byte("info")
			rows = append(rows, metaRow{row: r.name(), cells: []cell{
				{family: fam, qualifier: []byte("regioninfo"), ts: ts, value: append(bytes.Clone(pbufMagic), info...)},
				{family: fam, qualifier: []byte("server"), ts: ts, value: []byte(s.rpcAddr)},
				{family: fam, qualifier: []byte("serverstartcode"), ts: ts, value: binary.BigEndian.AppendUint64(nil, s.startCode)},
			}})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return compareMeta(rows[i].row, rows[j].row) < 0 })
	return rows
}

// namespaceRows builds the rows of hbase:namespace, in row order.
func (s *server) namespaceRows() []metaRow {
	var rows []metaRow
	for _, n := range s.store.namespaces() {
		d, _ := proto.Marshal(&pb.NamespaceDescriptor{Name: []byte(n)})
		rows = append(rows, metaRow{row: []byte(n), cells: []cell{{family: []byte("info"), qualifier: []byte("d"), ts: namespaceTable.RegionID, value: d}}})
	}
	return rows
}

type metaRow struct {
	row   []byte
	cells []cell
}

// compareMeta orders hbase:meta rows as HBase's meta comparator does: by table, then by
// region start key, then by the rest (region id), where the start key lies between the
// first and the last comma. Plain byte order would put "t,\x05" before "t,,", and a
// reversed lookup from a row key below ',' would miss its region.
func compareMeta(a, b []byte) int {
	at, ak, ar, aok := splitMeta(a)
	bt, bk, br, bok := splitMeta(b)
	if c := bytes.Compare(at, bt); c != 0 {
		return c
	}
	if aok != bok {
		if !aok {
			return -1
		}
		return 1
	}
	if c := bytes.Compare(ak, bk); c != 0 {
		return c
	}
	return bytes.Compare(ar, br)
}

func splitMeta(row []byte) (tbl, startKey, rest []byte, ok bool) {
	first := bytes.IndexByte(row, ',')
	if first < 0 {
		return row, nil, nil, false
	}
	last := bytes.LastIndexByte(row, ',')
	if last == first {
		return row[:first], row[first+1:], nil, true
	}
	return row[:first], row[first+1 : last], row[last+1:], true
}

// regionNamed finds the region a region name names: false when it is not (or no
// longer) served here. The start key lies between the first and the last comma.
func (s *server) regionNamed(name []byte) (region, bool) {
	tname, start, _, ok := splitMeta(name)
	if !ok {
		return region{}, false
	}
	t := s.store.table(string(tname))
	if string(tname) == namespaceTable.Name() {
		t = namespaceTable
	}
	if t == nil {
		return region{}, false
	}
	for _, r := range t.regions() {
		if bytes.Equal(r.start, start) && bytes.Equal(r.name(), name) {
			return r, true
		}
	}
	return region{}, false
}

// parseTableName reads a TableName. gohbase's admin calls name every table in the
// "default" namespace and put "ns:table" in the qualifier, so that form is read as a
// table of namespace ns.
func parseTableName(tn *pb.TableName) (ns, qual string, err error) {
	if tn == nil {
		return "", "", rpcError{class: excDoNotRetry, msg: "missing table name"}
	}
	ns, qual = string(tn.Namespace), string(tn.Qualifier)
	if ns == "" {
		ns = "default"
	}
	if n, q, ok := strings.Cut(qual, ":"); ok && ns == "default" {
		ns, qual = n, q
	}
	if !validName(ns) || !validName(qual) {
		return "", "", rpcError{class: excIllegalArgument, msg: fmt.Sprintf("illegal table name %q:%q: use letters, digits, '_', '-' and '.'", ns, qual)}
	}
	return ns, qual, nil
}

func fullName(ns, qual string) string {
	if ns == "default" {
		return qual
	}
	return ns + ":" + qual
}

func validName(s string) bool {
	if s == "" || len(s) > 255 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
