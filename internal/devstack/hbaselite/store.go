package hbaselite

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
)

// Key layout in pebble. Every variable-length part is escaped (0x00 → 0x00 0xFF) and
// terminated (0x00 0x01), which keeps the byte order of the raw parts, so rows sort as
// HBase sorts them and a table, a row or a column is one contiguous key range:
//
//	'c' table row family qualifier ^timestamp   a cell (newest version first)
//	'x' table row family qualifier ^timestamp   the cell's time to live in ms, when its put set one
//	'n' namespace                                a namespace (JSON)
//	't' table                                    a table descriptor (JSON)
//	'S' snapshot                                 a snapshot's descriptor (JSON)
//	'z' snapshot ('c'|'x') row family …          a snapshot's copy of a cell or a TTL
//
// TTLs live beside the cells rather than in the values so that stores written before
// cell TTLs existed read the same.
const (
	cellPrefix     = 'c'
	ttlPrefix      = 'x'
	nsPrefix       = 'n'
	tablePrefix    = 't'
	snapPrefix     = 'S'
	snapCellPrefix = 'z'
)

// latest is HBase's LATEST_TIMESTAMP (Java's Long.MAX_VALUE): "now" on a put, "every
// version" on a delete.
const latest = math.MaxInt64

// cell is one version of one column of one row.
type cell struct {
	family, qualifier []byte
	ts                uint64
	value             []byte
}

// family is a column family's schema.
type family struct {
	Name        string `json:"name"`
	MaxVersions int    `json:"max_versions"`
	// TTL is how long a cell lives after its timestamp, in seconds; 0: forever.
	TTL int64 `json:"ttl,omitempty"`
}

// table is a table's descriptor.
type table struct {
	Namespace string   `json:"namespace"`
	Qualifier string   `json:"qualifier"`
	Families  []family `json:"families"`
	Enabled   bool     `json:"enabled"`
	RegionID  uint64   `json:"region_id"` // creation time in ms, part of the region names
	// Splits are the start keys of the regions after the first, sorted; none: one
	// region. Descriptors written before pre-split tables existed have none.
	Splits [][]byte `json:"splits,omitempty"`
	// CellTTL is set once a put carried a time to live, so reads of tables that never
	// had one skip looking for TTLs.
	CellTTL bool `json:"cell_ttl,omitempty"`
}

// Name is the table's full name: "ns:qualifier", or "qualifier" in the default namespace.
func (t *table) Name() string {
	if t.Namespace == "default" {
		return t.Qualifier
	}
	return t.Namespace + ":" + t.Qualifier
}

func (t *table) family(name []byte) *family {
	for i := range t.Families {
		if t.Families[i].Name == string(name) {
			return &t.Families[i]
		}
	}
	return nil
}

// store keeps namespaces, tables and cells in one pebble database. Writes are
// serialized: one region server, one writer, which keeps version trimming simple.
type store struct {
	db *pebble.DB
	mu sync.Mutex // serializes writes

	metaMu sync.RWMutex
	ns     map[string]bool
	tables map[string]*table // by full name
}

type quietLog struct{}

func (quietLog) Infof(string, ...any)         {}
func (quietLog) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

func openStore(dir string) (*store, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLog{}})
	if err != nil {
		return nil, fmt.Errorf("hbaselite: open store %s: %w", dir, err)
	}
	s := &store{db: db, ns: map[string]bool{"default": true, "hbase": true}, tables: map[string]*table{}}
	if err := s.load(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) close() error { return s.db.Close() }

// load reads namespaces and table descriptors.
func (s *store) load() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{nsPrefix}, UpperBound: []byte{tablePrefix + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		name, _, err := unescape(k[1:])
		if err != nil {
			return fmt.Errorf("hbaselite: corrupt key %q: %w", k, err)
		}
		switch k[0] {
		case nsPrefix:
			s.ns[string(name)] = true
		case tablePrefix:
			var t table
			if err := json.Unmarshal(it.Value(), &t); err != nil {
				return fmt.Errorf("hbaselite: corrupt descriptor of table %s: %w", name, err)
			}
			s.tables[t.Name()] = &t
		}
	}
	return it.Error()
}

