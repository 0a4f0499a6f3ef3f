package engine

import (
	"slices"
	"testing"
	"time"

	"github.com/trawlerhq/trawler/internal/capacity"
	"github.com/trawlerhq/trawler/internal/monitor"
)

// The desired workers of a queue: its backlog over the drain target at the rate a
// typical worker of the queue does the task (by its learned needs), plus arrivals
// that lasted two looks; a one-time step counts as backlog only.
func TestPlanCapacity(t *testing.T) {
	now := time.Now()
	four := &capacity.Resources{CPU: 4, MemMB: 4096}
	look := func(at time.Time, backlog int) *Overview {
		return &Overview{
			taskLoads: []TaskLoad{{Queue: "q", Task: "a.feed", Queued: backlog, Backlog: backlog, Rate: -1, At: at}},
			Tasks:     []monitor.TaskNeeds{{Task: "a.feed", MSPerPage: 100, CPUMSPage: 10, KBPerPage: 10}},
			Workers: []monitor.WorkerBeat{{Identity: "w1", TaskQueue: "q", Capacity: four, Slots: 4},
				{Identity: "w2", TaskQueue: "q", Capacity: four, Slots: 4}, {Identity: "gone", TaskQueue: "q", Capacity: four, AgeS: 60}},
			Chains: []ChainLoad{{Retrying: []string{"batch feed/3, attempt 2: " + capacityWaitMark + "a.feed needs …"}}},
		}
	}
	target := capacity.Target{Drain: 10 * time.Minute, Min: 1}
	// A batch needs 16 × 10/100 = 1.6 cores: a 4-core worker runs 2 batches of 16 pages
	// of 100 ms, 320 pages/s. 600,000 over 600 s is 1,000 pages/s: 3.125 workers.
	ov := look(now, 600000)
	ov.PlanCapacity(target)
	q := ov.Capacity.Queues[0]
	if q.Desired != 4 || q.Workers != 2 || q.Backlog != 600000 || q.Tasks[0].PerWorker != 320 {
		t.Errorf("one look: %+v; want 4 workers wanted, 2 live, 320 pages/s a worker", q)
	}
	tp := ov.Capacity.Tasks[0]
	if tp.Need.CPU != 1.6 || !slices.Equal(tp.Qualify, []string{"w1", "w2"}) || tp.DecaySteps != 0 || tp.Waiting != 1 {
		t.Errorf("task placement %+v; want 1.6 cores, w1 and w2, no decay, 1 batch waiting", tp)
	}
	// The backlog grew by 30,000 in the last 15 s only: a step, still 4 workers.
	step := look(now, 600000)
	step.PlanCapacity(target, look(now.Add(-15*time.Second), 570000), look(now.Add(-30*time.Second), 570000))
	if d := step.Capacity.Queues[0].Desired; d != 4 {
		t.Errorf("after a step: %d workers wanted, want 4 (a step is backlog, not a flow)", d)
	}
	// It grew by 30,000 in each of the last two looks: 2,000 pages/s arrive for good,
	// (2,000 + 1,000) / 320 = 9.4 workers.
	flow := look(now, 600000)
	flow.PlanCapacity(target, look(now.Add(-15*time.Second), 570000), look(now.Add(-30*time.Second), 540000))
	if d := flow.Capacity.Queues[0].Desired; d != 10 {
		t.Errorf("under a lasting flow: %d workers wanted, want 10", d)
	}
}
