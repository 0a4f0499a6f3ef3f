package hbaselite

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// Admin calls run to completion before they answer; the procedure id they return is
// already finished, so a client polling getProcedureResult sees FINISHED at once.

func (s *server) procedure() *uint64 {
	id := s.nextProc.Add(1)
	return &id
}

func (s *server) procedureResult(req *pb.GetProcedureResultRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	if req.GetProcId() == 0 || req.GetProcId() > s.nextProc.Load() {
		return &pb.GetProcedureResultResponse{State: pb.GetProcedureResultResponse_NOT_FOUND.Enum()}, nil
	}
	now := uint64(time.Now().UnixMilli())
	return &pb.GetProcedureResultResponse{State: pb.GetProcedureResultResponse_FINISHED.Enum(), StartTime: &now, LastUpdate: &now}, nil
}

func (s *server) createNamespace(req *pb.CreateNamespaceRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	name := string(req.GetNamespaceDescriptor().GetName())
	if !validName(name) {
		return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("illegal namespace name %q: use letters, digits, '_', '-' and '.'", name)}
	}
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.store.hasNamespace(name) {
		return nil, rpcError{class: excNamespaceExists, msg: name}
	}
	if err := s.store.putNamespace(name); err != nil {
		return nil, err
	}
	return &pb.CreateNamespaceResponse{}, nil
}

func (s *server) deleteNamespace(req *pb.DeleteNamespaceRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	name := req.GetNamespaceName()
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if name == "default" || name == "hbase" {
		return nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("namespace %s is reserved and cannot be deleted", name)}
	}
	if !s.store.hasNamespace(name) {
		return nil, rpcError{class: excNamespaceMissing, msg: name}
	}
	for _, t := range s.store.tableList() {
		if t.Namespace == name {
			return nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("namespace %s still has table %s; delete its tables first", name, t.Name())}
		}
	}
	if err := s.store.deleteNamespace(name); err != nil {
		return nil, err
	}
	return &pb.DeleteNamespaceResponse{}, nil
}

func (s *server) listNamespaces(_ *pb.ListNamespaceDescriptorsRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	resp := &pb.ListNamespaceDescriptorsResponse{}
	for _, n := range s.store.namespaces() {
		resp.NamespaceDescriptor = append(resp.NamespaceDescriptor, &pb.NamespaceDescriptor{Name: []byte(n)})
	}
	return resp, nil
}

func (s *server) createTable(req *pb.CreateTableRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	schema := req.GetTableSchema()
	ns, qual, err := parseTableName(schema.GetTableName())
	if err != nil {
		return nil, err
	}
	t := &table{Namespace: ns, Qualifier: qual, Enabled: true}
	if t.Splits, err = splitKeys(req.SplitKeys); err != nil {
		return nil, err
	}
	for _, cf := range schema.GetColumnFamilies() {
		f := family{Name: string(cf.GetName()), MaxVersions: 1}
		if !validName(f.Name) {
			return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("illegal column family name %q", f.Name)}
		}
		for _, a := range cf.GetAttributes() {
			if string(a.GetFirst()) == "VERSIONS" {
				n, err := strconv.Atoi(string(a.GetSecond()))
				if err != nil || n < 1 {
					return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("column family %s: VERSIONS %q must be a positive number", f.Name, a.GetSecond())}
				}
				f.MaxVersions = n
			}
			if string(a.GetFirst()) == "TTL" {
				n, err := strconv.ParseInt(string(a.GetSecond()), 10, 64)
				if err != nil || n < 1 {
					return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("column family %s: TTL %q must be a positive number of seconds", f.Name, a.GetSecond())}
				}
				if n < math.MaxInt32 { // HBase's FOREVER
					f.TTL = n
				}
			}
		}
		if t.family([]byte(f.Name)) != nil {
			return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("column family %s given twice", f.Name)}
		}
		t.Families = append(t.Families, f)
	}
	if len(t.Families) == 0 {
		return nil, rpcError{class: excDoNotRetry, msg: fmt.Sprintf("table %s should have at least one column family", t.Name())}
	}
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if !s.store.hasNamespace(ns) {
		return nil, rpcError{class: excNamespaceMissing, msg: fmt.Sprintf("namespace %s does not exist; create it first", ns)}
	}
	if s.store.table(t.Name()) != nil {
		return nil, rpcError{class: excTableExists, msg: t.Name()}
	}
	t.RegionID = s.newRegionID()
	if err := s.store.putTable(t); err != nil {
		return nil, err
	}
	return &pb.CreateTableResponse{ProcId: s.procedure()}, nil
}

// newRegionID returns a region id for a new or restored table: the time in ms, and a
// new one every time, so a recreated table gets new region names and clients holding
// the old ones look them up again. Called with adminMu held.
func (s *server) newRegionID() uint64 {
	id := uint64(time.Now().UnixMilli())
	if last := s.lastRegion.Load(); id <= last {
		id = last + 1
	}
	s.lastRegion.Store(id)
	return id
}

