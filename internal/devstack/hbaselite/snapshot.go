package hbaselite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// Snapshots are full copies: a snapshot's descriptor holds the table's descriptor, and
// every cell (and cell TTL) of the table is copied under the snapshot's name. A dev
// server's tables are small, and a copy stays valid whatever happens to the table.

const (
	excSnapshotExists  = "org.apache.hadoop.hbase.snapshot.SnapshotExistsException"
	excSnapshotMissing = "org.apache.hadoop.hbase.snapshot.SnapshotDoesNotExistException"
	excUnknownRegion   = "org.apache.hadoop.hbase.UnknownRegionException"
)

// snapshotDesc is a stored snapshot.
type snapshotDesc struct {
	Name    string `json:"name"`
	Table   table  `json:"table"`
	Created int64  `json:"created"` // ms
}

func (d *snapshotDesc) proto() *pb.SnapshotDescription {
	return &pb.SnapshotDescription{Name: proto.String(d.Name), Table: proto.String(d.Table.Name()),
		CreationTime: proto.Int64(d.Created), Type: pb.SnapshotDescription_FLUSH.Enum(), Version: proto.Int32(2)}
}

func snapKey(name string) []byte { return escape([]byte{snapPrefix}, []byte(name)) }

// snapCells is the prefix of a snapshot's copies of cells (kind 'c') or TTLs ('x').
func snapCells(name string, kind byte) []byte {
	return append(escape([]byte{snapCellPrefix}, []byte(name)), kind)
}

// tableCells is the prefix of a table's cells (kind 'c') or TTLs ('x').
func tableCells(tableName string, kind byte) []byte {
	return escape([]byte{kind}, []byte(tableName))
}

func (s *store) snapshot(name string) (*snapshotDesc, error) {
	v, closer, err := s.db.Get(snapKey(name))
	if err == pebble.ErrNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	var d snapshotDesc
	if err := json.Unmarshal(v, &d); err != nil {
		return nil, fmt.Errorf("hbaselite: corrupt descriptor of snapshot %s: %w", name, err)
	}
	return &d, nil
}

