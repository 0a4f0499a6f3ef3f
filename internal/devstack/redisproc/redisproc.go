// Package redisproc runs a real redis-server (the Debian package) on a free loopback
// port, for tests and benchmarks that must measure what Redis really does: memory per
// entry, listpack encodings, Lua scripts. .ci/run installs redis-server.
package redisproc

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a running redis-server.
type Server struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
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
func StartConfig(conf Config) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed: apt-get install -y redis-server (bash .ci/run does this)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
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
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, dir: dir}
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
