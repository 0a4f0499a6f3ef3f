//go:build !production

package devcli

import "github.com/trawlerhq/trawler/internal/cli"

func init() {
	cli.AddEmbedded("demo", demoCmd)
	cli.AddEmbedded("dev", devCmd)
	cli.AddEmbedded("bench", benchCmd)
}
