package hbaselite

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// get serves a Get on a user table, hbase:meta or hbase:namespace.
func (s *server) get(req *pb.GetRequest, _ *cellReader, out *replyCells) (proto.Message, error) {
	tg, err := s.region(req.Region)
	if err != nil {
		return nil, err
	}
	g := req.Get
	if g == nil {
		return nil, rpcError{class: excDoNotRetry, msg: "Get without a get"}
	}
	if err := tg.check(g.Row); err != nil {
		return nil, err
	}
	q, err := newQuery(tg.r.t, g.Column, g.TimeRange, g.GetMaxVersions(), g.GetStoreLimit(), g.GetStoreOffset(), g.Filter)
	if err != nil {
		return nil, err
	}
	var cells []cell
	if tg.sys() {
		for _, r := range s.sysRows(tg) {
			if bytes.Equal(r.row, g.Row) {
				cells = r.cells
			}
		}
	} else if cells, err = s.store.readRow(tg.r.t, g.Row); err != nil {
		return nil, err
	}
	cells = q.apply(g.Row, cells)
	if g.GetExistenceOnly() {
		return &pb.GetResponse{Result: &pb.Result{Exists: proto.Bool(len(cells) > 0)}}, nil
	}
	return &pb.GetResponse{Result: out.result(g.Row, cells)}, nil
}

// mutate serves one put, delete, increment or append, conditional or not.
func (s *server) mutate(req *pb.MutateRequest, in *cellReader, out *replyCells) (proto.Message, error) {
	tg, err := s.region(req.Region)
	if err == nil && tg.sys() {
		err = rpcError{class: excDoNotRetry, msg: "the hbase tables are maintained by hbaselite and cannot be written"}
	}
	m, perr := s.parseMutation(tg.r.t, req.Mutation, in) // always consume the mutation's cells
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	if err := tg.check(m.row); err != nil {
		return nil, err
	}
	if req.Condition != nil {
		if m.cond, err = parseCondition(tg.r.t, req.Condition, m.row); err != nil {
			return nil, err
		}
	}
	ok, res, err := s.store.apply(tg.r.t, m)
	if err != nil {
		return nil, err
	}
	if err := s.store.sync(); err != nil {
		return nil, err
	}
	resp := &pb.MutateResponse{Processed: proto.Bool(ok)}
	if m.kind == mutIncrement || m.kind == mutAppend {
		resp.Result = out.result(m.row, res)
	}
	return resp, nil
}

// parseCondition reads the condition of a CheckAndPut or CheckAndDelete with HBase's
// semantics: an empty expected value matches a missing or empty cell whatever the
// operator, and otherwise the operator compares the expected value to the cell's
// (LESS: the expected value is less than the cell's).
func parseCondition(t *table, c *pb.Condition, row []byte) (*condition, error) {
	if !bytes.Equal(c.Row, row) {
		return nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("condition row %q differs from the mutation's row %q", abbrev(c.Row), abbrev(row))}
	}
	if t.family(c.Family) == nil {
		return nil, noSuchFamily(t, c.Family)
	}
	if c.Comparator == nil {
		return nil, rpcError{class: excDoNotRetry, msg: "condition without a comparator"}
	}
	want, prefix, err := parseComparator(c.Comparator)
	if err != nil {
		return nil, err
	}
	op := c.GetCompareType()
	return &condition{family: c.Family, qualifier: c.Qualifier, match: func(v []byte, exists bool) bool {
		if len(want) == 0 {
			return !exists || len(v) == 0
		}
		if !exists {
			return false
		}
		if prefix && len(v) > len(want) {
			v = v[:len(want)]
		}
		return opMatches(op, bytes.Compare(want, v))
	}}, nil
}

