package workflows

import "go.temporal.io/sdk/workflow"

// ChangeVersion is the newest version of a guarded change this build runs, for the
// tests outside the package that stand in for the version markers.
func ChangeVersion(change string) workflow.Version {
	return gatesBefore(len(gates))[change].version
}
