package hbaselite

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Exception classes sent to clients. gohbase retries the region ones (after a new
// lookup in hbase:meta) and hands every other one to the caller as an error.
const (
	excDoNotRetry       = "org.apache.hadoop.hbase.DoNotRetryIOException"
	excTableNotFound    = "org.apache.hadoop.hbase.TableNotFoundException"
	excTableExists      = "org.apache.hadoop.hbase.TableExistsException"
	excTableNotEnabled  = "org.apache.hadoop.hbase.TableNotEnabledException"
	excTableNotDisabled = "org.apache.hadoop.hbase.TableNotDisabledException"
	excNamespaceMissing = "org.apache.hadoop.hbase.NamespaceNotFoundException"
	excNamespaceExists  = "org.apache.hadoop.hbase.NamespaceExistException"
	excNoSuchFamily     = "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException"
	excNotServing       = "org.apache.hadoop.hbase.NotServingRegionException"
	excUnknownScanner   = "org.apache.hadoop.hbase.UnknownScannerException"
	excRequestTooBig    = "org.apache.hadoop.hbase.exceptions.RequestTooBigException"
	excIllegalArgument  = "java.lang.IllegalArgumentException"
	excWrongRegion      = "org.apache.hadoop.hbase.regionserver.WrongRegionException"
)

// rpcError is an exception for the client: its Java class name and message.
type rpcError struct {
	class string
	msg   string
}

func (e rpcError) Error() string { return e.class + ": " + e.msg }

func asRPCError(err error) rpcError {
	var re rpcError
	if errors.As(err, &re) {
		return re
	}
	return rpcError{class: excDoNotRetry, msg: err.Error()}
}

// maxRowLength is HBase's limit on a row key (Short.MAX_VALUE).
const maxRowLength = 32767

// conn is one client connection: the preamble and connection header, then framed calls.
type conn struct {
	s          *server
	nc         net.Conn
	service    string
	cellBlocks bool // answer with KeyValueCodec cell blocks

	wmu      sync.Mutex
	inflight sync.WaitGroup
}

func (s *server) serveRPC() {
	for {
		nc, err := s.rpcLn.Accept()
		if err != nil {
			return
		}
		c := &conn{s: s, nc: nc}
		s.connMu.Lock()
		s.conns[nc] = true
		s.connMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.run()
			c.inflight.Wait()
			nc.Close()
			s.connMu.Lock()
			delete(s.conns, nc)
			s.connMu.Unlock()
		}()
	}
}

func (c *conn) run() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	_ = c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	var pre [6]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil || string(pre[:4]) != "HBas" {
		return
	}
	if pre[4] != 0 || pre[5] != 0x50 { // version 0, SIMPLE authentication
		c.s.log.Warn("hbaselite: refusing a connection with unsupported version or authentication", "version", pre[4], "auth", pre[5])
		return
	}
	hdr, err := readFrame(br, 1<<20)
	if err != nil {
		return
	}
	var ch pb.ConnectionHeader
	if err := proto.Unmarshal(hdr, &ch); err != nil {
		return
	}
	c.service = ch.GetServiceName()
	c.cellBlocks = ch.GetCellBlockCodecClass() == "org.apache.hadoop.hbase.codec.KeyValueCodec" && ch.GetCellBlockCompressorClass() == ""
	_ = c.nc.SetReadDeadline(time.Time{})
	sem := make(chan struct{}, 16) // calls of one connection served at once
	for {
		var sz [4]byte
		if _, err := io.ReadFull(br, sz[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(sz[:]))
		if n > c.s.opts.MaxRequestSize {
			// Read the header for the call id, skip the rest, answer with an error and
			// keep the connection: the client gets the error instead of a retry loop.
			head := make([]byte, min(n, 64<<10))
			if _, err := io.ReadFull(br, head); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, br, n-int64(len(head))); err != nil {
				return
			}
			var rh pb.RequestHeader
			hb, l := protowire.ConsumeBytes(head)
			if l < 0 || proto.Unmarshal(hb, &rh) != nil {
				return
			}
			c.reply(rh.GetCallId(), nil, nil, rpcError{class: excRequestTooBig, msg: fmt.Sprintf("RPC of %d bytes exceeds the limit of %d bytes; write smaller batches", n, c.s.opts.MaxRequestSize)})
			continue
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		sem <- struct{}{}
		c.inflight.Add(1)
		go func() {
			defer func() { <-sem; c.inflight.Done() }()
			c.call(frame)
		}()
	}
}

