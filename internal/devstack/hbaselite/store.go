package hbaselite

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// Key layout in the store's one bbolt bucket, whose keys sort byte-wise. Every
// variable-length part is escaped (0x00 → 0x00 0xFF) and terminated (0x00 0x01),
// which keeps the byte order of the raw parts, so rows sort as HBase sorts them and a
// table, a row or a column is one contiguous key range:
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

// store keeps namespaces, tables and cells in one bbolt database, in one bucket. Writes
// are serialized: one region server, one writer, which keeps version trimming simple.
//
// Durability: the database runs with NoSync, so a commit writes its pages to the file
// without waiting for the disk, and the store calls db.Sync (fdatasync) where the
// write must be durable before it is acknowledged: after every metadata change and
// snapshot, and once per data request (sync), never per mutation, since the HBase
// sink sends many small ones. A crash of the process loses nothing committed (the
// pages are in the OS's cache). A power failure or kernel crash loses what was not
// synced yet, none of it acknowledged to a client, and since bbolt orders its page
// and meta writes only with the syncs it skips, it may leave the file unreadable; a
// dev and test server accepts that to keep one disk flush per request.
type store struct {
	db *bbolt.DB
	mu sync.Mutex // serializes writes

	metaMu sync.RWMutex
	ns     map[string]bool
	tables map[string]*table // by full name
}

// bucketName is the store's one bucket: every key of the layout above lives in it.
var bucketName = []byte("hbaselite")

// storeFile is the database file inside the store's directory.
const storeFile = "store.bolt"

// maxKeyLen bounds a cell key (table, row, family, qualifier and timestamp, escaped):
// bbolt's key limit, less room for the longest snapshot or table name a snapshot or
// a restore puts in place of the key's table name.
const maxKeyLen = bbolt.MaxKeySize - 1024

func openStore(dir string) (*store, error) {
	path := filepath.Join(dir, storeFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Earlier versions kept a pebble store in the same directory. It cannot be
		// read here; starting empty beside it would look like lost history.
		if m, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*")); len(m) > 0 {
			return nil, fmt.Errorf("hbaselite: %s holds a store of an earlier hbaselite (pebble) that this version cannot read: move it away or delete it to start empty", dir)
		}
	}
	db, err := bbolt.Open(path, 0o644, &bbolt.Options{
		// bbolt waits for the file lock forever by default; a second server on the
		// same directory should fail instead.
		Timeout: 2 * time.Second,
		NoSync:  true, // see store: syncs are explicit
		// Not writing the free list on each commit saves a page write per small
		// mutation; opening rebuilds it, which is quick for a dev store.
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("hbaselite: open store %s: %w", path, err)
	}
	s := &store{db: db, ns: map[string]bool{"default": true, "hbase": true}, tables: map[string]*table{}}
	err = db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketName)
		return err
	})
	if err == nil {
		err = s.load()
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) close() error { return s.db.Close() }

// view runs fn with the bucket in a read transaction. Keys and values it sees are only
// valid inside fn. Read transactions must stay short and must not be open while the
// same goroutine writes: a commit that grows the file waits for them to end.
func (s *store) view(fn func(b *bbolt.Bucket) error) error {
	return s.db.View(func(tx *bbolt.Tx) error { return fn(tx.Bucket(bucketName)) })
}

// update runs fn with the bucket in a write transaction, whose reads see its own
// writes, committed when fn returns nil and discarded otherwise. durable syncs the
// file after the commit, so the write is on disk when update returns.
func (s *store) update(durable bool, fn func(b *bbolt.Bucket) error) error {
	err := s.db.Update(func(tx *bbolt.Tx) error { return fn(tx.Bucket(bucketName)) })
	if err != nil || !durable {
		return err
	}
	return s.db.Sync()
}

// scanPrefix calls fn for every key starting with p, in order. k and v are only valid
// during the call, and fn must not write to b (bbolt cursors do not survive writes).
func scanPrefix(b *bbolt.Bucket, p []byte, fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// deletePrefix deletes every key starting with p. Keys are gathered before they are
// deleted, a bounded number at a time, as cursors do not survive writes.
func deletePrefix(b *bbolt.Bucket, p []byte) error {
	for {
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p) && len(keys) < 1024; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if len(keys) < 1024 {
			return nil
		}
	}
}

// seekLT positions c at the last key before k and returns it; nil when there is none.
func seekLT(c *bbolt.Cursor, k []byte) []byte {
	if found, _ := c.Seek(k); found == nil {
		found, _ = c.Last()
		return found
	}
	found, _ := c.Prev()
	return found
}

