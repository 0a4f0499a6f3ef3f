package hbase

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tsuna/gohbase"
	"github.com/tsuna/gohbase/hrpc"
	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// ensure creates the namespace and the table when they are missing, once per sink.
func (s *Sink) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := EnsureTable(actx, s.admin, Namespace, Qualifier, SaltSplits(), Family); err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("hbase sink: HBase at %s did not answer within %s (is it running?): %w", s.cfg.ZK, s.cfg.Timeout, err)
		}
		return fmt.Errorf("hbase sink: create table %s at %s: %w", Table, s.cfg.ZK, err)
	}
	s.ready = true
	return nil
}

// EnsureTable creates namespace ns and table ns:qual with families that keep every
// version, pre-split at splits (none: one region), unless they exist. gohbase's admin
// client has no namespace calls and names tables in the default namespace only, so both
// requests are sent as raw master RPCs.
func EnsureTable(ctx context.Context, admin gohbase.AdminClient, ns, qual string, splits [][]byte, families ...string) error {
	list, err := hrpc.NewListTableNames(ctx, hrpc.ListNamespace(ns))
	if err != nil {
		return err
	}
	names, err := admin.ListTableNames(list)
	if err != nil && !strings.Contains(err.Error(), "NamespaceNotFoundException") {
		return err
	}
	for _, n := range names {
		if string(n.GetQualifier()) == qual {
			return nil
		}
	}
	rpc, ok := admin.(gohbase.RPCClient)
	if !ok {
		return errors.New("the admin client cannot send master requests")
	}
	if _, err := rpc.SendRPC(newMasterCall(ctx, "CreateNamespace", &pb.CreateNamespaceRequest{
		NamespaceDescriptor: &pb.NamespaceDescriptor{Name: []byte(ns)},
	}, &pb.CreateNamespaceResponse{})); err != nil && !strings.Contains(err.Error(), "NamespaceExistException") {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	schema := &pb.TableSchema{TableName: &pb.TableName{Namespace: []byte(ns), Qualifier: []byte(qual)}}
	for _, f := range families {
		schema.ColumnFamilies = append(schema.ColumnFamilies, &pb.ColumnFamilySchema{
			Name:       []byte(f),
			Attributes: []*pb.BytesBytesPair{{First: []byte("VERSIONS"), Second: []byte(strconv.Itoa(math.MaxInt32))}},
		})
	}
	// A cluster may finish creating the namespace after answering; the table waits for it.
	var resp proto.Message
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		resp, err = rpc.SendRPC(newMasterCall(ctx, "CreateTable", &pb.CreateTableRequest{TableSchema: schema, SplitKeys: splits}, &pb.CreateTableResponse{}))
		if err == nil || !strings.Contains(err.Error(), "NamespaceNotFoundException") || wait > 2*time.Second {
			break
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "TableExistsException") {
			return nil // created meanwhile by another worker
		}
		return err
	}
	return waitProcedure(ctx, rpc, resp.(*pb.CreateTableResponse).GetProcId())
}

// waitProcedure polls the master until a procedure has finished.
func waitProcedure(ctx context.Context, rpc gohbase.RPCClient, id uint64) error {
	for wait := 20 * time.Millisecond; ; wait = min(wait*2, time.Second) {
		msg, err := rpc.SendRPC(hrpc.NewGetProcedureState(ctx, id))
		if err != nil {
			return err
		}
		res := msg.(*pb.GetProcedureResultResponse)
		switch res.GetState() {
		case pb.GetProcedureResultResponse_NOT_FOUND:
			return fmt.Errorf("procedure %d not found on the master", id)
		case pb.GetProcedureResultResponse_FINISHED:
			if e := res.GetException().GetGenericException(); e != nil {
				return fmt.Errorf("%s: %s", e.GetClassName(), e.GetMessage())
			}
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// masterCall is a master RPC that gohbase has no request type for.
type masterCall struct {
	ctx    context.Context
	name   string
	req    proto.Message
	resp   proto.Message
	region hrpc.RegionInfo
	result chan hrpc.RPCResult
}

func newMasterCall(ctx context.Context, name string, req, resp proto.Message) *masterCall {
	return &masterCall{ctx: ctx, name: name, req: req, resp: resp, result: make(chan hrpc.RPCResult, 1)}
}

func (c *masterCall) Table() []byte                   { return nil }
func (c *masterCall) Name() string                    { return c.name }
func (c *masterCall) Key() []byte                     { return nil }
func (c *masterCall) Region() hrpc.RegionInfo         { return c.region }
func (c *masterCall) SetRegion(r hrpc.RegionInfo)     { c.region = r }
func (c *masterCall) ToProto() proto.Message          { return c.req }
func (c *masterCall) NewResponse() proto.Message      { return proto.Clone(c.resp) }
func (c *masterCall) ResultChan() chan hrpc.RPCResult { return c.result }
func (c *masterCall) Description() string             { return c.name }
func (c *masterCall) Context() context.Context        { return c.ctx }