// call decodes one request, runs it and answers.
func (c *conn) call(frame []byte) {
	hb, l := protowire.ConsumeBytes(frame)
	var rh pb.RequestHeader
	if l < 0 || proto.Unmarshal(hb, &rh) != nil {
		c.s.log.Warn("hbaselite: undecodable request header; closing the connection")
		c.nc.Close()
		return
	}
	rest := frame[l:]
	var param []byte
	if rh.GetRequestParam() {
		p, l := protowire.ConsumeBytes(rest)
		if l < 0 {
			c.reply(rh.GetCallId(), nil, nil, rpcError{class: excDoNotRetry, msg: "undecodable request parameter"})
			return
		}
		param, rest = p, rest[l:]
	}
	var cells []byte
	if m := rh.GetCellBlockMeta(); m != nil {
		if int(m.GetLength()) != len(rest) {
			c.reply(rh.GetCallId(), nil, nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("cell block of %d bytes announced, %d sent", m.GetLength(), len(rest))})
			return
		}
		cells = rest
	}
	resp, out, err := c.dispatch(rh.GetMethodName(), param, cells)
	c.reply(rh.GetCallId(), resp, out, err)
}

func (c *conn) dispatch(method string, param, cells []byte) (resp proto.Message, out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("hbaselite: panic serving a call", "method", method, "panic", p, "stack", string(debug.Stack()))
			resp, out, err = nil, nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("hbaselite failed on %s: %v", method, p)}
		}
	}()
	h, ok := handlers[c.service][method]
	if !ok {
		return nil, nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("method %s of service %s is not supported by hbaselite (see the package doc of internal/devstack/hbaselite)", method, c.service)}
	}
	req := h.req()
	if err := proto.Unmarshal(param, req); err != nil {
		return nil, nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("cannot decode %s request: %v", method, err)}
	}
	rb := &replyCells{on: c.cellBlocks}
	resp, err = h.run(c.s, req, &cellReader{b: cells}, rb)
	return resp, rb.b, err
}

// reply writes a response: header, message and cell blocks, or the exception.
func (c *conn) reply(id uint32, resp proto.Message, cells []byte, err error) {
	h := &pb.ResponseHeader{CallId: proto.Uint32(id)}
	var body []byte
	if err != nil {
		re := asRPCError(err)
		h.Exception = &pb.ExceptionResponse{ExceptionClassName: proto.String(re.class), StackTrace: proto.String(re.class + ": " + re.msg), DoNotRetry: proto.Bool(true)}
		cells = nil
	} else {
		if len(cells) > 0 {
			h.CellBlockMeta = &pb.CellBlockMeta{Length: proto.Uint32(uint32(len(cells)))}
		}
		if resp != nil {
			b, merr := proto.Marshal(resp)
			if merr != nil {
				c.reply(id, nil, nil, merr)
				return
			}
			body = protowire.AppendBytes(nil, b)
		}
	}
	hb, _ := proto.Marshal(h)
	msg := protowire.AppendBytes(nil, hb)
	msg = append(msg, body...)
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(msg)+len(cells)), uint32(len(msg)+len(cells)))
	frame = append(append(frame, msg...), cells...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.nc.Write(frame); err != nil {
		c.nc.Close()
	}
}

// cellReader reads KeyValueCodec cells from a request's cell block.
type cellReader struct{ b []byte }

type wireCell struct {
	row, family, qualifier []byte
	ts                     uint64
	kind                   byte
	value                  []byte
}