// load reads namespaces and table descriptors.
func (s *store) load() error {
	return s.view(func(b *bbolt.Bucket) error {
		c := b.Cursor()
		for k, v := c.Seek([]byte{nsPrefix}); k != nil && k[0] <= tablePrefix; k, v = c.Next() {
			name, _, err := unescape(k[1:])
			if err != nil {
				return fmt.Errorf("hbaselite: corrupt key %q: %w", k, err)
			}
			switch k[0] {
			case nsPrefix:
				s.ns[string(name)] = true
			case tablePrefix:
				var t table
				if err := json.Unmarshal(v, &t); err != nil {
					return fmt.Errorf("hbaselite: corrupt descriptor of table %s: %w", name, err)
				}
				s.tables[t.Name()] = &t
			}
		}
		return nil
	})
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
	err := s.update(true, func(b *bbolt.Bucket) error {
		return b.Put(append([]byte{nsPrefix}, escape(nil, []byte(name))...), []byte("{}"))
	})
	if err != nil {
		return err
	}
	s.ns[name] = true
	return nil
}

func (s *store) deleteNamespace(name string) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	err := s.update(true, func(b *bbolt.Bucket) error {
		return b.Delete(append([]byte{nsPrefix}, escape(nil, []byte(name))...))
	})
	if err != nil {
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
	err = s.update(true, func(b *bbolt.Bucket) error {
		return b.Put(append([]byte{tablePrefix}, escape(nil, []byte(t.Name()))...), data)
	})
	if err != nil {
		return err
	}
	s.tables[t.Name()] = t
	return nil
}

