// Package deploy holds the Kubernetes manifests of a Trawler cluster (kustomize: workers
// scaled by KEDA on trawler_desired_workers, the console, settings and secrets) and the test
// that checks them against the binary and the metrics it registers. See README.md.
package deploy