func (r *cellReader) next() (wireCell, error) {
	bad := func(what string) (wireCell, error) {
		return wireCell{}, rpcError{class: excDoNotRetry, msg: "malformed cell block: " + what}
	}
	if len(r.b) < 4 {
		return bad("fewer cells than announced")
	}
	total := int(binary.BigEndian.Uint32(r.b))
	if total < 8 || len(r.b) < 4+total {
		return bad("cell longer than the block")
	}
	kv := r.b[4 : 4+total]
	r.b = r.b[4+total:]
	keyLen := int(binary.BigEndian.Uint32(kv))
	valLen := int(binary.BigEndian.Uint32(kv[4:]))
	if keyLen < 2+1+8+1 || 8+keyLen+valLen != total {
		return bad("inconsistent key/value lengths")
	}
	key, value := kv[8:8+keyLen], kv[8+keyLen:]
	rowLen := int(binary.BigEndian.Uint16(key))
	if 2+rowLen+1 > keyLen-9 {
		return bad("row longer than the key")
	}
	row := key[2 : 2+rowLen]
	famLen := int(key[2+rowLen])
	rest := key[3+rowLen : keyLen-9]
	if famLen > len(rest) {
		return bad("family longer than the key")
	}
	return wireCell{row: row, family: rest[:famLen], qualifier: rest[famLen:],
		ts: binary.BigEndian.Uint64(key[keyLen-9:]), kind: key[keyLen-1], value: value}, nil
}

// replyCells collects a response's cells: into a cell block when the client asked for
// KeyValueCodec cell blocks, else into the protobuf results.
type replyCells struct {
	on bool
	b  []byte
}

// result builds a Result of cells for a row.
func (rc *replyCells) result(row []byte, cells []cell) *pb.Result {
	if !rc.on {
		res := &pb.Result{Cell: make([]*pb.Cell, len(cells))}
		for i, c := range cells {
			res.Cell[i] = &pb.Cell{Row: row, Family: c.family, Qualifier: c.qualifier, Timestamp: proto.Uint64(c.ts), CellType: pb.CellType_PUT.Enum(), Value: c.value}
		}
		return res
	}
	for _, c := range cells {
		keyLen := 2 + len(row) + 1 + len(c.family) + len(c.qualifier) + 8 + 1
		rc.b = binary.BigEndian.AppendUint32(rc.b, uint32(8+keyLen+len(c.value)))
		rc.b = binary.BigEndian.AppendUint32(rc.b, uint32(keyLen))
		rc.b = binary.BigEndian.AppendUint32(rc.b, uint32(len(c.value)))
		rc.b = binary.BigEndian.AppendUint16(rc.b, uint16(len(row)))
		rc.b = append(rc.b, row...)
		rc.b = append(rc.b, byte(len(c.family)))
		rc.b = append(rc.b, c.family...)
		rc.b = append(rc.b, c.qualifier...)
		rc.b = binary.BigEndian.AppendUint64(rc.b, c.ts)
		rc.b = append(rc.b, kindPut)
		rc.b = append(rc.b, c.value...)
	}
	return &pb.Result{AssociatedCellCount: proto.Int32(int32(len(cells)))}
}

// handler is one RPC method: a fresh request message and the code that serves it.
type handler struct {
	req func() proto.Message
	run func(s *server, req proto.Message, in *cellReader, out *replyCells) (proto.Message, error)
}

func method[Req proto.Message](newReq func() Req, run func(*server, Req, *cellReader, *replyCells) (proto.Message, error)) handler {
	return handler{
		req: func() proto.Message { return newReq() },
		run: func(s *server, req proto.Message, in *cellReader, out *replyCells) (proto.Message, error) {
			return run(s, req.(Req), in, out)
		},
	}
}

var handlers map[string]map[string]handler

