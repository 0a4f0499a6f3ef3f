package devstack

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// RedisLog is where a persistent embedded Redis keeps its data between stacks: an
// append-only file of write commands in Redis's own AOF format (RESP arrays).
const RedisLog = "redis.aof"

// RedisFile is the JSON snapshot earlier versions kept instead; a stack that finds one
// and no RedisLog starts from it and moves its data into RedisLog.
const RedisFile = "redis.json"

// redisDatabases is how many databases (SELECT 0 … 15) a rewrite of the log keeps.
const redisDatabases = 16

// StartRedis starts the embedded Redis (miniredis) with what dir/redis.aof kept from the
// last stack, and keeps every write there before the client hears of it, so that dedup
// entries, recrawl plans, budgets and pools outlive a restart of `trawler dev`, a kill -9
// at any moment included. Strings, hashes, sets, sorted sets and lists are kept, with
// their expiry; miniredis has no other type Trawler uses.
//
// Why a log written before each reply: a snapshot on a timer loses what came after the
// last one (a re-run then stores everything again), and a snapshot after every write
// costs a dump of everything per command. miniredis passes every command through a hook
// before running it and sends the reply only once the command is done; the hook appends
// each write command to the file and fsyncs it before it runs, so no reply ever reports
// a write the file lacks. Writes run one at a time, in the order of the file. Every
// `every` the file is rewritten as the commands that rebuild the data, once it has
// grown past twice that size; the rewrite replaces it whole (temporary file and rename),
// so a kill during one leaves the old file.
func StartRedis(dir string, every time.Duration) (*miniredis.Miniredis, func() error, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, nil, err
	}
	l := &redisLog{m: m, srv: m.Server(), file: filepath.Join(dir, RedisLog), scripts: map[string]string{}, peers: map[*server.Peer]*redisPeer{}}
	if err := l.open(filepath.Join(dir, RedisFile)); err != nil {
		m.Close()
		return nil, nil, err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.compact()
			}
		}
	}()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			close(done)
			wg.Wait()
			m.Close() // waits for the connections: no write runs after this
			l.mu.Lock()
			defer l.mu.Unlock()
			err = errors.Join(l.rewrite(), l.f.Close())
		})
		return err
	}
	return m, stop, nil
}

// redisLog is the append-only file of one embedded Redis and the hook that fills it.
type redisLog struct {
	m    *miniredis.Miniredis
	srv  *server.Server
	file string

	// mu is held while a write is appended and runs, so the file's order is the order
	// writes take effect; also by a rewrite.
	mu         sync.Mutex
	f          *os.File
	db         int   // the database the file's next command goes to (its last SELECT)
	size, base int64 // bytes in the file, now and right after the last rewrite
	scripts    map[string]string

	peersMu sync.Mutex
	peers   map[*server.Peer]*redisPeer
}

// redisPeer is what the log follows of one connection.
type redisPeer struct {
	db     int
	multi  [][]string // write commands queued since MULTI; nil outside a transaction
	direct bool       // the hook runs this connection's command itself: let it through
}

// open loads the file (or a snapshot of an earlier version), rewrites it without
// whatever a kill cut short, and hooks the server so that every write is appended.
func (l *redisLog) open(legacy string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.srv.SetPreHook(l.hook) // writes of early clients wait for mu: they come after the load
	f, err := os.Open(l.file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := loadRedis(l.m, legacy); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("embedded Redis: %w", err)
	default:
		err := l.replay(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := l.rewrite(); err != nil {
		return err
	}
	if err := os.Remove(legacy); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("embedded Redis: %s now holds the data of %s, which stays: %w; remove it", l.file, legacy, err)
	}
	return nil
}

// replay runs the file's commands on the server, up to the end or to a command a kill
// cut short (never answered, so nobody relied on it). A transaction cut short before its
// EXEC stays queued and never runs.
func (l *redisLog) replay(f io.Reader) error {
	p := server.NewPeer(bufio.NewWriter(io.Discard))
	l.peers[p] = &redisPeer{direct: true}
	defer delete(l.peers, p)
	r := bufio.NewReader(f)
	for at := 0; ; {
		args, n, err := readCommand(r)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("embedded Redis: %s, byte %d: %v; move the file away to start empty", l.file, at, err)
		}
		at += n
		if strings.EqualFold(args[0], "EVAL") && len(args) > 1 {
			l.scripts[sha1Hex(args[1])] = args[1]
		}
		l.srv.Dispatch(p, args)
	}
}

