package engine

import (
	"testing"
	"time"
)

// The machine readings the resource tuner steers by are fractions of the whole.
func TestProcInfoReadsTheMachine(t *testing.T) {
	p := &procInfo{}
	mem, err := p.MemoryUsage(nil)
	if err != nil || mem <= 0 || mem >= 1 {
		t.Fatalf("memory use %v, %v; want a fraction", mem, err)
	}
	if _, err := p.CpuUsage(nil); err != nil {
		t.Fatal(err)
	}
	busy := 0
	for i := 0; i < 30_000_000; i++ { // keep a core busy across the 100 ms window
		busy += i % 7
	}
	p.lastAt = p.lastAt.Add(-200 * time.Millisecond)
	cpu, err := p.CpuUsage(nil)
	if err != nil || cpu <= 0 || cpu > 1 || busy == 0 {
		t.Fatalf("cpu use %v, %v; want a fraction above 0 while a core is busy", cpu, err)
	}
	if _, err := resourceTuner(8, 0.8, 0.8); err != nil {
		t.Fatal(err)
	}
}
