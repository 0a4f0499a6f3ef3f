//go:build production

package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// A production build (go build -tags production ./cmd/trawler) links none of the
// embedded servers (Temporal, Kafka, MongoDB, HBase, Elasticsearch, the demo site) nor
// the benchmark's Colly peer: a worker talks to real clusters. These commands say so.

func demoCmd(*settings) *cobra.Command {
	return fullBuildOnly("demo", "Run the demo end to end on embedded servers")
}
func devCmd(*settings) *cobra.Command {
	return fullBuildOnly("dev", "Start the embedded stack for local work")
}
func benchCmd(*settings) *cobra.Command {
	return fullBuildOnly("bench", "Benchmarks against a peer crawler")
}

func fullBuildOnly(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:    name,
		Short:  short + " (not in this production build)",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("trawler %s needs the embedded servers, which this production build leaves out; build without -tags production (go build ./cmd/trawler)", name)
		},
	}
}