func (s *store) hasNamespace(name string) bool {
	s.metaMu.RLock()
	defer s.metaMu.RUnlock()
	return s.ns[name]
}

func (s *store) namespaces() []string {
	s.metaMu.RLock()
	defer s.metaMu.RUnlock()
	return slices.Sorted(maps.Keys(s.ns))
}

func (s *store) putNamespace(name string) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.db.Set(append([]byte{nsPrefix}, escape(nil, []byte(name))...), []byte("{}"), pebble.Sync); err != nil {
		return err
	}
	s.ns[name] = true
	return nil
}

func (s *store) deleteNamespace(name string) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.db.Delete(append([]byte{nsPrefix}, escape(nil, []byte(name))...), pebble.Sync); err != nil {
		return err
	}
	delete(s.ns, name)
	return nil
}

func (s *store) table(name string) *table {
	s.metaMu.RLock()
	defer s.metaMu.RUnlock()
	return s.tables[name]
}

// tableList returns the tables sorted by name.
func (s *store) tableList() []*table {
	s.metaMu.RLock()
	defer s.metaMu.RUnlock()
	out := make([]*table, 0, len(s.tables))
	for _, t := range s.tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func (s *store) putTable(t *table) error {
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.db.Set(append([]byte{tablePrefix}, escape(nil, []byte(t.Name()))...), data, pebble.Sync); err != nil {
		return err
	}
	s.tables[t.Name()] = t
	return nil
}

// dropTable deletes a table's descriptor and all its cells.
func (s *store) dropTable(t *table) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	b := s.db.NewBatch()
	lo := tableKey(t.Name())
	if err := b.DeleteRange(lo, prefixEnd(lo), nil); err != nil {
		return err
	}
	if err := b.DeleteRange(ttlKey(lo), prefixEnd(ttlKey(lo)), nil); err != nil {
		return err
	}
	if err := b.Delete(append([]byte{tablePrefix}, escape(nil, []byte(t.Name()))...), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	delete(s.tables, t.Name())
	return nil
}

// escape appends the order-preserving encoding of b to dst.
func escape(dst, b []byte) []byte {
	for _, c := range b {
		if c == 0 {
			dst = append(dst, 0, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	return append(dst, 0, 1)
}

// unescape decodes one escaped part at the start of b, returning it and the rest.
func unescape(b []byte) (part, rest []byte, err error) {
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			part = append(part, b[i])
			continue
		}
		if i+1 >= len(b) {
			break
		}
		switch b[i+1] {
		case 0xFF:
			part = append(part, 0)
			i++
		case 1:
			return part, b[i+2:], nil
		default:
			return nil, nil, errors.New("bad escape")
		}
	}
	return nil, nil, errors.New("unterminated part")
}

// prefixEnd is the first key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func tableKey(name string) []byte {
	return escape([]byte{cellPrefix}, []byte(name))
}

func rowKey(tableName string, row []byte) []byte {
	return escape(tableKey(tableName), row)
}

func columnKey(rowKey, family, qualifier []byte) []byte {
	k := escape(bytes.Clone(rowKey), family)
	return escape(k, qualifier)
}

func cellKey(rowKey, family, qualifier []byte, ts uint64) []byte {
	return binary.BigEndian.AppendUint64(columnKey(rowKey, family, qualifier), ^ts)
}

// decodeCell splits the part of a cell key after its row prefix.
func decodeCell(rest, value []byte) (cell, error) {
	fam, rest, err := unescape(rest)
	if err != nil {
		return cell{}, err
	}
	qual, rest, err := unescape(rest)
	if err != nil {
		return cell{}, err
	}
	if len(rest) != 8 {
		return cell{}, errors.New("bad timestamp")
	}
	return cell{family: fam, qualifier: qual, ts: ^binary.BigEndian.Uint64(rest), value: bytes.Clone(value)}, nil
}

// readRow reads the live cells of one row, in HBase order (family, qualifier, newest
// first): cells past their family's TTL or their own are left out.
func (s *store) readRow(t *table, row []byte) ([]cell, error) {
	cells, err := s.readRowAll(t.Name(), row)
	if err != nil || len(cells) == 0 {
		return cells, err
	}
	if cur := s.table(t.Name()); cur != nil {
		t = cur // a put may have set CellTTL since the caller read the descriptor
	}
	now := uint64(time.Now().UnixMilli())
	var ttls map[colVersion]uint64
	if t.CellTTL {
		if ttls, err = s.cellTTLs(t.Name(), row); err != nil {
			return nil, err
		}
	}
	live := cells[:0]
	for _, c := range cells {
		if f := t.family(c.family); f != nil && f.TTL > 0 && c.ts+uint64(f.TTL)*1000 <= now {
			continue
		}
		if ttl, ok := ttls[colVersion{string(c.family), string(c.qualifier), c.ts}]; ok && c.ts+ttl <= now {
			continue
		}
		live = append(live, c)
	}
	return live, nil
}

// colVersion names one version of one column of a row.
type colVersion struct {
	family, qualifier string
	ts                uint64
}

// cellTTLs reads the TTLs (ms) of a row's cells that have one.
func (s *store) cellTTLs(tableName string, row []byte) (map[colVersion]uint64, error) {
	rk := ttlKey(rowKey(tableName, row))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: rk, UpperBound: prefixEnd(rk)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[colVersion]uint64{}
	for it.First(); it.Valid(); it.Next() {
		c, err := decodeCell(it.Key()[len(rk):], nil)
		if err != nil || len(it.Value()) != 8 {
			return nil, fmt.Errorf("hbaselite: corrupt TTL key %q", it.Key())
		}
		out[colVersion{string(c.family), string(c.qualifier), c.ts}] = binary.BigEndian.Uint64(it.Value())
	}
	return out, it.Error()
}

// ttlKey is where the TTL of the cell (or of the cells under the prefix) at k lives.
func ttlKey(k []byte) []byte {
	return append([]byte{ttlPrefix}, k[1:]...)
}

// readRowAll reads every stored cell of one row, expired or not.
func (s *store) readRowAll(tableName string, row []byte) ([]cell, error) {
	rk := rowKey(tableName, row)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: rk, UpperBound: prefixEnd(rk)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var cells []cell
	for it.First(); it.Valid(); it.Next() {
		c, err := decodeCell(it.Key()[len(rk):], it.Value())
		if err != nil {
			return nil, fmt.Errorf("hbaselite: corrupt cell key %q: %w", it.Key(), err)
		}
		cells = append(cells, c)
	}
	return cells, it.Error()
}

// nextRow finds the first row of a table at or after from (forward), or at or before
// from (reverse), inside the bounds; nil when there is none. from nil means the table's
// first (last) row.
func (s *store) nextRow(tableName string, from []byte, fromInclusive, reverse bool) ([]byte, error) {
	tk := tableKey(tableName)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: tk, UpperBound: prefixEnd(tk)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var ok bool
	switch {
	case !reverse && from == nil:
		ok = it.First()
	case !reverse:
		rk := rowKey(tableName, from)
		if fromInclusive {
			ok = it.SeekGE(rk)
		} else {
			ok = it.SeekGE(prefixEnd(rk))
		}
	case from == nil:
		ok = it.Last()
	default:
		rk := rowKey(tableName, from)
		if fromInclusive {
			ok = it.SeekLT(prefixEnd(rk))
		} else {
			ok = it.SeekLT(rk)
		}
	}
	if !ok {
		return nil, it.Error()
	}
	row, _, err := unescape(it.Key()[len(tk):])
	if err != nil {
		return nil, fmt.Errorf("hbaselite: corrupt cell key %q: %w", it.Key(), err)
	}
	if row == nil {
		row = []byte{}
	}
	return row, nil
}

// mutation is one row's put, delete, increment or append, with an optional condition.
type mutation struct {
	row   []byte
	kind  mutKind
	cells []mutCell
	ts    uint64 // the mutation's timestamp, for whole-row deletes
	ttl   uint64 // time to live of the put cells in ms (the "_ttl" attribute); 0: none
	cond  *condition
}

type mutKind int

const (
	mutPut mutKind = iota
	mutDelete
	mutIncrement
	mutAppend
)

// condition guards a mutation (CheckAndPut, CheckAndDelete): the newest live value of
// one column, or its absence, must match.
type condition struct {
	family, qualifier []byte
	match             func(value []byte, exists bool) bool
}

// mutCell is a put value, an increment or append operand, or a delete marker.
type mutCell struct {
	family, qualifier []byte
	ts                uint64
	value             []byte
	kind              byte // cellblock type: 4 put, 8 delete, 10 delete family version, 12 delete column, 14 delete family
}

const (
	kindPut                 = 4
	kindDelete              = 8
	kindDeleteFamilyVersion = 10
	kindDeleteColumn        = 12
	kindDeleteFamily        = 14
)

// apply writes one mutation of a table, then trims the touched columns to their
// family's max versions. A put at an existing (row, column, timestamp) replaces that
// cell, so a retried write leaves the same cells. Writes of one region server are
// serialized, which makes conditions, increments and appends atomic. It reports
// whether the mutation was applied (false: its condition failed) and, for increments
// and appends, the new cells. The write is not synced: callers sync once per request.
func (s *store) apply(t *table, m mutation) (bool, []cell, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.table(t.Name())
	if cur == nil || cur.RegionID != t.RegionID {
		return false, nil, rpcError{class: excNotServing, msg: fmt.Sprintf("table %s was deleted", t.Name())}
	}
	t = cur
	now := uint64(time.Now().UnixMilli())
	if m.cond != nil || m.kind == mutIncrement || m.kind == mutAppend {
		live, err := s.readRow(t, m.row)
		if err != nil {
			return false, nil, err
		}
		if m.cond != nil {
			c, ok := newest(live, m.cond.family, m.cond.qualifier)
			if !m.cond.match(c.value, ok) {
				return false, nil, nil
			}
		}
		if m.kind == mutIncrement || m.kind == mutAppend {
			if err := readModifyWrite(&m, live, now); err != nil {
				return false, nil, err
			}
		}
	}
	if m.ttl > 0 && !t.CellTTL {
		nt := *t // descriptors are shared read-only: replace, never edit
		nt.CellTTL = true
		if err := s.putTable(&nt); err != nil {
			return false, nil, err
		}
		t = &nt
	}
	rk := rowKey(t.Name(), m.row)
	b := s.db.NewIndexedBatch() // reads through it see its own writes
	defer b.Close()
	type col struct{ fam, qual string }
	touched := map[col]bool{}
	var result []cell
	if m.kind == mutDelete && len(m.cells) == 0 { // the whole row
		cells, err := s.readRowAll(t.Name(), m.row)
		if err != nil {
			return false, nil, err
		}
		for _, c := range cells {
			if m.ts == latest || c.ts <= m.ts {
				if err := s.deleteCell(b, t, cellKey(rk, c.family, c.qualifier, c.ts)); err != nil {
					return false, nil, err
				}
			}
		}
	}
	for _, mc := range m.cells {
		if mc.kind != kindPut {
			if err := s.deleteCells(b, t, rk, mc); err != nil {
				return false, nil, err
			}
			continue
		}
		ts := mc.ts
		if ts == latest {
			ts = now
		}
		ck := cellKey(rk, mc.family, mc.qualifier, ts)
		if err := b.Set(ck, mc.value, nil); err != nil {
			return false, nil, err
		}
		var err error
		switch {
		case m.ttl > 0:
			err = b.Set(ttlKey(ck), binary.BigEndian.AppendUint64(nil, m.ttl), nil)
		case t.CellTTL: // a put without a TTL replaces one with
			err = b.Delete(ttlKey(ck), nil)
		}
		if err != nil {
			return false, nil, err
		}
		touched[col{string(mc.family), string(mc.qualifier)}] = true
		if m.kind == mutIncrement || m.kind == mutAppend {
			result = append(result, cell{family: mc.family, qualifier: mc.qualifier, ts: ts, value: mc.value})
		}
	}
	for c := range touched {
		f := t.family([]byte(c.fam))
		if f == nil || f.MaxVersions <= 0 {
			continue
		}
		// The batch is indexed, so the iterator sees the versions this mutation adds.
		ck := columnKey(rk, []byte(c.fam), []byte(c.qual))
		it, err := b.NewIter(&pebble.IterOptions{LowerBound: ck, UpperBound: prefixEnd(ck)})
		if err != nil {
			return false, nil, err
		}
		var drop [][]byte
		n := 0
		for it.First(); it.Valid(); it.Next() {
			if n++; n > f.MaxVersions {
				drop = append(drop, bytes.Clone(it.Key()))
			}
		}
		if err := it.Close(); err != nil {
			return false, nil, err
		}
		for _, k := range drop {
			if err := s.deleteCell(b, t, k); err != nil {
				return false, nil, err
			}
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return false, nil, err
	}
	sort.Slice(result, func(i, j int) bool {
		if c := bytes.Compare(result[i].family, result[j].family); c != 0 {
			return c < 0
		}
		return bytes.Compare(result[i].qualifier, result[j].qualifier) < 0
	})
	return true, result, nil
}

// sync makes every applied mutation durable: one WAL sync for a whole request.
func (s *store) sync() error {
	return s.db.LogData(nil, pebble.Sync)
}

// newest is the newest cell of a column among a row's cells.
func newest(cells []cell, fam, qual []byte) (cell, bool) {
	for _, c := range cells {
		if bytes.Equal(c.family, fam) && bytes.Equal(c.qualifier, qual) {
			return c, true // cells come newest first
		}
	}
	return cell{}, false
}

// readModifyWrite turns an increment's or append's operands into the puts of the new
// values, computed from the newest live values. The new version takes the current
// time, or the old version's timestamp when that is ahead, so it is always the newest.
func readModifyWrite(m *mutation, live []cell, now uint64) error {
	for i, mc := range m.cells {
		old, ok := newest(live, mc.family, mc.qualifier)
		var v []byte
		if m.kind == mutIncrement {
			if len(mc.value) != 8 {
				return rpcError{class: excDoNotRetry, msg: fmt.Sprintf("increment of %s:%s by %d bytes: the amount must be an 8-byte long", mc.family, abbrev(mc.qualifier), len(mc.value))}
			}
			var n uint64
			if ok {
				if len(old.value) != 8 {
					return rpcError{class: excDoNotRetry, msg: fmt.Sprintf("Field is not a long, it's %d bytes wide: %s:%s of row %q cannot be incremented", len(old.value), mc.family, abbrev(mc.qualifier), abbrev(m.row))}
				}
				n = binary.BigEndian.Uint64(old.value)
			}
			v = binary.BigEndian.AppendUint64(nil, n+binary.BigEndian.Uint64(mc.value))
		} else {
			v = append(bytes.Clone(old.value), mc.value...)
		}
		ts := now
		if ok && old.ts > ts {
			ts = old.ts
		}
		m.cells[i] = mutCell{family: mc.family, qualifier: mc.qualifier, ts: ts, value: v, kind: kindPut}
	}
	return nil
}

// deleteCell deletes the cell at key k and its TTL.
func (s *store) deleteCell(b *pebble.Batch, t *table, k []byte) error {
	if err := b.Delete(k, nil); err != nil {
		return err
	}
	if t.CellTTL {
		return b.Delete(ttlKey(k), nil)
	}
	return nil
}

// deleteCells removes the cells a delete marker covers. Deletes take effect at once
// (there are no tombstones): a later put with an older timestamp is visible again.
func (s *store) deleteCells(b *pebble.Batch, t *table, rk []byte, mc mutCell) error {
	var lo []byte
	switch mc.kind {
	case kindDelete, kindDeleteColumn:
		lo = columnKey(rk, mc.family, mc.qualifier)
	case kindDeleteFamily, kindDeleteFamilyVersion:
		lo = escape(bytes.Clone(rk), mc.family)
	default:
		return fmt.Errorf("unknown cell type %d", mc.kind)
	}
	it, err := b.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		c, err := decodeCell(it.Key()[len(rk):], nil)
		if err != nil {
			return err
		}
		var hit bool
		switch mc.kind {
		case kindDelete: // one version: the given one, or the newest
			hit = mc.ts == latest || c.ts == mc.ts
		case kindDeleteFamilyVersion:
			hit = c.ts == mc.ts
		default: // every version up to the timestamp
			hit = mc.ts == latest || c.ts <= mc.ts
		}
		if hit {
			if err := s.deleteCell(b, t, bytes.Clone(it.Key())); err != nil {
				return err
			}
			if mc.kind == kindDelete && mc.ts == latest {
				break
			}
		}
	}
	return it.Error()
}