// dropTable deletes a table's descriptor and all its cells.
func (s *store) dropTable(t *table) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	err := s.update(true, func(b *bbolt.Bucket) error {
		lo := tableKey(t.Name())
		if err := deletePrefix(b, lo); err != nil {
			return err
		}
		if err := deletePrefix(b, ttlKey(lo)); err != nil {
			return err
		}
		return b.Delete(append([]byte{tablePrefix}, escape(nil, []byte(t.Name()))...))
	})
	if err != nil {
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
	var cells []cell
	err := s.view(func(b *bbolt.Bucket) (err error) {
		cells, err = readRowAll(b, t.Name(), row)
		return err
	})
	if err != nil || len(cells) == 0 {
		return cells, err
	}
	// Read after the cells, outside the transaction (metadata writers hold metaMu
	// while they commit): a put may have set CellTTL since the caller read the
	// descriptor, and it does so before writing its cells.
	if cur := s.table(t.Name()); cur != nil {
		t = cur
	}
	now := uint64(time.Now().UnixMilli())
	var ttls map[colVersion]uint64
	if t.CellTTL {
		err := s.view(func(b *bbolt.Bucket) (err error) {
			ttls, err = cellTTLs(b, t.Name(), row)
			return err
		})
		if err != nil {
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
func cellTTLs(b *bbolt.Bucket, tableName string, row []byte) (map[colVersion]uint64, error) {
	rk := ttlKey(rowKey(tableName, row))
	out := map[colVersion]uint64{}
	err := scanPrefix(b, rk, func(k, v []byte) error {
		c, err := decodeCell(k[len(rk):], nil)
		if err != nil || len(v) != 8 {
			return fmt.Errorf("hbaselite: corrupt TTL key %q", k)
		}
		out[colVersion{string(c.family), string(c.qualifier), c.ts}] = binary.BigEndian.Uint64(v)
		return nil
	})
	return out, err
}

// ttlKey is where the TTL of the cell (or of the cells under the prefix) at k lives.
func ttlKey(k []byte) []byte {
	return append([]byte{ttlPrefix}, k[1:]...)
}

// readRowAll reads every stored cell of one row, expired or not.
func readRowAll(b *bbolt.Bucket, tableName string, row []byte) ([]cell, error) {
	rk := rowKey(tableName, row)
	var cells []cell
	err := scanPrefix(b, rk, func(k, v []byte) error {
		c, err := decodeCell(k[len(rk):], v) // copies the value out of the transaction
		if err != nil {
			return fmt.Errorf("hbaselite: corrupt cell key %q: %w", k, err)
		}
		cells = append(cells, c)
		return nil
	})
	return cells, err
}

// nextRow finds the first row of a table at or after from (forward), or at or before
// from (reverse), inside the bounds; nil when there is none. from nil means the table's
// first (last) row.
func (s *store) nextRow(tableName string, from []byte, fromInclusive, reverse bool) ([]byte, error) {
	tk := tableKey(tableName)
	var row []byte
	err := s.view(func(b *bbolt.Bucket) error {
		c := b.Cursor()
		var k []byte
		switch {
		case !reverse && from == nil:
			k, _ = c.Seek(tk)
		case !reverse:
			rk := rowKey(tableName, from)
			if fromInclusive {
				k, _ = c.Seek(rk)
			} else {
				k, _ = c.Seek(prefixEnd(rk))
			}
		case from == nil:
			k = seekLT(c, prefixEnd(tk))
		default:
			rk := rowKey(tableName, from)
			if fromInclusive {
				k = seekLT(c, prefixEnd(rk))
			} else {
				k = seekLT(c, rk)
			}
		}
		// Forward seeks start inside the table and reverse ones before its end, so
		// the table's prefix is the only bound left to check.
		if k == nil || !bytes.HasPrefix(k, tk) {
			return nil
		}
		var err error
		if row, _, err = unescape(k[len(tk):]); err != nil {
			return fmt.Errorf("hbaselite: corrupt cell key %q: %w", k, err)
		}
		if row == nil {
			row = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, err
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
	type col struct{ fam, qual string }
	var result []cell
	// One write transaction per mutation, not synced (see store): its reads see its
	// own writes, so the trimming below counts the versions this mutation adds, and
	// an error discards all of it.
	err := s.update(false, func(b *bbolt.Bucket) error {
		touched := map[col]bool{}
		result = nil
		if m.kind == mutDelete && len(m.cells) == 0 { // the whole row
			cells, err := readRowAll(b, t.Name(), m.row)
			if err != nil {
				return err
			}
			for _, c := range cells {
				if m.ts == latest || c.ts <= m.ts {
					if err := deleteCell(b, t, cellKey(rk, c.family, c.qualifier, c.ts)); err != nil {
						return err
					}
				}
			}
		}
		for _, mc := range m.cells {
			if mc.kind != kindPut {
				if err := deleteCells(b, t, rk, mc); err != nil {
					return err
				}
				continue
			}
			ts := mc.ts
			if ts == latest {
				ts = now
			}
			ck := cellKey(rk, mc.family, mc.qualifier, ts)
			if len(ck) > maxKeyLen {
				return rpcError{class: excDoNotRetry, msg: fmt.Sprintf("row %q and column %s:%s need a %d-byte key, over hbaselite's limit of %d bytes", abbrev(m.row), mc.family, abbrev(mc.qualifier), len(ck), maxKeyLen)}
			}
			if err := b.Put(ck, mc.value); err != nil {
				return err
			}
			var err error
			switch {
			case m.ttl > 0:
				err = b.Put(ttlKey(ck), binary.BigEndian.AppendUint64(nil, m.ttl))
			case t.CellTTL: // a put without a TTL replaces one with
				err = b.Delete(ttlKey(ck))
			}
			if err != nil {
				return err
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
			// Gathered first, deleted after: a cursor does not survive writes.
			var drop [][]byte
			n := 0
			err := scanPrefix(b, columnKey(rk, []byte(c.fam), []byte(c.qual)), func(k, _ []byte) error {
				if n++; n > f.MaxVersions {
					drop = append(drop, bytes.Clone(k))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, k := range drop {
				if err := deleteCell(b, t, k); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
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

// sync makes every applied mutation durable: one fdatasync for a whole request.
func (s *store) sync() error {
	return s.db.Sync()
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
func deleteCell(b *bbolt.Bucket, t *table, k []byte) error {
	if err := b.Delete(k); err != nil {
		return err
	}
	if t.CellTTL {
		return b.Delete(ttlKey(k))
	}
	return nil
}

// deleteCells removes the cells a delete marker covers. Deletes take effect at once
// (there are no tombstones): a later put with an older timestamp is visible again.
func deleteCells(b *bbolt.Bucket, t *table, rk []byte, mc mutCell) error {
	var lo []byte
	switch mc.kind {
	case kindDelete, kindDeleteColumn:
		lo = columnKey(rk, mc.family, mc.qualifier)
	case kindDeleteFamily, kindDeleteFamilyVersion:
		lo = escape(bytes.Clone(rk), mc.family)
	default:
		return fmt.Errorf("unknown cell type %d", mc.kind)
	}
	var hits [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(lo); k != nil && bytes.HasPrefix(k, lo); k, _ = c.Next() {
		dc, err := decodeCell(k[len(rk):], nil)
		if err != nil {
			return err
		}
		var hit bool
		switch mc.kind {
		case kindDelete: // one version: the given one, or the newest
			hit = mc.ts == latest || dc.ts == mc.ts
		case kindDeleteFamilyVersion:
			hit = dc.ts == mc.ts
		default: // every version up to the timestamp
			hit = mc.ts == latest || dc.ts <= mc.ts
		}
		if hit {
			hits = append(hits, bytes.Clone(k))
			if mc.kind == kindDelete && mc.ts == latest {
				break
			}
		}
	}
	// Deleted after the scan: a cursor does not survive writes.
	for _, k := range hits {
		if err := deleteCell(b, t, k); err != nil {
			return err
		}
	}
	return nil
}
