package hbaselite

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// ZooKeeper protocol subset: a read-only tree of znodes with the sessions, pings,
// reads and one-shot watches that gohbase's ZooKeeper client (go-zookeeper) uses.

const (
	zkOpNotify       = 0
	zkOpExists       = 3
	zkOpGetData      = 4
	zkOpGetChildren  = 8
	zkOpSync         = 9
	zkOpPing         = 11
	zkOpGetChildren2 = 12
	zkOpClose        = -11
	zkOpSetWatches   = 101

	zkErrOK            = 0
	zkErrUnimplemented = -6
	zkErrBadArguments  = -8
	zkErrNoNode        = -101

	zkEventCreated         = 1
	zkEventDataChanged     = 3
	zkEventChildrenChanged = 4
	zkStateSyncConnected   = 3

	zkMaxPacket = 1 << 20
)

type znode struct {
	data         []byte
	ctime, mtime int64
	czxid, mzxid int64
	version      int32
}

type zkSession struct {
	passwd    []byte
	timeout   time.Duration
	lastSeen  time.Time
	connected bool
}

// zkServer serves the znode tree.
type zkServer struct {
	ln net.Listener

	mu       sync.Mutex
	zxid     int64
	nodes    map[string]*znode
	sessions map[int64]*zkSession
	nextID   int64
	conns    map[*zkConn]bool
	wg       sync.WaitGroup
}

func newZK(ln net.Listener) *zkServer {
	now := time.Now().UnixMilli()
	z := &zkServer{ln: ln, nodes: map[string]*znode{}, sessions: map[int64]*zkSession{}, nextID: now << 8, conns: map[*zkConn]bool{}}
	for _, p := range []string{"/", "/zookeeper"} {
		z.nodes[p] = &znode{ctime: now, mtime: now}
	}
	return z
}

// set creates or replaces a znode (and its parents) and fires the watches on it.
func (z *zkServer) set(p string, data []byte) {
	z.mu.Lock()
	defer z.mu.Unlock()
	now := time.Now().UnixMilli()
	for dir := path.Dir(p); dir != "/" && z.nodes[dir] == nil; dir = path.Dir(dir) {
		z.zxid++
		z.nodes[dir] = &znode{ctime: now, mtime: now, czxid: z.zxid, mzxid: z.zxid}
	}
	z.zxid++
	n, existed := z.nodes[p]
	if !existed {
		n = &znode{ctime: now, czxid: z.zxid}
		z.nodes[p] = n
	} else {
		n.version++
	}
	n.data, n.mtime, n.mzxid = data, now, z.zxid
	for c := range z.conns {
		if existed {
			c.fire(p, zkEventDataChanged, c.dataWatches, c.existWatches)
		} else {
			c.fire(p, zkEventCreated, c.existWatches, c.dataWatches)
			c.fire(path.Dir(p), zkEventChildrenChanged, c.childWatches)
		}
	}
}

func (z *zkServer) serve() {
	for {
		nc, err := z.ln.Accept()
		if err != nil {
			return
		}
		c := &zkConn{z: z, nc: nc, dataWatches: map[string]bool{}, existWatches: map[string]bool{}, childWatches: map[string]bool{}}
		z.mu.Lock()
		z.conns[c] = true
		z.mu.Unlock()
		z.wg.Add(1)
		go func() {
			defer z.wg.Done()
			c.run()
			z.mu.Lock()
			delete(z.conns, c)
			z.mu.Unlock()
			nc.Close()
		}()
	}
}

func (z *zkServer) close() {
	z.ln.Close()
	z.mu.Lock()
	for c := range z.conns {
		c.nc.Close()
	}
	z.mu.Unlock()
	z.wg.Wait()
}

type zkConn struct {
	z       *zkServer
	nc      net.Conn
	wmu     sync.Mutex
	session int64
	timeout time.Duration

	// watches, guarded by z.mu
	dataWatches, existWatches, childWatches map[string]bool
}

