package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawlerhq/trawler/internal/credentials/credtest"
	"github.com/trawlerhq/trawler/internal/devstack/redisproc"
	"github.com/trawlerhq/trawler/internal/endpoints"
	"github.com/trawlerhq/trawler/internal/quota"
)

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runRoot runs trawler with args through the root command, as a user does.
func runRoot(args ...string) error {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(&strings.Builder{})
	return root.ExecuteContext(context.Background())
}

// TestRedisPasswordCommands: `trawler quota set/show` against a redis-server with
// --requirepass, with the password in the URL, in --redis-password-file and in
// TRAWLER_REDIS_PASSWORD_FILE; a wrong password and a missing file fail with the
// setting to fix and without the password.
func TestRedisPasswordCommands(t *testing.T) {
	srv, err := redisproc.StartConfig(redisproc.Config{Password: "cmd-s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	pw := secretFile(t, "cmd-s3cret\n")

	if err := runRoot("quota", "set", "acme", "--pages", "7", "--redis", "redis://:cmd-s3cret@"+srv.Addr); err != nil {
		t.Fatal(err)
	}
	if err := runRoot("quota", "show", "acme", "--redis", srv.Addr, "--redis-password-file", pw, "--json"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRAWLER_REDIS_PASSWORD_FILE", pw)
	if err := runRoot("quota", "set", "acme", "--items", "9", "--redis", srv.Addr); err != nil {
		t.Fatal(err)
	}
	s := &Settings{Redis: srv.Addr}
	rdb, err := s.RedisClient("for the test")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	b, err := quota.New(rdb, 0).Tenant(context.Background(), "acme")
	if err != nil || b.Pages != 7 || b.Items != 9 {
		t.Fatalf("budgets %+v, %v; want pages 7, items 9", b, err)
	}
	t.Setenv("TRAWLER_REDIS_PASSWORD_FILE", "")

	err = runRoot("quota", "show", "acme", "--redis", "redis://:wrong-s3cret@"+srv.Addr)
	if err == nil || strings.Contains(err.Error(), "wrong-s3cret") || !strings.Contains(err.Error(), "--redis-password-file") {
		t.Fatalf("wrong password: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	err = runRoot("quota", "show", "acme", "--redis", srv.Addr, "--redis-password-file", missing)
	if err == nil || !strings.Contains(err.Error(), "--redis-password-file "+missing) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestAuthPrecedence: a flag beats the environment, which beats endpoints.json.
func TestAuthPrecedence(t *testing.T) {
	dir := t.TempDir()
	if err := endpoints.Write(dir, endpoints.Endpoints{Temporal: "127.0.0.1:1", KafkaSASL: "plain", KafkaUser: "from-file",
		ESUser: "es-from-file", KafkaTLS: true, RedisPasswordFile: "/file/redis"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRAWLER_KAFKA_USER", "from-env")
	t.Setenv("TRAWLER_ES_USER", "")
	s := &Settings{Data: dir}
	s.auth.redisPasswordFile = "/flag/redis"
	if err := s.Resolve(); err != nil {
		t.Fatal(err)
	}
	a := s.auth
	if a.redisPasswordFile != "/flag/redis" || a.kafkaUser != "from-env" || a.kafkaSASL != "plain" || a.esUser != "es-from-file" || !a.kafkaTLS {
		t.Fatalf("%+v", a)
	}
	t.Setenv("TRAWLER_KAFKA_TLS", "maybe")
	if err := (&Settings{Data: dir}).Resolve(); err == nil || !strings.Contains(err.Error(), "TRAWLER_KAFKA_TLS=maybe") {
		t.Fatalf("bad bool: %v", err)
	}
}

func TestStoreAuth(t *testing.T) {
	pki := credtest.New(t)
	s := &Settings{}
	s.auth = authSettings{kafkaSASL: "scram-sha-512", kafkaUser: "u", kafkaPasswordFile: secretFile(t, "kpw"), kafkaCAFile: pki.CAFile,
		esUser: "elastic", esPasswordFile: secretFile(t, "epw\r\n"), esAPIKeyFile: secretFile(t, "key=="), esCAFile: pki.CAFile}
	a, err := s.storeAuth()
	if err != nil {
		t.Fatal(err)
	}
	if a.Kafka.SASL == nil || a.Kafka.SASL.Name() != "SCRAM-SHA-512" || a.Kafka.TLS == nil || a.Kafka.TLS.RootCAs == nil {
		t.Fatalf("kafka %+v", a.Kafka)
	}
	if a.ES.Username != "elastic" || a.ES.Password != "epw" || a.ES.APIKey != "key==" || len(a.ES.CACert) == 0 {
		t.Fatalf("es %+v", a.ES)
	}
	s.auth = authSettings{esUser: "elastic"}
	if _, err := s.storeAuth(); err == nil || !strings.Contains(err.Error(), "--es-password-file") {
		t.Fatalf("user without password: %v", err)
	}
	s.auth = authSettings{kafkaCAFile: secretFile(t, "not pem")}
	if _, err := s.storeAuth(); err == nil || !strings.Contains(err.Error(), "--kafka-ca-file") {
		t.Fatalf("bad CA: %v", err)
	}
}

func TestMongoPassword(t *testing.T) {
	f := secretFile(t, "p@ss:w/rd 1\n")
	got, err := withMongoPassword("mongodb://crawler@m1:27017,m2:27017/?replicaSet=rs0", f)
	if err != nil || got != "mongodb://crawler:p%40ss%3Aw%2Frd%201@m1:27017,m2:27017/?replicaSet=rs0" {
		t.Fatalf("%s %v", got, err)
	}
	// Again, as when settings resolve twice: the same URI.
	if again, _ := withMongoPassword(got, f); again != got {
		t.Fatalf("not idempotent: %s", again)
	}
	if _, err := withMongoPassword("mongodb://m1:27017", f); err == nil || !strings.Contains(err.Error(), "needs the user") {
		t.Fatalf("no user: %v", err)
	}
}

// TestTemporalAuth: the dial options carry the mTLS certificate, the CA, the server
// name and the API key from their files.
func TestTemporalAuth(t *testing.T) {
	pki := credtest.New(t)
	s := &Settings{Temporal: "temporal.example:7233", Namespace: "crawl"}
	s.auth = authSettings{temporalCert: pki.ClientCert, temporalKey: pki.ClientKey, temporalCAFile: pki.CAFile,
		temporalServerName: "frontend.example", temporalAPIKeyFile: secretFile(t, "tk-123\n")}
	a, err := s.temporalAuth()
	if err != nil {
		t.Fatal(err)
	}
	if a.TLS == nil || len(a.TLS.Certificates) != 1 || a.TLS.RootCAs == nil || a.TLS.ServerName != "frontend.example" || a.APIKey != "tk-123" {
		t.Fatalf("%+v", a)
	}
	s.auth = authSettings{temporalCert: pki.ClientCert}
	if _, err := s.temporalAuth(); err == nil || !strings.Contains(err.Error(), "--temporal-tls-key") {
		t.Fatalf("cert without key: %v", err)
	}
	s.auth = authSettings{temporalTLS: true}
	if a, err := s.temporalAuth(); err != nil || a.TLS == nil || a.TLS.RootCAs != nil {
		t.Fatalf("--temporal-tls alone: %+v %v", a, err)
	}
	s.auth = authSettings{temporalAPIKeyFile: filepath.Join(t.TempDir(), "gone")}
	if _, err := s.temporalAuth(); err == nil || !strings.Contains(err.Error(), "--temporal-api-key-file") || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("missing key file: %v", err)
	}
}
