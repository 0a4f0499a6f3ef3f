package monitor

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Capacity metrics: the autoscaling signal and placement by learned needs.
var (
	// DesiredWorkers is what an autoscaler reads (a KEDA or HPA external metric): the
	// workers a task queue wants to drain its backlog within the drain target while
	// keeping up with arrivals. Every worker with --metrics exports the same value.
	DesiredWorkers = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trawler_desired_workers", Help: "Workers a task queue wants to drain its backlog within the target (autoscaling signal).",
	}, []string{"queue"})
	// DecayedBatches counts batches that ran with their need decayed (fewer pages at
	// once) because no live worker could take them whole.
	DecayedBatches = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_decayed_batches_total", Help: "Batches run at a decayed concurrency because no live worker had room for their learned needs.",
	}, []string{"task"})
	// CapacityWaits counts batches a worker passed on because its free CPU or memory
	// did not cover their needs (another worker takes them).
	CapacityWaits = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "trawler_capacity_waits_total", Help: "Batches a worker passed on for lack of free CPU or memory.",
	}, []string{"task"})
)
