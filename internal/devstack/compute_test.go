package devstack

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	computepb "go.temporal.io/api/compute/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The embedded server is built without Temporal's worker-autoscaling module (go.mod
// replaces it with internal/devstack/nocompute). Worker deployments and versioning must
// still work, describing a version must find no compute config, and setting one must
// be refused with a message that says why.
func TestWorkerDeploymentsWorkWithoutComputeConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := StartTemporal(ctx, Options{DataDir: t.TempDir(), UIPort: -1, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer st.Stop()
	c, err := client.Dial(client.Options{HostPort: st.Endpoints.Temporal, Namespace: st.Endpoints.Namespace, Logger: quietSDKLogger()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()

	version := worker.WorkerDeploymentVersion{DeploymentName: "crawlers", BuildID: "b1"}
	w := worker.New(c, "versioned", worker.Options{DeploymentOptions: worker.DeploymentOptions{
		UseVersioning: true, Version: version, DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
	}})
	w.RegisterWorkflowWithOptions(func(workflow.Context) (string, error) { return "done", nil }, workflow.RegisterOptions{Name: "hello"})
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	defer w.Stop()

	handle := c.WorkerDeploymentClient().GetHandle("crawlers")
	var desc client.WorkerDeploymentVersionDescription
	for {
		desc, err = handle.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: "b1"})
		if err == nil {
			break
		}
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) || ctx.Err() != nil {
			t.Fatalf("describe version b1: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := desc.Info.Version.BuildID; got != "b1" {
		t.Fatalf("described build %q, want b1", got)
	}
	if _, err := handle.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: "b1"}); err != nil {
		t.Fatalf("set current version: %v", err)
	}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "versioned"}, "hello")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "done" {
		t.Fatalf("versioned workflow: %q, %v", out, err)
	}

	_, err = c.WorkflowService().UpdateWorkerDeploymentVersionComputeConfig(ctx, &workflowservice.UpdateWorkerDeploymentVersionComputeConfigRequest{
		Namespace:         st.Endpoints.Namespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: "crawlers", BuildId: "b1"},
		ComputeConfigScalingGroups: map[string]*computepb.ComputeConfigScalingGroupUpdate{
			"default": {ScalingGroup: &computepb.ComputeConfigScalingGroup{Provider: &computepb.ComputeProvider{Type: "aws-lambda"}}},
		},
	})
	var invalid *serviceerror.InvalidArgument
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "not available on Trawler's embedded Temporal server") {
		t.Fatalf("setting a compute config: got %v, want InvalidArgument saying it is not available", err)
	}
}