// compact rewrites the file once it has grown past twice its size after the last
// rewrite (and by 64 KiB at least).
func (l *redisLog) compact() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 2*l.base+64<<10 {
		_ = l.rewrite() // the file still holds everything: the next tick tries again
	}
}

// rewrite replaces the file with the commands that rebuild what the server holds now.
// mu is held.
func (l *redisLog) rewrite() error {
	var b []byte
	db := 0
	for i := range redisDatabases {
		keys := l.m.DB(i).Keys()
		if len(keys) == 0 {
			continue
		}
		if i != db {
			b, db = appendCommand(b, "SELECT", strconv.Itoa(i)), i
		}
		for _, k := range keys {
			b = appendKey(b, l.m.DB(i), k)
		}
	}
	tmp := l.file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("embedded Redis: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l.file)
	}
	if err == nil {
		err = syncDir(filepath.Dir(l.file))
	}
	if err != nil {
		return fmt.Errorf("embedded Redis: rewrite %s: %w", l.file, err)
	}
	if l.f != nil {
		_ = l.f.Close()
	}
	if l.f, err = os.OpenFile(l.file, os.O_WRONLY|os.O_APPEND, 0); err != nil {
		return fmt.Errorf("embedded Redis: %w", err)
	}
	l.db, l.size, l.base = db, int64(len(b)), int64(len(b))
	return nil
}

// appendKey appends the commands that recreate key k of db as it is now.
func appendKey(b []byte, db *miniredis.RedisDB, k string) []byte {
	var err error
	switch db.Type(k) {
	case "string":
		var v string
		if v, err = db.Get(k); err == nil {
			b = appendCommand(b, "SET", k, v)
		}
	case "hash":
		var fields []string
		if fields, err = db.HKeys(k); err == nil {
			args := []string{"HSET", k}
			for _, f := range fields {
				args = append(args, f, db.HGet(k, f))
			}
			b = appendCommand(b, args...)
		}
	case "set":
		var members []string
		if members, err = db.Members(k); err == nil {
			b = appendCommand(b, append([]string{"SADD", k}, members...)...)
		}
	case "zset":
		var scores map[string]float64
		if scores, err = db.SortedSet(k); err == nil {
			args := []string{"ZADD", k}
			for _, member := range slices.Sorted(maps.Keys(scores)) {
				args = append(args, formatScore(scores[member]), member)
			}
			b = appendCommand(b, args...)
		}
	case "list":
		var items []string
		if items, err = db.List(k); err == nil {
			b = appendCommand(b, append([]string{"RPUSH", k}, items...)...)
		}
	default:
		return b
	}
	if err == nil && db.TTL(k) > 0 {
		b = appendCommand(b, "PEXPIRE", k, strconv.FormatInt(db.TTL(k).Milliseconds(), 10))
	}
	return b
}

