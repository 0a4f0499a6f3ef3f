// Package devcli holds the commands of Trawler's own binary that start embedded servers
// or the benchmarks' peer crawler: `dev`, `demo` and `bench`. cmd/trawler imports it, so
// `go run ./cmd/trawler demo` works on a fresh machine; the public cli package does not,
// so a site's binary links neither the dev stack nor Colly (and needs none of their
// modules), and neither does a production build (-tags production), in which this
// package registers nothing.
package devcli