func init() {
	handlers = map[string]map[string]handler{
		"ClientService": {
			"Get":    method(func() *pb.GetRequest { return &pb.GetRequest{} }, (*server).get),
			"Mutate": method(func() *pb.MutateRequest { return &pb.MutateRequest{} }, (*server).mutate),
			"Multi":  method(func() *pb.MultiRequest { return &pb.MultiRequest{} }, (*server).multi),
			"Scan":   method(func() *pb.ScanRequest { return &pb.ScanRequest{} }, (*server).scan),
		},
		"MasterService": {
			"CreateNamespace":          method(func() *pb.CreateNamespaceRequest { return &pb.CreateNamespaceRequest{} }, (*server).createNamespace),
			"DeleteNamespace":          method(func() *pb.DeleteNamespaceRequest { return &pb.DeleteNamespaceRequest{} }, (*server).deleteNamespace),
			"ListNamespaceDescriptors": method(func() *pb.ListNamespaceDescriptorsRequest { return &pb.ListNamespaceDescriptorsRequest{} }, (*server).listNamespaces),
			"CreateTable":              method(func() *pb.CreateTableRequest { return &pb.CreateTableRequest{} }, (*server).createTable),
			"DeleteTable":              method(func() *pb.DeleteTableRequest { return &pb.DeleteTableRequest{} }, (*server).deleteTable),
			"EnableTable":              method(func() *pb.EnableTableRequest { return &pb.EnableTableRequest{} }, (*server).enableTable),
			"DisableTable":             method(func() *pb.DisableTableRequest { return &pb.DisableTableRequest{} }, (*server).disableTable),
			"GetTableNames":            method(func() *pb.GetTableNamesRequest { return &pb.GetTableNamesRequest{} }, (*server).tableNames),
			"getProcedureResult":       method(func() *pb.GetProcedureResultRequest { return &pb.GetProcedureResultRequest{} }, (*server).procedureResult),
			"GetClusterStatus":         method(func() *pb.GetClusterStatusRequest { return &pb.GetClusterStatusRequest{} }, (*server).clusterStatus),
			"SetBalancerRunning":       method(func() *pb.SetBalancerRunningRequest { return &pb.SetBalancerRunningRequest{} }, (*server).setBalancer),
			"MoveRegion":               method(func() *pb.MoveRegionRequest { return &pb.MoveRegionRequest{} }, (*server).moveRegion),
			"Snapshot":                 method(func() *pb.SnapshotRequest { return &pb.SnapshotRequest{} }, (*server).takeSnapshot),
			"IsSnapshotDone":           method(func() *pb.IsSnapshotDoneRequest { return &pb.IsSnapshotDoneRequest{} }, (*server).snapshotDone),
			"DeleteSnapshot":           method(func() *pb.DeleteSnapshotRequest { return &pb.DeleteSnapshotRequest{} }, (*server).deleteSnapshot),
			"GetCompletedSnapshots":    method(func() *pb.GetCompletedSnapshotsRequest { return &pb.GetCompletedSnapshotsRequest{} }, (*server).listSnapshots),
			"RestoreSnapshot":          method(func() *pb.RestoreSnapshotRequest { return &pb.RestoreSnapshotRequest{} }, (*server).restoreSnapshot),
			"IsRestoreSnapshotDone":    method(func() *pb.IsRestoreSnapshotDoneRequest { return &pb.IsRestoreSnapshotDoneRequest{} }, (*server).restoreDone),
		},
	}
}

// target is the region a request names: the hbase:meta region, or a region of a user
// table or of hbase:namespace.
type target struct {
	meta bool
	r    region
}

// sys reports whether the target is a region of a table hbaselite builds from its own
// state (hbase:meta, hbase:namespace), read-only.
func (tg target) sys() bool { return tg.meta || tg.r.t == namespaceTable }

// compare orders the rows of the target's table.
func (tg target) compare() func(a, b []byte) int {
	if tg.meta {
		return compareMeta
	}
	return bytes.Compare
}

// check refuses a row outside the target region, as HBase's WrongRegionException does.
func (tg target) check(row []byte) error {
	if tg.meta || tg.r.contains(row) {
		return nil
	}
	return rpcError{class: excWrongRegion, msg: fmt.Sprintf("row %q is not in region %q", abbrev(row), tg.r.name())}
}

// sysRows returns the rows of a system table's region, sorted.
func (s *server) sysRows(tg target) []metaRow {
	if tg.meta {
		return s.metaRows()
	}
	return s.namespaceRows()
}

// region resolves a request's region: the hbase:meta region, or a region of a table,
// which must be enabled.
func (s *server) region(spec *pb.RegionSpecifier) (target, error) {
	name := spec.GetValue()
	if bytes.HasPrefix(name, []byte(metaRegionPrefix)) {
		return target{meta: true}, nil
	}
	r, ok := s.regionNamed(name)
	if !ok {
		return target{}, rpcError{class: excNotServing, msg: fmt.Sprintf("region %q is not online on %s", name, s.rpcAddr)}
	}
	if !r.t.Enabled {
		return target{}, rpcError{class: excTableNotEnabled, msg: fmt.Sprintf("table %s is disabled; enable it first", r.t.Name())}
	}
	return target{r: r}, nil
}
