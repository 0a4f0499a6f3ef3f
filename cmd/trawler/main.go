// Command trawler declares, runs and watches durable crawl chains on Temporal.
package main

import "github.com/trawlerhq/trawler/internal/cli"

func main() { cli.Main() }