// parseMutation reads a put or a delete from its protobuf and its cells (inline, or
// from the request's cell block), checking sizes and families. t may be nil when the
// region failed: the cells are read anyway so the next action finds its own.
func (s *server) parseMutation(t *table, mp *pb.MutationProto, in *cellReader) (mutation, error) {
	if mp == nil {
		return mutation{}, rpcError{class: excDoNotRetry, msg: "mutation missing"}
	}
	m := mutation{row: mp.Row, ts: latest}
	if mp.Timestamp != nil {
		m.ts = mp.GetTimestamp()
	}
	for _, a := range mp.Attribute {
		if a.GetName() == "_ttl" && len(a.Value) == 8 { // the cells' time to live in ms
			m.ttl = binary.BigEndian.Uint64(a.Value)
		}
	}
	var cells []mutCell
	var cellErr error
	for i := 0; i < int(mp.GetAssociatedCellCount()); i++ {
		wc, err := in.next()
		if err != nil {
			return m, err
		}
		if cellErr == nil && !bytes.Equal(wc.row, mp.Row) {
			cellErr = rpcError{class: excDoNotRetry, msg: fmt.Sprintf("cell row %q does not match the mutation's row %q (a row longer than %d bytes does not fit a cell)", abbrev(wc.row), abbrev(mp.Row), maxRowLength)}
		}
		cells = append(cells, mutCell{family: wc.family, qualifier: wc.qualifier, ts: wc.ts, value: wc.value, kind: wc.kind})
	}
	for _, cv := range mp.ColumnValue {
		for _, qv := range cv.QualifierValue {
			mc := mutCell{family: cv.Family, qualifier: qv.Qualifier, ts: m.ts, value: qv.Value, kind: kindPut}
			if qv.Timestamp != nil {
				mc.ts = qv.GetTimestamp()
			}
			if mp.GetMutateType() == pb.MutationProto_DELETE {
				switch qv.GetDeleteType() {
				case pb.MutationProto_DELETE_ONE_VERSION:
					mc.kind = kindDelete
				case pb.MutationProto_DELETE_MULTIPLE_VERSIONS:
					mc.kind = kindDeleteColumn
				case pb.MutationProto_DELETE_FAMILY:
					mc.kind = kindDeleteFamily
				case pb.MutationProto_DELETE_FAMILY_VERSION:
					mc.kind = kindDeleteFamilyVersion
				}
			}
			cells = append(cells, mc)
		}
	}
	switch mp.GetMutateType() {
	case pb.MutationProto_PUT:
		m.kind = mutPut
	case pb.MutationProto_DELETE:
		m.kind = mutDelete
	case pb.MutationProto_INCREMENT:
		m.kind = mutIncrement
	case pb.MutationProto_APPEND:
		m.kind = mutAppend
	default:
		return m, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("%s mutations are not supported by hbaselite", mp.GetMutateType())}
	}
	del := m.kind == mutDelete
	switch {
	case cellErr != nil:
		return m, cellErr
	case len(mp.Row) == 0:
		return m, rpcError{class: excDoNotRetry, msg: "row key is empty"}
	case len(mp.Row) > maxRowLength:
		return m, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("row length %d is > %d", len(mp.Row), maxRowLength)}
	case !del && len(cells) == 0:
		return m, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("%s without columns: add at least one column", mp.GetMutateType())}
	}
	for _, c := range cells {
		if c.kind == kindPut && del || c.kind != kindPut && !del {
			return m, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("cell type %d does not fit a %s mutation", c.kind, mp.GetMutateType())}
		}
		if t != nil && t.family(c.family) == nil {
			return m, noSuchFamily(t, c.family)
		}
		if size := len(c.value) + len(c.qualifier) + len(mp.Row); int64(size) > s.opts.MaxCellSize {
			return m, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("cell %s:%s of row %q has %d bytes, over the limit of %d bytes", c.family, abbrev(c.qualifier), abbrev(mp.Row), size, s.opts.MaxCellSize)}
		}
	}
	m.cells = cells
	return m, nil
}

// abbrev shortens long keys in error messages.
func abbrev(b []byte) string {
	if len(b) > 64 {
		return fmt.Sprintf("%s… (%d bytes)", b[:48], len(b))
	}
	return string(b)
}

