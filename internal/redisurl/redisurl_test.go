package redisurl_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/internal/credentials"
	"github.com/trawlerhq/trawler/internal/credentials/credtest"
	"github.com/trawlerhq/trawler/internal/dedup"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/redisurl"
)

func TestParseForms(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		kind  redisurl.Kind
		check func(t *testing.T, p *redisurl.Target)
	}{
		{"127.0.0.1:6379", redisurl.Single, func(t *testing.T, p *redisurl.Target) {
			if p.Single.Addr != "127.0.0.1:6379" || p.Single.Password != "" {
				t.Errorf("%+v", p.Single)
			}
		}},
		{"redis://:pw@h:6380/2", redisurl.Single, func(t *testing.T, p *redisurl.Target) {
			if p.Single.Addr != "h:6380" || p.Single.Password != "pw" || p.Single.DB != 2 || p.Single.TLSConfig != nil {
				t.Errorf("%+v", p.Single)
			}
		}},
		{"rediss://bob:pw@h", redisurl.Single, func(t *testing.T, p *redisurl.Target) {
			if p.Single.Addr != "h:6379" || p.Single.Username != "bob" || p.Single.TLSConfig == nil {
				t.Errorf("%+v", p.Single)
			}
		}},
		{"redis-sentinel://bob:pw@s1:26379,s2:26380/mymaster?db=3", redisurl.Sentinel, func(t *testing.T, p *redisurl.Target) {
			f := p.Failover
			if f.MasterName != "mymaster" || f.DB != 3 || f.Username != "bob" || f.Password != "pw" || f.SentinelPassword != "" ||
				strings.Join(f.SentinelAddrs, ",") != "s1:26379,s2:26380" || f.TLSConfig != nil {
				t.Errorf("%+v", f)
			}
		}},
		{"rediss-sentinel://:pw@s1:26379/m?sentinel_auth=1", redisurl.Sentinel, func(t *testing.T, p *redisurl.Target) {
			f := p.Failover
			if f.SentinelPassword != "pw" || f.TLSConfig == nil || f.TLSConfig.ServerName != "" {
				t.Errorf("%+v", f)
			}
		}},
		{"redis-cluster://:pw@c1:6379,c2:6379,c3:6379?dial_timeout=2s", redisurl.Cluster, func(t *testing.T, p *redisurl.Target) {
			c := p.Cluster
			if strings.Join(c.Addrs, ",") != "c1:6379,c2:6379,c3:6379" || c.Password != "pw" || c.DialTimeout != 2*time.Second || c.TLSConfig != nil {
				t.Errorf("%+v", c)
			}
		}},
		{"rediss-cluster://c1:6379", redisurl.Cluster, func(t *testing.T, p *redisurl.Target) {
			if p.Cluster.TLSConfig == nil {
				t.Errorf("%+v", p.Cluster)
			}
		}},
	} {
		p, err := redisurl.Parse(tc.addr, redisurl.Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.addr, err)
			continue
		}
		if p.Kind != tc.kind {
			t.Errorf("%s: kind %d, want %d", tc.addr, p.Kind, tc.kind)
			continue
		}
		tc.check(t, p)
	}

	// A password from a file replaces the address's, in every form.
	p, err := redisurl.Parse("redis-cluster://c1:6379,c2:6379", redisurl.Options{Password: "filepw"})
	if err != nil || p.Cluster.Password != "filepw" {
		t.Errorf("cluster password file: %v %+v", err, p)
	}
	p, err = redisurl.Parse("redis://:urlpw@h:1", redisurl.Options{Password: "filepw"})
	if err != nil || p.Single.Password != "filepw" {
		t.Errorf("url password replaced: %v %+v", err, p)
	}
}