// splitKeys checks and sorts the split keys of a new table, as HBase does.
func splitKeys(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if len(k) == 0 {
			return nil, rpcError{class: excIllegalArgument, msg: "empty split key must not be passed in the split keys"}
		}
		out = append(out, bytes.Clone(k))
	}
	slices.SortFunc(out, bytes.Compare)
	for i := 1; i < len(out); i++ {
		if bytes.Equal(out[i-1], out[i]) {
			return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("split key %q is given twice: split keys must be unique", out[i])}
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// existing returns the named table or TableNotFoundException.
func (s *server) existing(tn *pb.TableName) (*table, error) {
	ns, qual, err := parseTableName(tn)
	if err != nil {
		return nil, err
	}
	t := s.store.table(fullName(ns, qual))
	if t == nil {
		return nil, rpcError{class: excTableNotFound, msg: fullName(ns, qual)}
	}
	return t, nil
}

func (s *server) deleteTable(req *pb.DeleteTableRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	t, err := s.existing(req.TableName)
	if err != nil {
		return nil, err
	}
	if t.Enabled {
		return nil, rpcError{class: excTableNotDisabled, msg: fmt.Sprintf("table %s is enabled; disable it before deleting it", t.Name())}
	}
	s.store.mu.Lock() // no write in flight while the cells go
	err = s.store.dropTable(t)
	s.store.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &pb.DeleteTableResponse{ProcId: s.procedure()}, nil
}

func (s *server) setEnabled(tn *pb.TableName, enabled bool) (*uint64, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	t, err := s.existing(tn)
	if err != nil {
		return nil, err
	}
	if t.Enabled == enabled {
		if enabled {
			return nil, rpcError{class: excTableNotDisabled, msg: t.Name()}
		}
		return nil, rpcError{class: excTableNotEnabled, msg: t.Name()}
	}
	nt := *t // descriptors are shared read-only: replace, never edit
	nt.Enabled = enabled
	if err := s.store.putTable(&nt); err != nil {
		return nil, err
	}
	return s.procedure(), nil
}

func (s *server) enableTable(req *pb.EnableTableRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	id, err := s.setEnabled(req.TableName, true)
	if err != nil {
		return nil, err
	}
	return &pb.EnableTableResponse{ProcId: id}, nil
}

func (s *server) disableTable(req *pb.DisableTableRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	id, err := s.setEnabled(req.TableName, false)
	if err != nil {
		return nil, err
	}
	return &pb.DisableTableResponse{ProcId: id}, nil
}

func (s *server) tableNames(req *pb.GetTableNamesRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	var re *regexp.Regexp
	if req.Regex != nil {
		var err error
		if re, err = regexp.Compile("^(?:" + req.GetRegex() + ")$"); err != nil {
			return nil, rpcError{class: excIllegalArgument, msg: fmt.Sprintf("bad table name pattern %q: %v", req.GetRegex(), err)}
		}
	}
	resp := &pb.GetTableNamesResponse{}
	for _, t := range s.store.tableList() {
		if ns := req.GetNamespace(); ns != "" && t.Namespace != ns {
			continue
		}
		if re != nil && !re.MatchString(t.Name()) {
			continue
		}
		resp.TableNames = append(resp.TableNames, &pb.TableName{Namespace: []byte(t.Namespace), Qualifier: []byte(t.Qualifier)})
	}
	if req.GetIncludeSysTables() && (req.GetNamespace() == "" || req.GetNamespace() == "hbase") {
		for _, name := range []string{metaTable, namespaceTable.Name()} {
			if re == nil || re.MatchString(name) {
				resp.TableNames = append(resp.TableNames, &pb.TableName{Namespace: []byte("hbase"), Qualifier: []byte(strings.TrimPrefix(name, "hbase:"))})
			}
		}
	}
	return resp, nil
}

// clusterStatus describes the one server: master and only region server.
func (s *server) clusterStatus(_ *pb.GetClusterStatusRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	sn := s.serverName()
	regions := uint32(1) // hbase:meta
	for _, t := range append(s.store.tableList(), namespaceTable) {
		regions += uint32(len(t.Splits) + 1)
	}
	return &pb.GetClusterStatusResponse{ClusterStatus: &pb.ClusterStatus{
		HbaseVersion: &pb.HBaseVersionFileContent{Version: proto.String("2.5.0-hbaselite")},
		Master:       sn,
		LiveServers:  []*pb.LiveServerInfo{{Server: sn, ServerLoad: &pb.ServerLoad{TotalNumberOfRequests: proto.Uint64(0)}}},
		BalancerOn:   proto.Bool(!s.balancerOff.Load()),
	}}, nil
}

// setBalancer records the balancer switch: with one server there is nothing to balance.
func (s *server) setBalancer(req *pb.SetBalancerRunningRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	prev := !s.balancerOff.Swap(!req.GetOn())
	return &pb.SetBalancerRunningResponse{PrevBalanceValue: proto.Bool(prev)}, nil
}

// moveRegion accepts a move of a region it serves and leaves it where it is: there is
// no other server to move it to.
func (s *server) moveRegion(req *pb.MoveRegionRequest, _ *cellReader, _ *replyCells) (proto.Message, error) {
	want := req.GetRegion().GetValue()
	for _, t := range append(s.store.tableList(), namespaceTable) {
		for _, r := range t.regions() {
			if bytes.Equal(r.encodedName(), want) || bytes.Equal(r.name(), want) {
				return &pb.MoveRegionResponse{}, nil
			}
		}
	}
	return nil, rpcError{class: excUnknownRegion, msg: fmt.Sprintf("region %q is not served here", want)}
}
