package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/trawlerhq/trawler/internal/credentials"
	"github.com/trawlerhq/trawler/internal/credentials/credtest"
	"github.com/trawlerhq/trawler/internal/storage/kafka"
)

// TestSASL writes through a real SASL handshake (kfake speaks PLAIN and SCRAM as a
// broker does) and reads the items back over the same mechanism; SCRAM-SHA-512 runs
// over TLS too. A wrong password fails the write without showing the password.
func TestSASL(t *testing.T) {
	pki := credtest.New(t)
	for _, tc := range []struct {
		name, kfakeName string
		tls             bool
	}{
		{kafka.SASLPlain, "PLAIN", false},
		{kafka.SASLScramSHA256, "SCRAM-SHA-256", false},
		{kafka.SASLScramSHA512, "SCRAM-SHA-512", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(tc.kfakeName, "crawler", "s3cret-pw")}
			var auth kafka.Auth
			if tc.tls {
				opts = append(opts, kfake.TLS(pki.ServerTLS(t, false)))
				c, err := credentials.TLSFiles{CAFile: pki.CAFile, CAFlag: "--kafka-ca-file"}.Config()
				if err != nil {
					t.Fatal(err)
				}
				auth.TLS = c
			}
			cluster, err := kfake.NewCluster(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			brokers := cluster.ListenAddrs()

			auth.SASL, err = kafka.Mechanism(tc.name, "crawler", "s3cret-pw")
			if err != nil {
				t.Fatal(err)
			}
			s, err := kafka.Open(kafka.Config{Brokers: brokers, Auth: auth})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Write(ctx, items("run-sasl", 5, "demo.story")); err != nil {
				t.Fatal(err)
			}
			n, err := s.Count(ctx, "run-sasl")
			if err != nil || n != 5 {
				t.Fatalf("count = %d, %v; want 5", n, err)
			}

			wrong := auth
			wrong.SASL, _ = kafka.Mechanism(tc.name, "crawler", "not-the-pw")
			bad, err := kafka.Open(kafka.Config{Brokers: brokers, Auth: wrong, WriteTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			err = bad.Write(ctx, items("run-bad", 1, "demo.story"))
			if err == nil {
				t.Fatal("a wrong password wrote")
			}
			if strings.Contains(err.Error(), "not-the-pw") {
				t.Fatalf("error shows the password: %v", err)
			}
			t.Logf("wrong password: %v", err)
		})
	}
}

func TestMechanismErrors(t *testing.T) {
	for _, tc := range []struct{ name, user, pw, want string }{
		{"", "u", "", "without --kafka-sasl"},
		{"plain", "", "pw", "needs --kafka-user"},
		{"gssapi", "u", "pw", "want plain, scram-sha-256 or scram-sha-512"},
	} {
		_, err := kafka.Mechanism(tc.name, tc.user, tc.pw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Mechanism(%q, %q) = %v, want %q", tc.name, tc.user, err, tc.want)
		}
	}
	if m, err := kafka.Mechanism("", "", ""); m != nil || err != nil {
		t.Errorf("no SASL = %v, %v", m, err)
	}
}
