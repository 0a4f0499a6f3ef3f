package engine

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	trawlercreds "github.com/trawlerhq/trawler/internal/credentials"
	"github.com/trawlerhq/trawler/internal/credentials/credtest"
)

// TestClientOptionsReachTheServer dials a gRPC server that demands a client
// certificate from the test CA and records what arrives: the SDK must present the
// certificate and send the API key as a bearer token. The server answers no Temporal
// call (Unimplemented), which the dial reports; what matters is what it saw.
func TestClientOptionsReachTheServer(t *testing.T) {
	pki := credtest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var auth, clientCN string
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(pki.ServerTLS(t, true))),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			md, _ := metadata.FromIncomingContext(stream.Context())
			mu.Lock()
			defer mu.Unlock()
			if v := md.Get("authorization"); len(v) > 0 {
				auth = v[0]
			}
			if p, ok := peer.FromContext(stream.Context()); ok {
				if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
					clientCN = ti.State.PeerCertificates[0].Subject.CommonName
				}
			}
			return nil
		}))
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	tlsc, err := trawlercreds.TLSFiles{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "localhost"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	o := ClientOptions(ln.Addr().String(), "crawl", TemporalAuth{TLS: tlsc, APIKey: "k-123"})
	if o.ConnectionOptions.TLS != tlsc || o.Credentials == nil || o.Namespace != "crawl" {
		t.Fatalf("%+v", o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := client.DialContext(ctx, o); err == nil {
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if auth != "Bearer k-123" || clientCN != "trawler-client" {
		t.Fatalf("server saw authorization %q and client certificate %q", auth, clientCN)
	}

	plain := ClientOptions("127.0.0.1:7233", "default", TemporalAuth{})
	if plain.ConnectionOptions.TLS != nil || plain.Credentials != nil || plain.ConnectionOptions.GrpcCompression == nil {
		t.Fatalf("%+v", plain)
	}
}
