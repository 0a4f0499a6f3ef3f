// Package iface declares the worker-controller values that the Temporal server's
// worker-deployment code converts to and from its compute-config protos.
package iface

import (
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type (
	// ComputeProviderType names where workers would be started (aws-lambda, k8s, …).
	ComputeProviderType string
	// ScalingAlgorithmType names how their number would be chosen.
	ScalingAlgorithmType string

	// ComputeProviderSpec is one provider and its settings.
	ComputeProviderSpec struct {
		ProviderType  ComputeProviderType `json:"provider_type,omitempty"`
		Config        *commonpb.Payload   `json:"config,omitempty"`
		NexusEndpoint string              `json:"nexus_endpoint,omitempty"`
	}

	// ScalingAlgorithmSpec is one scaling algorithm and its settings.
	ScalingAlgorithmSpec struct {
		ScalingAlgorithm ScalingAlgorithmType `json:"scaling_algorithm,omitempty"`
		Config           *commonpb.Payload    `json:"config,omitempty"`
	}

	// ScalingGroupSpec applies a provider and a scaler to some task queue types.
	ScalingGroupSpec struct {
		TaskTypes []enumspb.TaskQueueType `json:"task_types"`
		Compute   ComputeProviderSpec     `json:"compute"`
		Scaling   *ScalingAlgorithmSpec   `json:"scaling,omitempty"`
	}

	// ScalingGroupSpecUpdate is a change to one scaling group.
	ScalingGroupSpecUpdate struct {
		Spec       ScalingGroupSpec `json:"spec"`
		UpdateMask []string         `json:"update_mask"`
	}

	// WorkerControllerInstanceSpec is a deployment version's compute config.
	WorkerControllerInstanceSpec struct {
		ScalingGroupSpecs map[string]ScalingGroupSpec `json:"scaling_group_specs"`
	}

	// QueryDescribeWorkerControllerInstanceResponse describes a version's compute config.
	QueryDescribeWorkerControllerInstanceResponse struct {
		DeploymentName       string                        `json:"deployment_name,omitempty"`
		DeploymentBuildID    string                        `json:"deployment_build_id,omitempty"`
		CreateTime           *timestamppb.Timestamp        `json:"create_time,omitempty"`
		Spec                 *WorkerControllerInstanceSpec `json:"spec,omitempty"`
		ConflictToken        []byte                        `json:"conflict_token,omitempty"`
		LastModifierIdentity string                        `json:"last_modifier_identity,omitempty"`
		ValidationStatus     *ValidationStatus             `json:"validation_status,omitempty"`
	}

	// UpdateWorkerControllerInstanceResponse is the compute config after a change.
	UpdateWorkerControllerInstanceResponse struct {
		Spec *WorkerControllerInstanceSpec `json:"spec,omitempty"`
	}

	// ValidationResult is the outcome of checking a provider's settings.
	ValidationResult string

	// ValidationStatus is the last check of a version's compute config. The server's
	// version workflow receives it as a signal payload, so its JSON names matter.
	ValidationStatus struct {
		LastValidationTime time.Time        `json:"last_validation_time"`
		Status             ValidationResult `json:"status"`
		ErrMessage         string           `json:"err_message,omitempty"`
	}

	// SignalTaskAddRequest tells a controller that a task waits on a queue.
	SignalTaskAddRequest struct {
		TaskQueueName string                `json:"task_queue_name"`
		TaskQueueType enumspb.TaskQueueType `json:"task_queue_type"`
	}
)

// The two outcomes of a validation.
const (
	ValidationResultSuccess ValidationResult = "success"
	ValidationResultFailed  ValidationResult = "failed"
)
