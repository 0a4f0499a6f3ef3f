package engine

import (
	"crypto/tls"

	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/tracing"
)

// TemporalAuth secures the connection to a Temporal cluster: TLS (a CA to trust, a
// client certificate for mutual TLS) and an API key, as Temporal Cloud and clusters
// with an authorizer ask for. The zero value is a plaintext connection without
// credentials, what the embedded server takes.
type TemporalAuth struct {
	TLS    *tls.Config // nil: plaintext (unless APIKey is set)
	APIKey string      // sent as "Authorization: Bearer …" on every call; turns TLS on with the system roots when TLS is nil
}

// ClientOptions are the options every Trawler process dials Temporal with.
func ClientOptions(hostPort, namespace string, auth TemporalAuth) client.Options {
	o := client.Options{HostPort: hostPort, Namespace: namespace, ConnectionOptions: ConnectionOptions(hostPort),
		// With tracing on, workflows and activities carry the trace (workers built on this
		// client inherit it).
		Interceptors: tracing.Interceptors()}
	o.ConnectionOptions.TLS = auth.TLS
	if auth.APIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(auth.APIKey)
	}
	return o
}