// multi serves a batch of gets and mutations, grouped by region. Each action gets its
// own result or exception; a region that is not served fails all its actions. The
// mutations of the whole batch are synced once, before the answer.
func (s *server) multi(req *pb.MultiRequest, in *cellReader, out *replyCells) (proto.Message, error) {
	resp := &pb.MultiResponse{}
	wrote := false
	for _, ra := range req.RegionAction {
		tg, rerr := s.region(ra.Region)
		if rerr == nil && tg.meta {
			rerr = rpcError{class: excDoNotRetry, msg: "batches on hbase:meta are not supported"}
		}
		rar := &pb.RegionActionResult{}
		for _, a := range ra.Action {
			roe := &pb.ResultOrException{Index: a.Index}
			var err error
			switch {
			case a.Mutation != nil:
				var m mutation
				m, err = s.parseMutation(tg.r.t, a.Mutation, in)
				if err == nil && rerr == nil && tg.sys() {
					err = rpcError{class: excDoNotRetry, msg: "the hbase tables are maintained by hbaselite and cannot be written"}
				}
				if err == nil && rerr == nil {
					err = tg.check(m.row)
				}
				var res []cell
				if err == nil && rerr == nil {
					_, res, err = s.store.apply(tg.r.t, m)
					wrote = true
				}
				if err == nil {
					roe.Result = out.result(m.row, res)
				}
			case a.Get != nil && rerr == nil:
				var r proto.Message
				r, err = s.get(&pb.GetRequest{Region: ra.Region, Get: a.Get}, in, out)
				if err == nil {
					roe.Result = r.(*pb.GetResponse).Result
				}
			case rerr == nil:
				err = rpcError{class: excDoNotRetry, msg: "only gets and mutations can be batched"}
			}
			if rerr != nil {
				continue
			}
			if err != nil {
				re := asRPCError(err)
				roe.Exception = &pb.NameBytesPair{Name: proto.String(re.class), Value: []byte(re.class + ": " + re.msg)}
			}
			rar.ResultOrException = append(rar.ResultOrException, roe)
		}
		if rerr != nil {
			re := asRPCError(rerr)
			rar.Exception = &pb.NameBytesPair{Name: proto.String(re.class), Value: []byte(re.class + ": " + re.msg)}
		}
		resp.RegionActionResult = append(resp.RegionActionResult, rar)
	}
	if wrote {
		if err := s.store.sync(); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// scanner is an open region scanner.
type scanner struct {
	tg       target
	sys      []metaRow // rows of hbase:meta or hbase:namespace left to return, in scan order
	q        *query
	reversed bool
	stop     []byte
	pos      []byte // next row to read from; nil: the start of the region
	posIncl  bool
	maxBytes uint64
	metrics  bool // answer with scan metrics
	lastUsed atomic.Int64
}

func (s *server) scan(req *pb.ScanRequest, _ *cellReader, out *replyCells) (proto.Message, error) {
	if req.ScannerId != nil {
		id := req.GetScannerId()
		s.scanMu.Lock()
		s.expireScanners()
		sc := s.scanners[id]
		if req.GetCloseScanner() {
			delete(s.scanners, id)
		}
		s.scanMu.Unlock()
		if req.GetCloseScanner() {
			return &pb.ScanResponse{MoreResults: proto.Bool(false)}, nil
		}
		if sc == nil {
			return nil, rpcError{class: excUnknownScanner, msg: fmt.Sprintf("scanner %d does not exist: it was closed or unused for longer than %s", id, s.opts.ScannerLease)}
		}
		sc.lastUsed.Store(time.Now().UnixNano())
		if req.GetRenew() {
			return &pb.ScanResponse{ScannerId: proto.Uint64(id), MoreResultsInRegion: proto.Bool(true)}, nil
		}
		return s.scanNext(id, sc, req.GetNumberOfRows(), false, out)
	}
	tg, err := s.region(req.Region)
	if err != nil {
		return nil, err
	}
	sp := req.Scan
	if sp == nil {
		return nil, rpcError{class: excDoNotRetry, msg: "Scan request without a scan or a scanner id"}
	}
	q, err := newQuery(tg.r.t, sp.Column, sp.TimeRange, sp.GetMaxVersions(), sp.GetStoreLimit(), sp.GetStoreOffset(), sp.Filter)
	if err != nil {
		return nil, err
	}
	sc := &scanner{tg: tg, q: q, reversed: sp.GetReversed(), stop: sp.StopRow, maxBytes: sp.GetMaxResultSize(), metrics: req.GetTrackScanMetrics()}
	if tg.sys() {
		sc.sys = sysRange(s.sysRows(tg), tg.compare(), sp.StartRow, sp.StopRow, sc.reversed)
	} else {
		sc.pos, sc.posIncl = regionStart(tg.r, sp.StartRow, sc.reversed)
	}
	sc.lastUsed.Store(time.Now().UnixNano())
	id := s.nextScanner.Add(1)
	if !req.GetCloseScanner() {
		s.scanMu.Lock()
		s.expireScanners()
		s.scanners[id] = sc
		s.scanMu.Unlock()
	}
	return s.scanNext(id, sc, req.GetNumberOfRows(), req.GetCloseScanner(), out)
}

// regionStart is where a scan starting at start begins in region r: the start row when
// it lies in the region, else the region's edge the scan enters by (a forward scan its
// start key, a reversed one the last row before its end key).
func regionStart(r region, start []byte, reversed bool) (pos []byte, incl bool) {
	if !reversed {
		if len(start) > 0 && bytes.Compare(start, r.start) > 0 {
			return start, true
		}
		if len(r.start) > 0 {
			return r.start, true
		}
		return nil, false
	}
	if len(start) > 0 && (len(r.end) == 0 || bytes.Compare(start, r.end) < 0) {
		return start, true
	}
	if len(r.end) > 0 {
		return r.end, false
	}
	return nil, false
}

// scanNext returns the next rows of a scanner, closing it when the region is done.
// MoreResults turns false only when the scan's stop row was reached; at a region's end
// the client goes on to the next region.
func (s *server) scanNext(id uint64, sc *scanner, rows uint32, closing bool, out *replyCells) (proto.Message, error) {
	if rows == 0 {
		rows = 128
	}
	if sc.maxBytes == 0 {
		sc.maxBytes = 2 << 20
	}
	resp := &pb.ScanResponse{ScannerId: proto.Uint64(id)}
	var size uint64
	var scanned, filtered int64
	more, scanDone := true, false
	for n := uint32(0); n < rows && size < sc.maxBytes; {
		row, cells, done, err := s.scanRow(sc)
		if err != nil {
			return nil, err
		}
		if row == nil {
			more, scanDone = false, done
			break
		}
		cells, dropped := sc.q.applyCounted(row, cells)
		if len(cells) == 0 {
			if dropped {
				filtered++
			}
			continue
		}
		n++
		scanned++
		for _, c := range cells {
			size += uint64(len(row) + len(c.family) + len(c.qualifier) + len(c.value) + 20)
		}
		r := out.result(row, cells)
		if out.on { // the cells are in the cell block, counted per row
			resp.CellsPerResult = append(resp.CellsPerResult, uint32(len(cells)))
			resp.PartialFlagPerResult = append(resp.PartialFlagPerResult, false)
		} else {
			resp.Results = append(resp.Results, r)
		}
	}
	if !more || closing {
		s.scanMu.Lock()
		delete(s.scanners, id)
		s.scanMu.Unlock()
		more = false
	}
	resp.MoreResultsInRegion = proto.Bool(more)
	if scanDone {
		resp.MoreResults = proto.Bool(false)
	}
	if sc.metrics {
		resp.ScanMetrics = &pb.ScanMetrics{Metrics: []*pb.NameInt64Pair{
			{Name: proto.String("ROWS_SCANNED"), Value: proto.Int64(scanned)},
			{Name: proto.String("ROWS_FILTERED"), Value: proto.Int64(filtered)},
		}}
	}
	return resp, nil
}

// scanRow reads the scanner's next row in its region and range; nil at the end of
// either, with scanDone true when the scan's stop row (or the end of a system table)
// ended it.
func (s *server) scanRow(sc *scanner) (row []byte, cells []cell, scanDone bool, err error) {
	if sc.tg.sys() {
		if len(sc.sys) == 0 {
			return nil, nil, true, nil
		}
		r := sc.sys[0]
		sc.sys = sc.sys[1:]
		return r.row, r.cells, false, nil
	}
	reg := sc.tg.r
	row, err = s.store.nextRow(reg.t.Name(), sc.pos, sc.posIncl, sc.reversed)
	if err != nil || row == nil {
		return nil, nil, false, err
	}
	if len(sc.stop) > 0 {
		c := bytes.Compare(row, sc.stop)
		if !sc.reversed && c >= 0 || sc.reversed && c <= 0 {
			return nil, nil, true, nil
		}
	}
	if !reg.contains(row) {
		return nil, nil, false, nil
	}
	sc.pos, sc.posIncl = row, false
	cells, err = s.store.readRow(reg.t, row)
	return row, cells, false, err
}

// sysRange returns the rows of a system table in a scan's range, in scan order.
func sysRange(rows []metaRow, cmp func(a, b []byte) int, start, stop []byte, reversed bool) []metaRow {
	var out []metaRow
	for _, r := range rows {
		if !reversed && (len(start) > 0 && cmp(r.row, start) < 0 || len(stop) > 0 && cmp(r.row, stop) >= 0) {
			continue
		}
		if reversed && (len(start) > 0 && cmp(r.row, start) > 0 || len(stop) > 0 && cmp(r.row, stop) <= 0) {
			continue
		}
		out = append(out, r)
	}
	if reversed {
		slices.Reverse(out)
	}
	return out
}

// expireScanners drops scanners unused for longer than their lease. Called with scanMu held.
func (s *server) expireScanners() {
	limit := time.Now().Add(-s.opts.ScannerLease).UnixNano()
	for id, sc := range s.scanners {
		if sc.lastUsed.Load() < limit {
			delete(s.scanners, id)
		}
	}
}