// snapshots lists the snapshots by name.
func (s *store) snapshots() ([]*snapshotDesc, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{snapPrefix}, UpperBound: []byte{snapPrefix + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*snapshotDesc
	for it.First(); it.Valid(); it.Next() {
		var d snapshotDesc
		if err := json.Unmarshal(it.Value(), &d); err != nil {
			return nil, fmt.Errorf("hbaselite: corrupt snapshot descriptor %q: %w", it.Key(), err)
		}
		out = append(out, &d)
	}
	return out, it.Error()
}

// copyPrefix copies every key under from to the same key under to, in batches of a few
// MiB so a big table does not build one huge batch.
func (s *store) copyPrefix(from, to []byte) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: prefixEnd(from)})
	if err != nil {
		return err
	}
	defer it.Close()
	b := s.db.NewBatch()
	for it.First(); it.Valid(); it.Next() {
		k := append(bytes.Clone(to), it.Key()[len(from):]...)
		if err := b.Set(k, it.Value(), nil); err != nil {
			b.Close()
			return err
		}
		if b.Len() > 4<<20 {
			if err := b.Commit(pebble.NoSync); err != nil {
				b.Close()
				return err
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		b.Close()
		return err
	}
	defer b.Close()
	return b.Commit(pebble.Sync)
}

// takeSnapshot copies table t under a new snapshot. Writes wait meanwhile, so the copy
// is one point in time.
func (s *store) takeSnapshot(name string, t *table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kind := range []byte{cellPrefix, ttlPrefix} {
		if err := s.copyPrefix(tableCells(t.Name(), kind), snapCells(name, kind)); err != nil {
			return err
		}
	}
	data, err := json.Marshal(&snapshotDesc{Name: name, Table: *t, Created: time.Now().UnixMilli()})
	if err != nil {
		return err
	}
	return s.db.Set(snapKey(name), data, pebble.Sync)
}

func (s *store) deleteSnapshot(name string) error {
	b := s.db.NewBatch()
	defer b.Close()
	lo := escape([]byte{snapCellPrefix}, []byte(name))
	if err := b.DeleteRange(lo, prefixEnd(lo), nil); err != nil {
		return err
	}
	if err := b.Delete(snapKey(name), nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// restoreSnapshot replaces the cells of table t (an existing disabled table, or a new
// one) with the snapshot's, then stores t's descriptor.
func (s *store) restoreSnapshot(d *snapshotDesc, t *table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.db.NewBatch()
	for _, kind := range []byte{cellPrefix, ttlPrefix} {
		lo := tableCells(t.Name(), kind)
		if err := b.DeleteRange(lo, prefixEnd(lo), nil); err != nil {
			b.Close()
			return err
		}
	}
	err := b.Commit(pebble.NoSync)
	b.Close()
	if err != nil {
		return err
	}
	for _, kind := range []byte{cellPrefix, ttlPrefix} {
		if err := s.copyPrefix(snapCells(d.Name, kind), tableCells(t.Name(), kind)); err != nil {
			return err
		}
	}
	return s.putTable(t)
}

func (s *server) takeSnapshot(req *pb.SnapshotRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	sd := req.GetSnapshot()
	name := sd.GetName()
	if !validName(name) {
		return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("illegal snapshot name %q: use letters, digits, '_', '-' and '.'", name)}
	}
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	t, err := s.existing(tableNameOf(sd.GetTable()))
	if err != nil {
		return nil, err
	}
	if d, err := s.store.snapshot(name); err != nil {
		return nil, err
	} else if d != nil {
		return nil, rpcError{class: excSnapshotExists, msg: fmt.Sprintf("snapshot %s already exists (of table %s); delete it first", name, d.Table.Name())}
	}
	if err := s.store.takeSnapshot(name, t); err != nil {
		return nil, err
	}
	return &pb.SnapshotResponse{ExpectedTimeout: proto.Int64(0)}, nil
}

// tableNameOf reads a table name as "ns:qualifier" or "qualifier".
func tableNameOf(name string) *pb.TableName {
	return &pb.TableName{Namespace: []byte("default"), Qualifier: []byte(name)}
}

func (s *server) snapshotDone(req *pb.IsSnapshotDoneRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	d, err := s.store.snapshot(req.GetSnapshot().GetName())
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, rpcError{class: excSnapshotMissing, msg: fmt.Sprintf("snapshot %s does not exist", req.GetSnapshot().GetName())}
	}
	return &pb.IsSnapshotDoneResponse{Done: proto.Bool(true), Snapshot: d.proto()}, nil
}

func (s *server) deleteSnapshot(req *pb.DeleteSnapshotRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	name := req.GetSnapshot().GetName()
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if d, err := s.store.snapshot(name); err != nil {
		return nil, err
	} else if d == nil {
		return nil, rpcError{class: excSnapshotMissing, msg: fmt.Sprintf("snapshot %s does not exist", name)}
	}
	if err := s.store.deleteSnapshot(name); err != nil {
		return nil, err
	}
	return &pb.DeleteSnapshotResponse{}, nil
}

func (s *server) listSnapshots(_ *pb.GetCompletedSnapshotsRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	list, err := s.store.snapshots()
	if err != nil {
		return nil, err
	}
	resp := &pb.GetCompletedSnapshotsResponse{}
	for _, d := range list {
		resp.Snapshots = append(resp.Snapshots, d.proto())
	}
	return resp, nil
}

// restoreSnapshot restores a snapshot into the table its request names: over that
// table when it exists (it must be disabled), else into a new table with the
// snapshot's schema and regions (HBase's clone). It finishes before it answers.
func (s *server) restoreSnapshot(req *pb.RestoreSnapshotRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	sd := req.GetSnapshot()
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	d, err := s.store.snapshot(sd.GetName())
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, rpcError{class: excSnapshotMissing, msg: fmt.Sprintf("snapshot %s does not exist", sd.GetName())}
	}
	target := sd.GetTable()
	if target == "" {
		target = d.Table.Name()
	}
	ns, qual, err := parseTableName(tableNameOf(target))
	if err != nil {
		return nil, err
	}
	nt := d.Table // the snapshot's schema and regions
	nt.Namespace, nt.Qualifier = ns, qual
	if cur := s.store.table(nt.Name()); cur != nil {
		if cur.Enabled {
			return nil, rpcError{class: excTableNotDisabled, msg: fmt.Sprintf("table %s is enabled; disable it before restoring snapshot %s into it", cur.Name(), d.Name)}
		}
		nt.Enabled = false
	} else {
		if !s.store.hasNamespace(ns) {
			return nil, rpcError{class: excNamespaceMissing, msg: fmt.Sprintf("namespace %s does not exist; create it first", ns)}
		}
		nt.Enabled = true
	}
	// New region names: clients holding the old regions look them up again.
	nt.RegionID = s.newRegionID()
	if err := s.store.restoreSnapshot(d, &nt); err != nil {
		return nil, err
	}
	return &pb.RestoreSnapshotResponse{}, nil
}

func (s *server) restoreDone(_ *pb.IsRestoreSnapshotDoneRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	return &pb.IsRestoreSnapshotDoneResponse{Done: proto.Bool(true)}, nil
}
