package hbaselite

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// get serves a Get on a user table or on hbase:meta.
func (s *server) get(req *pb.GetRequest, _ *cellReader, out *replyCells) (proto.Message, error) {
	t, meta, err := s.region(req.Region)
	if err != nil {
		return nil, err
	}
	g := req.Get
	if g == nil {
		return nil, rpcError{class: excDoNotRetry, msg: "Get without a get"}
	}
	q, err := newQuery(t, g.Column, g.TimeRange, g.GetMaxVersions(), g.GetStoreLimit(), g.GetStoreOffset(), g.Filter)
	if err != nil {
		return nil, err
	}
	var cells []cell
	if meta {
		for _, r := range s.metaRows() {
			if bytes.Equal(r.row, g.Row) {
				cells = r.cells
			}
		}
	} else if cells, err = s.store.readRow(t.Name(), g.Row); err != nil {
		return nil, err
	}
	cells = q.apply(g.Row, cells)
	if g.GetExistenceOnly() {
		return &pb.GetResponse{Result: &pb.Result{Exists: proto.Bool(len(cells) > 0)}}, nil
	}
	return &pb.GetResponse{Result: out.result(g.Row, cells)}, nil
}

// mutate serves one put or delete.
func (s *server) mutate(req *pb.MutateRequest, in *cellReader, _ *replyCells) (proto.Message, error) {
	if req.Condition != nil {
		return nil, rpcError{class: excDoNotRetry, msg: "conditional mutations (CheckAndPut) are not supported by hbaselite"}
	}
	t, meta, err := s.region(req.Region)
	if err == nil && meta {
		err = rpcError{class: excDoNotRetry, msg: "hbase:meta is maintained by hbaselite and cannot be written"}
	}
	m, perr := s.parseMutation(t, req.Mutation, in) // always consume the mutation's cells
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	if err := s.store.apply(t, m); err != nil {
		return nil, err
	}
	return &pb.MutateResponse{Processed: proto.Bool(true)}, nil
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
	case pb.MutationProto_DELETE:
		m.delete = true
	default:
		return m, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("%s mutations are not supported by hbaselite; use put and delete", mp.GetMutateType())}
	}
	switch {
	case cellErr != nil:
		return m, cellErr
	case len(mp.Row) == 0:
		return m, rpcError{class: excDoNotRetry, msg: "row key is empty"}
	case len(mp.Row) > maxRowLength:
		return m, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("row length %d is > %d", len(mp.Row), maxRowLength)}
	case !m.delete && len(cells) == 0:
		return m, rpcError{class: excDoNotRetry, msg: "put without columns: add at least one column"}
	}
	for _, c := range cells {
		if c.kind == kindPut && m.delete || c.kind != kindPut && !m.delete {
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
// own result or exception; a region that is not served fails all its actions.
func (s *server) multi(req *pb.MultiRequest, in *cellReader, out *replyCells) (proto.Message, error) {
	resp := &pb.MultiResponse{}
	for _, ra := range req.RegionAction {
		t, meta, rerr := s.region(ra.Region)
		if rerr == nil && meta {
			rerr = rpcError{class: excDoNotRetry, msg: "batches on hbase:meta are not supported"}
		}
		rar := &pb.RegionActionResult{}
		for _, a := range ra.Action {
			roe := &pb.ResultOrException{Index: a.Index}
			var err error
			switch {
			case a.Mutation != nil:
				var m mutation
				m, err = s.parseMutation(t, a.Mutation, in)
				if err == nil && rerr == nil {
					err = s.store.apply(t, m)
				}
				if err == nil {
					roe.Result = &pb.Result{}
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
	return resp, nil
}

// scanner is an open region scanner.
type scanner struct {
	t        *table    // nil on hbase:meta
	meta     []metaRow // hbase:meta rows left to return, in scan order
	q        *query
	reversed bool
	stop     []byte
	pos      []byte // next row to read from; nil: the start of the range
	posIncl  bool
	maxBytes uint64
	lastUsed atomic.Int64
}

// scannerLease is how long an unused scanner lives.
const scannerLease = 60 * time.Second

func (s *server) scan(req *pb.ScanRequest, _ *cellReader, out *replyCells) (proto.Message, error) {
	if req.ScannerId != nil {
		id := req.GetScannerId()
		s.scanMu.Lock()
		sc := s.scanners[id]
		if req.GetCloseScanner() {
			delete(s.scanners, id)
		}
		s.scanMu.Unlock()
		if req.GetCloseScanner() {
			return &pb.ScanResponse{MoreResults: proto.Bool(false)}, nil
		}
		if sc == nil {
			return nil, rpcError{class: excUnknownScanner, msg: fmt.Sprintf("scanner %d does not exist: it was closed or unused for longer than %s", id, scannerLease)}
		}
		sc.lastUsed.Store(time.Now().UnixNano())
		if req.GetRenew() {
			return &pb.ScanResponse{ScannerId: proto.Uint64(id), MoreResultsInRegion: proto.Bool(true)}, nil
		}
		return s.scanNext(id, sc, req.GetNumberOfRows(), false, out)
	}
	t, meta, err := s.region(req.Region)
	if err != nil {
		return nil, err
	}
	sp := req.Scan
	if sp == nil {
		return nil, rpcError{class: excDoNotRetry, msg: "Scan request without a scan or a scanner id"}
	}
	q, err := newQuery(t, sp.Column, sp.TimeRange, sp.GetMaxVersions(), sp.GetStoreLimit(), sp.GetStoreOffset(), sp.Filter)
	if err != nil {
		return nil, err
	}
	sc := &scanner{t: t, q: q, reversed: sp.GetReversed(), stop: sp.StopRow, maxBytes: sp.GetMaxResultSize()}
	if len(sp.StartRow) > 0 {
		sc.pos, sc.posIncl = sp.StartRow, true
	}
	if meta {
		sc.meta = s.metaRange(sp.StartRow, sp.StopRow, sc.reversed)
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

// scanNext returns the next rows of a scanner, closing it when the range is done.
func (s *server) scanNext(id uint64, sc *scanner, rows uint32, closing bool, out *replyCells) (proto.Message, error) {
	if rows == 0 {
		rows = 128
	}
	if sc.maxBytes == 0 {
		sc.maxBytes = 2 << 20
	}
	resp := &pb.ScanResponse{ScannerId: proto.Uint64(id)}
	var size uint64
	more := true
	for n := uint32(0); n < rows && size < sc.maxBytes; {
		row, cells, err := s.scanRow(sc)
		if err != nil {
			return nil, err
		}
		if row == nil {
			more = false
			break
		}
		cells = sc.q.apply(row, cells)
		if len(cells) == 0 {
			continue
		}
		n++
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
	if !more {
		resp.MoreResults = proto.Bool(false)
	}
	return resp, nil
}

// scanRow reads the scanner's next row in range, or nil at the end.
func (s *server) scanRow(sc *scanner) ([]byte, []cell, error) {
	if sc.t == nil {
		if len(sc.meta) == 0 {
			return nil, nil, nil
		}
		r := sc.meta[0]
		sc.meta = sc.meta[1:]
		return r.row, r.cells, nil
	}
	row, err := s.store.nextRow(sc.t.Name(), sc.pos, sc.posIncl, sc.reversed)
	if err != nil || row == nil {
		return nil, nil, err
	}
	if len(sc.stop) > 0 {
		c := bytes.Compare(row, sc.stop)
		if !sc.reversed && c >= 0 || sc.reversed && c <= 0 {
			return nil, nil, nil
		}
	}
	sc.pos, sc.posIncl = row, false
	cells, err := s.store.readRow(sc.t.Name(), row)
	return row, cells, err
}

// metaRange returns the rows of hbase:meta in a scan's range, in scan order.
func (s *server) metaRange(start, stop []byte, reversed bool) []metaRow {
	var out []metaRow
	for _, r := range s.metaRows() {
		if !reversed && (len(start) > 0 && compareMeta(r.row, start) < 0 || len(stop) > 0 && compareMeta(r.row, stop) >= 0) {
			continue
		}
		if reversed && (len(start) > 0 && compareMeta(r.row, start) > 0 || len(stop) > 0 && compareMeta(r.row, stop) <= 0) {
			continue
		}
		out = append(out, r)
	}
	if reversed {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// expireScanners drops scanners unused for longer than their lease. Called with scanMu held.
func (s *server) expireScanners() {
	limit := time.Now().Add(-scannerLease).UnixNano()
	for id, sc := range s.scanners {
		if sc.lastUsed.Load() < limit {
			delete(s.scanners, id)
		}
	}
}
