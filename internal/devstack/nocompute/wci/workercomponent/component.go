// Package workercomponent would register the controllers' workflows on the server's
// per-namespace worker. With no controllers there is nothing to register.
package workercomponent

import "go.uber.org/fx"

// Module adds nothing to the server's dependency graph.
var Module = fx.Options()
