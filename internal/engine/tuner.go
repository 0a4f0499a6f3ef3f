package engine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/worker"
)

// resourceTuner gives a worker as many batch slots as its machine's CPU and memory
// allow (the SDK's resource-based tuner), between 1 and maxBatches: a batch of a
// parse-heavy site takes a slot only while the CPU has room, a batch of a slow site
// many more. Workflow tasks keep a fixed number of slots.
func resourceTuner(maxBatches int, targetCPU, targetMem float64) (worker.WorkerTuner, error) {
	opts := worker.DefaultResourceControllerOptions()
	opts.CpuTargetPercent, opts.MemTargetPercent = targetCPU, targetMem
	opts.InfoSupplier = &procInfo{}
	ctl := worker.NewResourceController(opts)
	acts, err := worker.NewResourceBasedSlotSupplier(ctl, worker.ResourceBasedSlotSupplierOptions{
		MinSlots: 1, MaxSlots: maxBatches, RampThrottle: 50 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	fixed := func(n int) worker.SlotSupplier {
		s, _ := worker.NewFixedSizeSlotSupplier(n)
		return s
	}
	return worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier: fixed(100), ActivitySlotSupplier: acts,
		LocalActivitySlotSupplier: fixed(10), NexusSlotSupplier: fixed(10), SessionActivitySlotSupplier: fixed(10),
	})
}

// procInfo reads the machine's CPU and memory use from /proc (Linux). CPU use is
// measured between calls, over at least 100 ms.
type procInfo struct {
	mu                  sync.Mutex
	lastBusy, lastTotal uint64
	lastAt              time.Time
	cpu                 float64
}

func (p *procInfo) MemoryUsage(*worker.SysInfoContext) (float64, error) {
	total, avail, err := meminfo()
	if err != nil {
		return 0, fmt.Errorf("memory use: %w", err)
	}
	return (total - avail) / total, nil
}

// meminfo reads the machine's total and available memory (kB) from /proc/meminfo.
func meminfo() (total, avail float64, err error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	vals := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) > 0 {
			vals[name], _ = strconv.ParseFloat(fields[0], 64)
		}
	}
	if vals["MemTotal"] <= 0 {
		return 0, 0, errors.New("/proc/meminfo has no MemTotal")
	}
	return vals["MemTotal"], vals["MemAvailable"], nil
}

func (p *procInfo) CpuUsage(*worker.SysInfoContext) (float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.lastAt) < 100*time.Millisecond {
		return p.cpu, nil
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("cpu use: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, errors.New("cpu use: unexpected /proc/stat")
	}
	var total, idle uint64
	for i, f := range fields[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	busy := total - idle
	if p.lastTotal > 0 && total > p.lastTotal {
		p.cpu = float64(busy-p.lastBusy) / float64(total-p.lastTotal)
	}
	p.lastBusy, p.lastTotal, p.lastAt = busy, total, time.Now()
	return p.cpu, nil
}
