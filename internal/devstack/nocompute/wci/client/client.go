// Package client is the server's handle on worker controllers. Here no controller
// exists, and none can be made: see the module's doc.go.
package client

import (
	"context"

	deploymentpb "go.temporal.io/api/deployment/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/auto-scaled-workers/wci/workflow/iface"
	"go.temporal.io/server/common/namespace"
	"go.uber.org/fx"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Client is what the server's worker-deployment code asks of worker controllers.
type Client interface {
	UpdateTaskQueueName(ctx context.Context, newTaskQueueName string) error
	WorkerControllerInstanceExists(ctx context.Context, ns *namespace.Namespace, version *deploymentpb.WorkerDeploymentVersion) (bool, error)
	DescribeWorkerControllerInstance(ctx context.Context, ns *namespace.Namespace, version *deploymentpb.WorkerDeploymentVersion) (*iface.QueryDescribeWorkerControllerInstanceResponse, []byte, error)
	ListWorkerControllerInstances(ctx context.Context, ns *namespace.Namespace, pageSize int, nextPageToken []byte) ([]*WorkerControllerInstanceSummary, []byte, error)
	UpdateWorkerControllerInstance(ctx context.Context, ns *namespace.Namespace, version *deploymentpb.WorkerDeploymentVersion, conflictToken []byte, identity string, upsertScalingGroups map[string]iface.ScalingGroupSpecUpdate, removeScalingGroups []string) (*iface.UpdateWorkerControllerInstanceResponse, error)
	ValidateWorkerControllerInstanceSpec(ctx context.Context, ns *namespace.Namespace, version *deploymentpb.WorkerDeploymentVersion, identity string, upsertScalingGroups map[string]iface.ScalingGroupSpecUpdate, removeScalingGroups []string) error
	DeleteWorkerControllerInstance(ctx context.Context, ns *namespace.Namespace, version *deploymentpb.WorkerDeploymentVersion, identity string) error
	SignalTaskAddEvent(ctx context.Context, ns *namespace.Namespace, version *deploymentpb.WorkerDeploymentVersion, request *iface.SignalTaskAddRequest) error
}

// WorkerControllerInstanceSummary is one controller in a listing.
type WorkerControllerInstanceSummary struct {
	DeploymentName string
	BuildId        string
	CreateTime     *timestamppb.Timestamp
}

// Module provides the Client to the server's dependency graph.
var Module = fx.Options(fx.Provide(func() Client { return none{} }))

// refused is the answer to setting a compute config. InvalidArgument makes the server
// report it to the caller at once instead of retrying.
const refused = "compute config (workers started and scaled by the Temporal server) is not available on Trawler's embedded Temporal server; start workers yourself (trawler worker) or use a Temporal cluster that offers it"

// none answers as a server on which no compute config was ever set.
type none struct{}

func (none) UpdateTaskQueueName(context.Context, string) error { return nil }

func (none) WorkerControllerInstanceExists(context.Context, *namespace.Namespace, *deploymentpb.WorkerDeploymentVersion) (bool, error) {
	return false, nil
}

func (none) DescribeWorkerControllerInstance(_ context.Context, _ *namespace.Namespace, v *deploymentpb.WorkerDeploymentVersion) (*iface.QueryDescribeWorkerControllerInstanceResponse, []byte, error) {
	return nil, nil, serviceerror.NewNotFoundf("no compute config for version %s of deployment %s", v.GetBuildId(), v.GetDeploymentName())
}

func (none) ListWorkerControllerInstances(context.Context, *namespace.Namespace, int, []byte) ([]*WorkerControllerInstanceSummary, []byte, error) {
	return nil, nil, nil
}

func (none) UpdateWorkerControllerInstance(context.Context, *namespace.Namespace, *deploymentpb.WorkerDeploymentVersion, []byte, string, map[string]iface.ScalingGroupSpecUpdate, []string) (*iface.UpdateWorkerControllerInstanceResponse, error) {
	return nil, serviceerror.NewInvalidArgument(refused)
}

func (none) ValidateWorkerControllerInstanceSpec(context.Context, *namespace.Namespace, *deploymentpb.WorkerDeploymentVersion, string, map[string]iface.ScalingGroupSpecUpdate, []string) error {
	return serviceerror.NewInvalidArgument(refused)
}

func (none) DeleteWorkerControllerInstance(context.Context, *namespace.Namespace, *deploymentpb.WorkerDeploymentVersion, string) error {
	return nil
}

func (none) SignalTaskAddEvent(context.Context, *namespace.Namespace, *deploymentpb.WorkerDeploymentVersion, *iface.SignalTaskAddRequest) error {
	return nil
}
