package hbaselite

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

func TestZooKeeperEndpoint(t *testing.T) {
	srv, err := Run(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	zk.DefaultLogger = slog.NewLogLogger(slog.NewTextHandler(io.Discard, nil), slog.LevelInfo)
	conn, _, err := zk.Connect([]string{srv.ZK()}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The master znode: 0xFF, id, PBUF, then the server name of the RPC endpoint.
	data, stat, err := conn.Get("/hbase/master")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, pbufMagic)
	if data[0] != 0xFF || i < 0 || stat.DataLength != int32(len(data)) {
		t.Fatalf("master znode %q, stat %+v", data, stat)
	}
	var m pb.Master
	if err := proto.Unmarshal(data[i+4:], &m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetMaster().GetHostName() + ":" + itoa(m.GetMaster().GetPort()); got != srv.RPCAddr() {
		t.Errorf("master at %s, want %s", got, srv.RPCAddr())
	}
	children, _, err := conn.Children("/hbase")
	if err != nil || len(children) != 2 || children[0] != "master" || children[1] != "meta-region-server" {
		t.Errorf("children of /hbase = %v, %v", children, err)
	}
	if _, _, err := conn.Get("/hbase/nope"); !errors.Is(err, zk.ErrNoNode) {
		t.Errorf("get of a missing znode: %v", err)
	}
	if _, err := conn.Create("/x", nil, 0, zk.WorldACL(zk.PermAll)); err == nil {
		t.Errorf("create: %v, want unimplemented", err)
	}

	// Watches fire once when the server publishes a znode.
	_, _, dataEv, err := conn.GetW("/hbase/master")
	if err != nil {
		t.Fatal(err)
	}
	ok, _, existEv, err := conn.ExistsW("/hbase/backup")
	if err != nil || ok {
		t.Fatalf("exists /hbase/backup = %v, %v", ok, err)
	}
	srv.s.zk.set("/hbase/master", data)
	srv.s.zk.set("/hbase/backup", []byte("b"))
	for _, w := range []struct {
		ch   <-chan zk.Event
		want zk.EventType
	}{{dataEv, zk.EventNodeDataChanged}, {existEv, zk.EventNodeCreated}} {
		select {
		case ev := <-w.ch:
			if ev.Type != w.want {
				t.Errorf("event %v, want %v", ev.Type, w.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %v event", w.want)
		}
	}
	// The session stays alive across pings (go-zookeeper pings every timeout/3).
	time.Sleep(2 * time.Second)
	if _, _, err := conn.Get("/hbase/backup"); err != nil || conn.State() != zk.StateHasSession {
		t.Errorf("after pings: %v, state %v", err, conn.State())
	}
}

func itoa(p uint32) string { return strconv.FormatUint(uint64(p), 10) }
