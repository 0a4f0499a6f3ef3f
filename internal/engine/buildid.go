package engine

import (
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

var buildIDOnce sync.Once

// setBuildID names this build for Temporal cheaply. Left alone, the SDK hashes the
// whole executable (about 250 MB here) with MD5 when a worker starts: a second of CPU
// per worker process, spent exactly when a new worker should start taking work. The
// VCS revision Go stamps into the binary names the build as well; without one, the
// executable's size and modification time do.
func setBuildID() {
	buildIDOnce.Do(func() {
		id := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" {
				id = rev
				if modified == "true" {
					id += "-modified"
				}
			}
		}
		if exe, err := os.Executable(); id == "" && err == nil {
			if fi, err := os.Stat(exe); err == nil {
				id = fmt.Sprintf("%s-%d-%d", fi.Name(), fi.Size(), fi.ModTime().Unix())
			}
		}
		if id != "" {
			worker.SetBinaryChecksum(id)
		}
	})
}

// ConnectionOptions are the gRPC settings for a Temporal frontend at hostPort. The SDK
// gzips every call by default, which saves bandwidth across a network but is pure CPU
// on loopback, where `trawler dev`, the benchmarks and the tests talk to their server.
func ConnectionOptions(hostPort string) client.ConnectionOptions {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}}
	}
	return client.ConnectionOptions{}
}
