// Package nocompute stands in, at build time, for go.temporal.io/auto-scaled-workers:
// the module behind Temporal's "compute config", which lets a server start and scale
// workers on AWS Lambda, ECS, Bedrock AgentCore, Google Cloud Run or Kubernetes.
//
// go.temporal.io/server links that module into every server, so the embedded dev
// server would compile the AWS, Google Cloud and Kubernetes API clients too: about 350
// packages and close to two minutes of CPU on a newcomer's first build, for a feature
// the dev stack never offers (Trawler's workers are started by its users, and scaled
// by their own KEDA or HPA setup, see deploy/). The main module's go.mod replaces the
// module with this one.
//
// It declares what the server's worker-deployment code refers to and answers as a
// server on which no compute config was ever set: describing one finds none, deleting
// one has nothing to do, and setting or validating one is refused with a message that
// says why. Worker deployments and versioning themselves are untouched.
package nocompute