func TestParseErrorsMaskThePassword(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"", "no Redis address"},
		{"h1:6379:6380", "want host:port"},
		{"bob:s3cret@h:6379", "--redis-password-file"},
		{"redis://:s3cret@h:6379/x/y", "invalid URL path"},
		{"redis-sentinel://:s3cret@s1:26379", "name the master"},
		{"redis-sentinel://:s3cret@s1:26379/m?sentinel_auth=maybe", "sentinel_auth=maybe"},
		{"redis-cluster://:s3cret@c1:6379/2", "only database 0"},
		{"redis-cluster://:s3cret@c1,c2:6379", `"c1" is not host:port`},
		{"redis-cluster://:s3cret@c1:6379?bogus=1", "bogus"},
		{"memcache://:s3cret@h:1", `unknown scheme "memcache"`},
	} {
		_, err := redisurl.Parse(tc.addr, redisurl.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.addr, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error shows the password: %v", tc.addr, err)
		}
	}
	if _, err := redisurl.Parse("redis://h:1", redisurl.Options{CAFile: "/x.pem"}); err == nil || !strings.Contains(err.Error(), "--redis-ca-file is for TLS") {
		t.Errorf("CA file without TLS: %v", err)
	}
}

// TestPasswordOnARealServer runs redis-server with a password and an ACL user and
// opens it the ways a worker does: URL, password file, ACL user; a wrong password
// gets an error that says how to fix it and never shows the password.
func TestPasswordOnARealServer(t *testing.T) {
	srv, err := redisproc.StartConfig(redisproc.Config{Password: "top-s3cret", Users: map[string]string{"crawler": "acl-s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pwFile := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pwFile, []byte("top-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	filePW, err := credentials.Secret("--redis-password-file", pwFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, addr string
		o          redisurl.Options
	}{
		{"url", "redis://:top-s3cret@" + srv.Addr + "/1", redisurl.Options{}},
		{"password file with host:port", srv.Addr, redisurl.Options{Password: filePW}},
		{"password file with url", "redis://" + srv.Addr, redisurl.Options{Password: filePW}},
		{"acl user", "redis://crawler:acl-s3cret@" + srv.Addr, redisurl.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redisurl.Open(tc.addr, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := redisurl.Ping(ctx, c, tc.addr); err != nil {
				t.Fatal(err)
			}
			// What a worker does first with it: dedup loads its scripts and checks items.
			d, err := dedup.Open(ctx, c, dedup.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Check(ctx, "ns-"+strings.ReplaceAll(tc.name, " ", "-"), []dedup.Entry{{Key: "a", Content: "h"}}); err != nil {
				t.Fatal(err)
			}
		})
	}

	for _, addr := range []string{"redis://:wrong-s3cret@" + srv.Addr, srv.Addr, "redis://crawler:wrong-s3cret@" + srv.Addr} {
		c, err := redisurl.Open(addr, redisurl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = redisurl.Ping(ctx, c, addr)
		c.Close()
		if err == nil {
			t.Fatalf("%s: a wrong password was taken", addr)
		}
		msg := err.Error()
		if strings.Contains(msg, "wrong-s3cret") || strings.Contains(msg, "top-s3cret") {
			t.Errorf("error shows a password: %s", msg)
		}
		if !strings.Contains(msg, "--redis-password-file") || !strings.Contains(msg, srv.Addr) {
			t.Errorf("error does not say what to fix: %s", msg)
		}
	}

	if _, err := credentials.Secret("--redis-password-file", filepath.Join(t.TempDir(), "missing")); err == nil ||
		!strings.Contains(err.Error(), "--redis-password-file") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}

// TestTLS runs redis-server serving TLS only and opens it with rediss:// and the CA
// file; without the CA the certificate is refused.
func TestTLS(t *testing.T) {
	pki := credtest.New(t)
	srv, err := redisproc.StartConfig(redisproc.Config{Password: "tls-s3cret", TLSCert: pki.ServerCert, TLSKey: pki.ServerKey, TLSCA: pki.CAFile})
	if err != nil {
		t.Skipf("redis-server cannot serve TLS here: %v", err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := "rediss://:tls-s3cret@" + srv.Addr
	c, err := redisurl.Open(addr, redisurl.Options{CAFile: pki.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := redisurl.Ping(ctx, c, addr); err != nil {
		t.Fatal(err)
	}
	untrusted, err := redisurl.Open(addr, redisurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusted.Close()
	if err := redisurl.Ping(ctx, untrusted, addr); err == nil || strings.Contains(err.Error(), "tls-s3cret") {
		t.Fatalf("a certificate from an unknown CA: %v", err)
	}
}