// fire sends a watch event for p if one of the watch sets holds it; the watch is used up.
func (c *zkConn) fire(p string, event int32, sets ...map[string]bool) {
	hit := false
	for _, s := range sets {
		if s[p] {
			delete(s, p)
			hit = true
		}
	}
	if !hit {
		return
	}
	var w zkWriter
	w.i32(-1).i64(-1).i32(zkErrOK).i32(event).i32(zkStateSyncConnected).str(p)
	go c.send(w.b) // not under z.mu
}

func (c *zkConn) send(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err := c.nc.Write(append(frame, b...))
	return err
}

func readFrame(r io.Reader, limit int) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(sz[:]))
	if n < 0 || n > limit {
		return nil, errors.New("packet too large")
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func (c *zkConn) run() {
	br := bufio.NewReader(c.nc)
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	pkt, err := readFrame(br, zkMaxPacket)
	if err != nil {
		return
	}
	if !c.connect(pkt) {
		return
	}
	defer c.disconnect()
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		pkt, err := readFrame(br, zkMaxPacket)
		if err != nil {
			return
		}
		r := zkReader{b: pkt}
		xid, op := r.i32(), r.i32()
		if r.err != nil {
			return
		}
		c.touch()
		var w zkWriter
		switch op {
		case zkOpPing:
			w.i32(xid).i64(c.z.currentZxid()).i32(zkErrOK)
		case zkOpClose:
			w.i32(xid).i64(c.z.currentZxid()).i32(zkErrOK)
			_ = c.send(w.b)
			c.endSession()
			return
		case zkOpGetData, zkOpExists, zkOpGetChildren, zkOpGetChildren2:
			p, watch := r.str(), r.bool()
			if r.err != nil {
				w.i32(xid).i64(c.z.currentZxid()).i32(zkErrBadArguments)
				break
			}
			c.read(&w, xid, op, p, watch)
		case zkOpSync:
			p := r.str()
			w.i32(xid).i64(c.z.currentZxid()).i32(zkErrOK).str(p)
		case zkOpSetWatches:
			r.i64()
			c.z.mu.Lock()
			for _, set := range []map[string]bool{c.dataWatches, c.existWatches, c.childWatches} {
				for _, p := range r.strs() {
					set[p] = true
				}
			}
			c.z.mu.Unlock()
			w.i32(xid).i64(c.z.currentZxid()).i32(zkErrOK)
		default: // writes and everything else: this tree is served, not edited
			w.i32(xid).i64(c.z.currentZxid()).i32(zkErrUnimplemented)
		}
		if err := c.send(w.b); err != nil {
			return
		}
	}
}

// connect answers the connect request: a new session, or the client's own session when
// it reconnects in time with the right password; an unknown or expired session gets
// session id 0, which the client reads as "expired".
func (c *zkConn) connect(pkt []byte) bool {
	r := zkReader{b: pkt}
	r.i32() // protocol version
	r.i64() // last zxid seen
	timeoutMs := r.i32()
	sid := r.i64()
	passwd := r.bytes()
	if r.err != nil {
		return false
	}
	timeout := min(max(time.Duration(timeoutMs)*time.Millisecond, 4*time.Second), 40*time.Second)
	z := c.z
	z.mu.Lock()
	z.expireSessions()
	var sess *zkSession
	if sid != 0 {
		if s := z.sessions[sid]; s != nil && string(s.passwd) == string(passwd) {
			sess = s
		} else {
			sid = 0
		}
	} else {
		z.nextID++
		sid = z.nextID
		pw := make([]byte, 16)
		_, _ = rand.Read(pw)
		sess = &zkSession{passwd: pw, timeout: timeout}
		z.sessions[sid] = sess
	}
	var w zkWriter
	if sess == nil {
		z.mu.Unlock()
		w.i32(0).i32(0).i64(0).bytes(make([]byte, 16))
		_ = c.send(w.b)
		return false
	}
	sess.connected, sess.lastSeen = true, time.Now()
	c.session, c.timeout = sid, sess.timeout
	z.mu.Unlock()
	w.i32(0).i32(int32(c.timeout / time.Millisecond)).i64(sid).bytes(sess.passwd)
	return c.send(w.b) == nil
}

