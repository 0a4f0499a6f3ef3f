// The embedded Temporal server's worker controller, without compute providers: see doc.go.
module go.temporal.io/auto-scaled-workers

go 1.26

require (
	go.temporal.io/api v1.63.5
	go.temporal.io/server v1.32.1
	go.uber.org/fx v1.24.0
	google.golang.org/protobuf v1.36.11
)
