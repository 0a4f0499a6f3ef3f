// Package cli is the whole trawler command as a library, for a binary of your own that
// adds your site's tasks to it. A site repository's main package is
//
//	package main
//
//	import (
//		"github.com/trawlerhq/trawler/cli"
//		"example.com/acme/acme"
//	)
//
//	func main() { cli.Main(acme.Feed, acme.Detail) }
//
// and `go build` yields trawler with its subcommands (worker, run, try, validate, status,
// export …) and acme's tasks beside the built-in ones (demo.*, generic.*,
// hackernews.*). Middlewares register as before, with crawl.RegisterMiddleware in an init
// function of a package the binary imports; so do tasks of packages that call
// crawl.Register from init. `trawler new site NAME --module PATH` writes such a
// repository.
//
// The commands that start embedded servers or a peer crawler — `dev`, `demo` and
// `bench` — are Trawler's own binary's (cmd/trawler): a site's binary links neither the
// dev stack nor Colly, and says where to find those commands. Run the stack with
// Trawler's `trawler dev --no-worker` and the site's binary as its worker.
package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/trawlerhq/trawler/crawl"
	command "github.com/trawlerhq/trawler/internal/cli"
)

// Main adds tasks to the ones every trawler binary carries and runs the trawler command
// with the process's arguments; it exits with the command's status. A task whose name
// another task already has is refused before any command runs: the message names it and
// the process exits with status 2.
func Main(tasks ...crawl.Task) {
	if err := register(tasks); err != nil {
		fmt.Fprintln(os.Stderr, "trawler:", err)
		os.Exit(2)
	}
	command.Main()
}

// Run is Main without the exit: it adds tasks, then runs the trawler command with args
// (without the program name) until it ends or ctx is done, and returns its error.
func Run(ctx context.Context, args []string, tasks ...crawl.Task) error {
	if err := register(tasks); err != nil {
		return err
	}
	return command.Run(ctx, args)
}

// register adds tasks to crawl.Default, the registry every command and the worker read,
// as a site package's init would.
func register(tasks []crawl.Task) error {
	if err := crawl.Default.Add(tasks...); err != nil {
		return fmt.Errorf("cli.Main: %w (the binary's tasks: %v)", err, crawl.Default.Names())
	}
	return nil
}