func (c *zkConn) touch() {
	c.z.mu.Lock()
	if s := c.z.sessions[c.session]; s != nil {
		s.lastSeen = time.Now()
	}
	c.z.mu.Unlock()
}

func (c *zkConn) disconnect() {
	c.z.mu.Lock()
	if s := c.z.sessions[c.session]; s != nil {
		s.connected, s.lastSeen = false, time.Now()
	}
	c.z.mu.Unlock()
}

func (c *zkConn) endSession() {
	c.z.mu.Lock()
	delete(c.z.sessions, c.session)
	c.z.mu.Unlock()
}

// expireSessions drops the sessions whose client has been away longer than their
// timeout. Called with z.mu held.
func (z *zkServer) expireSessions() {
	for id, s := range z.sessions {
		if !s.connected && time.Since(s.lastSeen) > s.timeout {
			delete(z.sessions, id)
		}
	}
}

func (z *zkServer) currentZxid() int64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.zxid
}

func (c *zkConn) read(w *zkWriter, xid, op int32, p string, watch bool) {
	z := c.z
	z.mu.Lock()
	defer z.mu.Unlock()
	n := z.nodes[p]
	w.i32(xid).i64(z.zxid)
	if n == nil {
		if op == zkOpExists && watch {
			c.existWatches[p] = true
		}
		w.i32(zkErrNoNode)
		return
	}
	w.i32(zkErrOK)
	children := z.children(p)
	switch op {
	case zkOpGetData:
		if watch {
			c.dataWatches[p] = true
		}
		w.bytes(n.data)
	case zkOpExists:
		if watch {
			c.dataWatches[p] = true
		}
	default:
		if watch {
			c.childWatches[p] = true
		}
		w.i32(int32(len(children)))
		for _, ch := range children {
			w.str(ch)
		}
		if op == zkOpGetChildren {
			return
		}
	}
	w.i64(n.czxid).i64(n.mzxid).i64(n.ctime).i64(n.mtime).i32(n.version).i32(0).i32(0).i64(0).
		i32(int32(len(n.data))).i32(int32(len(children))).i64(n.mzxid)
}

// children lists the names of p's children. Called with z.mu held.
func (z *zkServer) children(p string) []string {
	var out []string
	for q := range z.nodes {
		if q != p && q != "/" && path.Dir(q) == p {
			out = append(out, strings.TrimPrefix(q[len(path.Dir(q)):], "/"))
		}
	}
	sort.Strings(out)
	return out
}

// zkReader decodes jute: big-endian ints, length-prefixed bytes and strings.
type zkReader struct {
	b   []byte
	err error
}

func (r *zkReader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errors.New("short packet")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *zkReader) i32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *zkReader) i64() int64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (r *zkReader) bool() bool {
	b := r.take(1)
	return b != nil && b[0] != 0
}

func (r *zkReader) bytes() []byte {
	n := r.i32()
	if n < 0 {
		return nil
	}
	return r.take(int(n))
}

func (r *zkReader) str() string { return string(r.bytes()) }

func (r *zkReader) strs() []string {
	n := r.i32()
	var out []string
	for i := int32(0); i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}

type zkWriter struct{ b []byte }

func (w *zkWriter) i32(v int32) *zkWriter {
	w.b = binary.BigEndian.AppendUint32(w.b, uint32(v))
	return w
}

func (w *zkWriter) i64(v int64) *zkWriter {
	w.b = binary.BigEndian.AppendUint64(w.b, uint64(v))
	return w
}

func (w *zkWriter) bytes(b []byte) *zkWriter {
	w.i32(int32(len(b)))
	w.b = append(w.b, b...)
	return w
}

func (w *zkWriter) str(s string) *zkWriter { return w.bytes([]byte(s)) }
