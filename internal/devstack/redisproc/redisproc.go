// Package redisproc runs a real redis-server (the Debian package) on a free loopback
// port, for tests and benchmarks that must measure what Redis really does: memory per
// entry, listpack encodings, Lua scripts. .ci/run installs redis-server.
package redisproc

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled says there is no redis-server to start; tests that need one skip on it.
var ErrNotInstalled = errors.New("redis-server is not installed: apt-get install -y redis-server (bash .ci/run does this)")

// Server is a running redis-server.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
	conf Config
}

// Config secures a server, for tests of clients that authenticate.
type Config struct {
	// Password is the default user's password (--requirepass).
	Password string
	// Users are extra ACL users, name to password, allowed every command and key.
	Users map[string]string
	// TLSCert, TLSKey and TLSCA (PEM files) serve TLS only, on Addr; clients need no
	// certificate of their own.
	TLSCert, TLSKey, TLSCA string
}

// Start launches redis-server without persistence in a temporary directory.
func Start() (*Server, error) { return StartConfig(Config{}) }

// StartConfig is Start with a password, ACL users or TLS.
func StartConfig(conf Config) (*Server, error) { return start(conf, 0) }

// Restart starts a stopped server again on its address, empty: a Redis that went away
// and came back.
func (s *Server) Restart() error {
	_, p, _ := net.SplitHostPort(s.Addr)
	port, _ := strconv.Atoi(p)
	n, err := start(s.conf, port)
	if err != nil {
		return err
	}
	*s = *n
	return nil
}

// start runs redis-server on port, or on a free one when port is 0.
func start(conf Config, port int, extra ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	dir, err := os.MkdirTemp("", "trawler-redis-")
	if err != nil {
		return nil, err
	}
	args := []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--protected-mode", "no"}
	if conf.Password != "" {
		args = append(args, "--requirepass", conf.Password)
	}
	for user, pw := range conf.Users {
		args = append(args, "--user", user, "on", ">"+pw, "~*", "&*", "+@all")
	}
	args = append(args, extra...)
	var tlsc *tls.Config
	if conf.TLSCert != "" {
		args[1] = "0"
		args = append(args, "--tls-port", fmt.Sprint(port), "--tls-cert-file", conf.TLSCert, "--tls-key-file", conf.TLSKey,
			"--tls-ca-cert-file", conf.TLSCA, "--tls-auth-clients", "no")
		tlsc = &tls.Config{InsecureSkipVerify: true} // only to see that it is up
	}
	cmd := exec.Command(bin, args...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if log.Len() < 4096 {
				log.WriteString(sc.Text() + "\n")
			}
		}
	}()
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, dir: dir, conf: conf}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: conf.Password, TLSConfig: tlsc})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("redis-server on %s did not answer: %v\n%s", s.Addr, err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	os.RemoveAll(filepath.Clean(s.dir))
}

// Cluster is a Redis Cluster of masters on loopback, without replicas.
type Cluster struct {
	Servers []*Server
}

// Addrs lists the masters' addresses, comma-separated, as a redis-cluster:// address
// takes them.
func (c *Cluster) Addrs() string {
	addrs := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		addrs[i] = s.Addr
	}
	return strings.Join(addrs, ",")
}

// URL is the cluster's address for --redis.
func (c *Cluster) URL() string { return "redis-cluster://" + c.Addrs() }

// Stop stops every server.
func (c *Cluster) Stop() {
	for _, s := range c.Servers {
		s.Stop()
	}
}

// StartCluster builds a cluster of n masters from plain redis-server processes, as
// `redis-cli --cluster create` would: each takes an even share of the 16384 hash slots,
// they meet, and it returns once every node reports the cluster ok.
func StartCluster(n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("a cluster needs at least one master, not %d", n)
	}
	c := &Cluster{}
	ctx := context.Background()
	for i := range n {
		s, err := start(Config{}, 0, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
		rc := redis.NewClient(&redis.Options{Addr: s.Addr})
		from, to := i*16384/n, (i+1)*16384/n-1
		err = rc.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", from, to).Err()
		if err == nil {
			err = rc.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err()
		}
		if err == nil && i > 0 {
			host, port, _ := net.SplitHostPort(c.Servers[0].Addr)
			err = rc.Do(ctx, "CLUSTER", "MEET", host, port).Err()
		}
		rc.Close()
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("form the cluster on %s: %w", s.Addr, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range c.Servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr})
		for {
			info, err := rc.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if time.Now().After(deadline) {
				rc.Close()
				c.Stop()
				return nil, fmt.Errorf("the cluster on %s did not come up: %v\n%s", c.Addrs(), err, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
		rc.Close()
	}
	return c, nil
}
