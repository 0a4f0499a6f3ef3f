package hbaselite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tsuna/gohbase/pb"
	"go.etcd.io/bbolt"
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
	var d *snapshotDesc
	err := s.view(func(b *bbolt.Bucket) error {
		v := b.Get(snapKey(name))
		if v == nil {
			return nil
		}
		d = &snapshotDesc{}
		if err := json.Unmarshal(v, d); err != nil {
			return fmt.Errorf("hbaselite: corrupt descriptor of snapshot %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// snapshots lists the snapshots by name.
func (s *store) snapshots() ([]*snapshotDesc, error) {
	var out []*snapshotDesc
	err := s.view(func(b *bbolt.Bucket) error {
		return scanPrefix(b, []byte{snapPrefix}, func(k, v []byte) error {
			var d snapshotDesc
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("hbaselite: corrupt snapshot descriptor %q: %w", k, err)
			}
			out = append(out, &d)
			return nil
		})
	})
	return out, err
}

// copyPrefix copies every key under from to the same key under to (a disjoint range),
// a few MiB per transaction so a big table does not build one huge transaction, and
// syncs once at the end. Callers hold s.mu, so no write moves the keys in between.
func (s *store) copyPrefix(from, to []byte) error {
	type kv struct{ k, v []byte }
	for next := from; next != nil; {
		err := s.update(false, func(b *bbolt.Bucket) error {
			var chunk []kv
			size := 0
			c := b.Cursor()
			k, v := c.Seek(next)
			next = nil
			for ; k != nil && bytes.HasPrefix(k, from); k, v = c.Next() {
				if size > 4<<20 {
					next = bytes.Clone(k)
					break
				}
				chunk = append(chunk, kv{append(bytes.Clone(to), k[len(from):]...), bytes.Clone(v)})
				size += len(k) + len(v)
			}
			// Written after the scan: a cursor does not survive writes.
			for _, e := range chunk {
				if err := b.Put(e.k, e.v); err != nil {
					return fmt.Errorf("hbaselite: copy %q: %w", e.k, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return s.db.Sync()
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
	return s.update(true, func(b *bbolt.Bucket) error { return b.Put(snapKey(name), data) })
}

func (s *store) deleteSnapshot(name string) error {
	return s.update(true, func(b *bbolt.Bucket) error {
		if err := deletePrefix(b, escape([]byte{snapCellPrefix}, []byte(name))); err != nil {
			return err
		}
		return b.Delete(snapKey(name))
	})
}

// restoreSnapshot replaces the cells of table t (an existing disabled table, or a new
// one) with the snapshot's, then stores t's descriptor.
func (s *store) restoreSnapshot(d *snapshotDesc, t *table) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.update(false, func(b *bbolt.Bucket) error {
		for _, kind := range []byte{cellPrefix, ttlPrefix} {
			if err := deletePrefix(b, tableCells(t.Name(), kind)); err != nil {
				return err
			}
		}
		return nil
	})
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
