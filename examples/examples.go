// Package examples embeds the example chain files so the binary can run them from
// anywhere (`trawler demo` uses demo.yaml).
package examples

import "embed"

// Files holds every example chain file.
//
//go:embed *.yaml
var Files embed.FS