// formatScore writes a sorted set score so that ZADD reads back the same float64.
func formatScore(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Commands the hook does not log: they change no data.
var unlogged = map[string]bool{
	"AUTH": true, "CLIENT": true, "CLUSTER": true, "COMMAND": true, "ECHO": true, "HELLO": true, "INFO": true,
	"MEMORY": true, "OBJECT": true, "PING": true, "PSUBSCRIBE": true, "PUBLISH": true, "PUBSUB": true,
	"PUNSUBSCRIBE": true, "QUIT": true, "SUBSCRIBE": true, "TIME": true, "UNSUBSCRIBE": true, "UNWATCH": true,
	"WAIT": true, "WATCH": true, "XINFO": true,
}

// Writes that may wait for another client's write: they would hold the log while the
// write they wait for waits for it. XREADGROUP waits only when it says BLOCK: without
// it, it is an ordinary write (it moves the group's cursor and pending list), which is
// how the event deliverer polls.
var blocking = map[string]bool{
	"BLMOVE": true, "BLPOP": true, "BRPOP": true, "BRPOPLPUSH": true, "BZMPOP": true, "BZPOPMAX": true,
	"BZPOPMIN": true, "XREADGROUP": true,
}

// hook sees every command before miniredis runs it. It lets reads through, and runs
// writes itself: appended to the file and synced first. Transactions are appended whole
// at their EXEC; EVALSHA is appended as the EVAL of its script, which a later stack
// knows.
func (l *redisLog) hook(p *server.Peer, cmd string, args ...string) bool {
	st := l.peer(p)
	if st == nil || st.direct {
		return false
	}
	logged := append([]string{cmd}, args...)
	switch cmd {
	case "SELECT":
		if n, err := strconv.Atoi(strings.Join(args, " ")); err == nil && n >= 0 && n < redisDatabases {
			st.db = n
		}
		return false
	case "MULTI":
		if st.multi == nil {
			st.multi = [][]string{}
		}
		return false
	case "DISCARD":
		st.multi = nil
		return false
	case "EXEC":
		queued := st.multi
		st.multi = nil
		if len(queued) == 0 {
			return false
		}
		return l.run(p, st, logged, append(append([][]string{{"MULTI"}}, queued...), logged))
	case "SCRIPT":
		if len(args) == 2 && strings.EqualFold(args[0], "LOAD") {
			l.learn(args[1])
		} else if len(args) > 0 && strings.EqualFold(args[0], "FLUSH") {
			l.mu.Lock()
			clear(l.scripts)
			l.mu.Unlock()
		}
		return false
	case "EVAL":
		if len(args) > 0 {
			l.learn(args[0])
		}
	case "EVALSHA":
		if len(args) == 0 {
			return false
		}
		l.mu.Lock()
		body, ok := l.scripts[strings.ToLower(args[0])]
		l.mu.Unlock()
		if !ok {
			return false // miniredis does not know it either: NOSCRIPT, nothing changes
		}
		logged = append([]string{"EVAL", body}, args[1:]...)
	}
	if !l.srv.IsRegisteredCommand(cmd) || l.srv.IsReadOnlyCommand(cmd) || unlogged[cmd] {
		return false
	}
	if st.multi != nil {
		st.multi = append(st.multi, logged)
		return false
	}
	if blocking[cmd] && (cmd != "XREADGROUP" || slices.ContainsFunc(args, func(a string) bool { return strings.EqualFold(a, "BLOCK") })) {
		p.WriteError(fmt.Sprintf("ERR %s may block, which the embedded Redis of trawler dev does not serve: it keeps writes in order in %s; point --redis at a real Redis", cmd, l.file))
		return true
	}
	return l.run(p, st, logged, [][]string{logged})
}

// peer is what the log follows of p, or nil for the commands of a Lua script: they
// come on peers made for the one call, which already carry miniredis's state, where a
// client connection's first command comes on a bare peer.
func (l *redisLog) peer(p *server.Peer) *redisPeer {
	l.peersMu.Lock()
	defer l.peersMu.Unlock()
	if st, ok := l.peers[p]; ok {
		return st
	}
	if p.Ctx != nil {
		return nil
	}
	st := &redisPeer{}
	l.peers[p] = st
	p.OnDisconnect(func() {
		l.peersMu.Lock()
		delete(l.peers, p)
		l.peersMu.Unlock()
	})
	return st
}

func sha1Hex(script string) string {
	sum := sha1.Sum([]byte(script))
	return hex.EncodeToString(sum[:])
}

func (l *redisLog) learn(script string) {
	l.mu.Lock()
	l.scripts[sha1Hex(script)] = script
	l.mu.Unlock()
}

// run appends cmds to the file, syncs it, then runs cmd for p; a command the file could
// not take does not run, and p hears why.
func (l *redisLog) run(p *server.Peer, st *redisPeer, cmd []string, cmds [][]string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.append(st.db, cmds); err != nil {
		p.WriteError(fmt.Sprintf("ERR not run: the embedded Redis cannot keep it in %s: %v", l.file, err))
		return true
	}
	st.direct = true
	l.srv.Dispatch(p, cmd)
	st.direct = false
	return true
}

// append writes cmds, for database db, at the end of the file and syncs it. mu is held.
func (l *redisLog) append(db int, cmds [][]string) error {
	var b []byte
	if db != l.db {
		b = appendCommand(b, "SELECT", strconv.Itoa(db))
	}
	for _, c := range cmds {
		b = appendCommand(b, c...)
	}
	_, err := l.f.Write(b)
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		_ = l.f.Truncate(l.size) // no half command for the next one to follow
		return err
	}
	l.db = db
	l.size += int64(len(b))
	return nil
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readCommand reads one RESP array of bulk strings and how many bytes it took. It
// returns io.EOF at the end and io.ErrUnexpectedEOF for a command cut short.
func readCommand(r *bufio.Reader) ([]string, int, error) {
	read := 0
	line := func(prefix byte) (int, error) {
		s, err := r.ReadString('\n')
		read += len(s)
		if err != nil {
			if read > 0 {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err // io.EOF: nothing more
		}
		if len(s) < 3 || s[0] != prefix || !strings.HasSuffix(s, "\r\n") {
			return 0, fmt.Errorf("expected %q, found %q", prefix, s)
		}
		n, err := strconv.Atoi(s[1 : len(s)-2])
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad length in %q", s)
		}
		return n, nil
	}
	n, err := line('*')
	if err != nil {
		return nil, read, err
	}
	if n == 0 {
		return nil, read, errors.New("empty command")
	}
	args := make([]string, n)
	for i := range args {
		size, err := line('$')
		if err != nil {
			return nil, read, err
		}
		buf := make([]byte, size+2)
		m, err := io.ReadFull(r, buf)
		read += m
		if err != nil {
			return nil, read, io.ErrUnexpectedEOF
		}
		if string(buf[size:]) != "\r\n" {
			return nil, read, errors.New("bulk string not ended by CRLF")
		}
		args[i] = string(buf[:size])
	}
	return args, read, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// loadRedis loads a snapshot of an earlier version (RedisFile), if there is one.
func loadRedis(m *miniredis.Miniredis, file string) error {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var keys []struct {
		Key   string             `json:"k"`
		Type  string             `json:"t"`
		TTLms int64              `json:"ttl_ms,omitempty"`
		Str   string             `json:"s,omitempty"`
		Hash  map[string]string  `json:"h,omitempty"`
		Set   []string           `json:"set,omitempty"`
		ZSet  map[string]float64 `json:"z,omitempty"`
		List  []string           `json:"l,omitempty"`
	}
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("embedded Redis: %s is not a snapshot (%v); move it away to start empty", file, err)
	}
	for _, k := range keys {
		switch k.Type {
		case "string":
			err = m.Set(k.Key, k.Str)
		case "hash":
			for f, v := range k.Hash {
				m.HSet(k.Key, f, v)
			}
		case "set":
			_, err = m.SetAdd(k.Key, k.Set...)
		case "zset":
			for member, score := range k.ZSet {
				if _, err = m.ZAdd(k.Key, score, member); err != nil {
					break
				}
			}
		case "list":
			_, err = m.Push(k.Key, k.List...)
		}
		if err != nil {
			return fmt.Errorf("embedded Redis: restore %s from %s: %w", k.Key, file, err)
		}
		if k.TTLms > 0 {
			m.SetTTL(k.Key, time.Duration(k.TTLms)*time.Millisecond)
		}
	}
	return nil
}
