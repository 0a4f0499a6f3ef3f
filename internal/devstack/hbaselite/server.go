package hbaselite

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tsuna/gohbase/pb"
	"google.golang.org/protobuf/proto"
)

// Options configure a Server.
type Options struct {
	// DataDir holds the store, in DataDir/hbaselite.
	DataDir string
	// ZKAddr is where the ZooKeeper endpoint listens ("127.0.0.1:0": any free port);
	// RPCAddr the HBase RPC endpoint (master and region server in one).
	ZKAddr, RPCAddr string
	// MaxCellSize bounds one cell (row + qualifier + value), like HBase's
	// hbase.server.keyvalue.maxsize (default 10 MiB).
	MaxCellSize int64
	// MaxRequestSize bounds one RPC, like hbase.ipc.max.request.size (default 256 MiB).
	MaxRequestSize int64
	// ScannerLease is how long an unused scanner lives (default 60s, HBase's
	// hbase.client.scanner.timeout.period).
	ScannerLease time.Duration
	Log          *slog.Logger
}

// Server is a running hbaselite.
type Server struct {
	s *server
}

type server struct {
	opts      Options
	log       *slog.Logger
	store     *store
	zk        *zkServer
	rpcLn     net.Listener
	rpcAddr   string
	startCode uint64

	adminMu     sync.Mutex
	nextProc    atomic.Uint64
	lastRegion  atomic.Uint64
	balancerOff atomic.Bool

	scanMu      sync.Mutex
	scanners    map[uint64]*scanner
	nextScanner atomic.Uint64

	connMu sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
	once   sync.Once
}

// Run starts a server.
func Run(o Options) (*Server, error) {
	if o.DataDir == "" {
		return nil, errors.New("hbaselite: no data directory")
	}
	if o.ZKAddr == "" {
		o.ZKAddr = "127.0.0.1:0"
	}
	if o.RPCAddr == "" {
		o.RPCAddr = "127.0.0.1:0"
	}
	if o.MaxCellSize <= 0 {
		o.MaxCellSize = 10 << 20
	}
	if o.MaxRequestSize <= 0 {
		o.MaxRequestSize = 256 << 20
	}
	if o.ScannerLease <= 0 {
		o.ScannerLease = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := filepath.Join(o.DataDir, "hbaselite")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("hbaselite: %w", err)
	}
	st, err := openStore(dir)
	if err != nil {
		return nil, err
	}
	s := &server{opts: o, log: o.Log, store: st, scanners: map[uint64]*scanner{}, conns: map[net.Conn]bool{},
		startCode: uint64(time.Now().UnixMilli())}
	for _, t := range st.tableList() {
		if t.RegionID > s.lastRegion.Load() {
			s.lastRegion.Store(t.RegionID)
		}
	}
	if s.rpcLn, err = net.Listen("tcp", o.RPCAddr); err != nil {
		st.close()
		return nil, fmt.Errorf("hbaselite: listen %s: %w", o.RPCAddr, err)
	}
	zln, err := net.Listen("tcp", o.ZKAddr)
	if err != nil {
		s.rpcLn.Close()
		st.close()
		return nil, fmt.Errorf("hbaselite: listen %s: %w", o.ZKAddr, err)
	}
	s.rpcAddr = s.rpcLn.Addr().String()
	s.zk = newZK(zln)
	sn := s.serverName()
	master, _ := proto.Marshal(&pb.Master{Master: sn})
	meta, _ := proto.Marshal(&pb.MetaRegionServer{Server: sn})
	s.zk.set("/hbase/master", znodeData(master))
	s.zk.set("/hbase/meta-region-server", znodeData(meta))
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.zk.serve() }()
	go func() { defer s.wg.Done(); s.serveRPC() }()
	return &Server{s: s}, nil
}

// serverName is the RPC endpoint's ServerName: master and region server.
func (s *server) serverName() *pb.ServerName {
	host, portStr, _ := net.SplitHostPort(s.rpcAddr)
	port, _ := strconv.Atoi(portStr)
	return &pb.ServerName{HostName: proto.String(host), Port: proto.Uint32(uint32(port)), StartCode: proto.Uint64(s.startCode)}
}

// znodeData frames a protobuf as HBase stores it in ZooKeeper: 0xFF, the length and
// bytes of an id, then "PBUF" and the message.
func znodeData(msg []byte) []byte {
	const id = "hbaselite"
	b := []byte{0xFF, 0, 0, 0, byte(len(id))}
	b = append(b, id...)
	b = append(b, pbufMagic...)
	return append(b, msg...)
}

// Start runs a server on addr (the ZooKeeper quorum address clients are given) with its
// store under dataDir/hbaselite, and returns that address and a stop function.
func Start(dataDir, addr string) (zk string, stop func() error, err error) {
	srv, err := Run(Options{DataDir: dataDir, ZKAddr: addr})
	if err != nil {
		return "", nil, err
	}
	return srv.ZK(), srv.Stop, nil
}

// ZK is the ZooKeeper quorum address to give gohbase.
func (s *Server) ZK() string { return s.s.zk.ln.Addr().String() }

// RPCAddr is the address of the HBase RPC endpoint (master and region server).
func (s *Server) RPCAddr() string { return s.s.rpcAddr }

// Stop closes the endpoints and the store. Calls in flight finish first.
func (s *Server) Stop() error {
	var err error
	s.s.once.Do(func() {
		s.s.rpcLn.Close()
		s.s.zk.close()
		s.s.connMu.Lock()
		for c := range s.s.conns {
			c.Close()
		}
		s.s.connMu.Unlock()
		s.s.wg.Wait()
		err = s.s.store.close()
	})
	return err
}
