// Command trawler declares, runs and watches durable crawl chains on Temporal.
package main

import (
	"github.com/trawlerhq/trawler/internal/cli"
	// dev, demo and bench: the embedded servers and the benchmarks' peer, which only
	// Trawler's own binary carries.
	_ "github.com/trawlerhq/trawler/internal/devcli"
)

func main() { cli.Main() }
