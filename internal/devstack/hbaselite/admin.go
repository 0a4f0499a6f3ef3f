package hbaselite

import (
	"fmt"
	"regexp"
	"strconv"
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
	if len(req.SplitKeys) > 0 {
		return nil, rpcError{class: excDoNotRetry, msg: "pre-split tables are not supported: hbaselite serves each table as one region; create it without split keys"}
	}
	t := &table{Namespace: ns, Qualifier: qual, Enabled: true}
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
	// A new region id every time, so a recreated table gets a new region name and
	// clients holding the old one look it up again.
	id := uint64(time.Now().UnixMilli())
	if last := s.lastRegion.Load(); id <= last {
		id = last + 1
	}
	s.lastRegion.Store(id)
	t.RegionID = id
	if err := s.store.putTable(t); err != nil {
		return nil, err
	}
	return &pb.CreateTableResponse{ProcId: s.procedure()}, nil
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
	if req.GetIncludeSysTables() && (req.GetNamespace() == "" || req.GetNamespace() == "hbase") && (re == nil || re.MatchString(metaTable)) {
		resp.TableNames = append(resp.TableNames, &pb.TableName{Namespace: []byte("hbase"), Qualifier: []byte("meta")})
	}
	return resp, nil
}
