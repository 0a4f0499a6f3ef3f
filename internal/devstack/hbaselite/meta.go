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
// hbaselite serves every table as one region (the whole key range) and builds the rows
// of hbase:meta from the table descriptors when they are read.
const metaTable = "hbase:meta"

// metaRegionPrefix starts the name of the hbase:meta region ("hbase:meta,,1").
const metaRegionPrefix = "hbase:meta,,"

var pbufMagic = []byte("PBUF")

// regionName is the name of a table's only region: "table,,<region id>.<md5>.", which is
// also its row in hbase:meta.
func regionName(t *table) []byte {
	base := fmt.Sprintf("%s,,%d", t.Name(), t.RegionID)
	sum := md5.Sum([]byte(base))
	return []byte(base + "." + hex.EncodeToString(sum[:]) + ".")
}

// metaRows builds the rows of hbase:meta for the enabled and disabled tables, sorted as
// HBase sorts them.
func (s *server) metaRows() []metaRow {
	var rows []metaRow
	for _, t := range s.store.tableList() {
		info, _ := proto.Marshal(&pb.RegionInfo{
			RegionId:  proto.Uint64(t.RegionID),
			TableName: &pb.TableName{Namespace: []byte(t.Namespace), Qualifier: []byte(t.Qualifier)},
			StartKey:  []byte{},
			EndKey:    []byte{},
			Offline:   proto.Bool(false),
			Split:     proto.Bool(false),
		})
		row := regionName(t)
		ts := t.RegionID
		fam := []byte("info")
		rows = append(rows, metaRow{row: row, cells: []cell{
			{family: fam, qualifier: []byte("regioninfo"), ts: ts, value: append(bytes.Clone(pbufMagic), info...)},
			{family: fam, qualifier: []byte("server"), ts: ts, value: []byte(s.rpcAddr)},
			{family: fam, qualifier: []byte("serverstartcode"), ts: ts, value: binary.BigEndian.AppendUint64(nil, s.startCode)},
		}})
	}
	sort.Slice(rows, func(i, j int) bool { return compareMeta(rows[i].row, rows[j].row) < 0 })
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

// tableOfRegion finds the table a region name belongs to: nil when the region is not
// (or no longer) served here.
func (s *server) tableOfRegion(name []byte) *table {
	tname, _, _, ok := splitMeta(name)
	if !ok {
		return nil
	}
	t := s.store.table(string(tname))
	if t == nil || !bytes.Equal(regionName(t), name) {
		return nil
	}
	return t
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
