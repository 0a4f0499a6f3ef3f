package capacity

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The simulation: one machine cannot host a fleet, so a deterministic model of one
// shows placement and the scaling signal over time. Time moves in ticks of 100 ms;
// every Period ticks the autoscaler samples the queue and the fleet follows its signal
// one period later (as KEDA polling a metric would).

// Tick is the simulation's step of time.
const Tick = 100 * time.Millisecond

// SimTask is a task of the simulation: its learned cost, its batches' size and
// concurrency, and how many batches of it arrive per period (by period).
type SimTask struct {
	Name        string
	Cost        Cost
	Pages       int // inputs per batch
	Concurrency int
	Arrivals    func(period int) int // batches arriving over a period, spread evenly
}

// SimWorker is a kind of worker: its capacity and batch slots.
type SimWorker struct {
	Name  string
	Cap   Resources
	Slots int
}

// Scenario is a whole simulation.
type Scenario struct {
	Tasks []SimTask
	// Fixed are workers that are always there, except while Gone says they are away.
	Fixed []SimWorker
	Gone  func(worker string, period int) bool
	// Scaled is the kind of worker the autoscaler adds: the fleet holds
	// max(desired - len(Fixed), 0) of them.
	Scaled  SimWorker
	Target  Target
	Period  int // ticks per sampling period
	Periods int
	// Events name the periods where the load steps (for the settle measure).
	Events map[int]string
}

// Row is the state at the end of one sampling period.
type Row struct {
	Period  int
	Backlog map[string]int // batches waiting or running, by task
	Running map[string]int // batches running, by worker name
	Decayed int            // batches that ran decayed in the period
	Waiting int            // batches waiting at the end of the period
	Desired int            // the signal sampled now
	Fleet   int            // workers live during the period
	Event   string
}

// Result is a simulation's rows and what it proves.
type Result struct {
	Rows []Row
	// OverMemory counts ticks where some worker held more than its memory.
	OverMemory int
	// SmallByTask counts batches the smallest fixed worker ran, by task.
	SmallByTask map[string]int
	// Done and MaxWait are batches finished and the longest wait (ticks) of any batch,
	// by task.
	Done, MaxWait map[string]int
	// Settle is the periods the signal took to settle after each event (by period).
	Settle map[int]int
}

type simBatch struct {
	task    int
	arrived int
	left    int // ticks left when running
	need    Resources
	steps   int
}

type simNode struct {
	SimWorker
	used    Resources
	running []*simBatch
	ran     map[string]int
}

// Simulate runs a scenario. It is deterministic: the same scenario gives the same rows.
func Simulate(sc Scenario) Result {
	res := Result{SmallByTask: map[string]int{}, Done: map[string]int{}, MaxWait: map[string]int{}, Settle: map[int]int{}}
	var waiting []*simBatch
	var scaled []*simNode
	fixed := make([]*simNode, len(sc.Fixed))
	for i, w := range sc.Fixed {
		fixed[i] = &simNode{SimWorker: w, ran: map[string]int{}}
	}
	smallest := 0
	for i, w := range sc.Fixed {
		if w.Cap.MemMB < sc.Fixed[smallest].Cap.MemMB {
			smallest = i
		}
	}
	desired := len(sc.Fixed)
	inflow := make([][2]float64, len(sc.Tasks)) // per task: last period, the one before
	arrivedNow := make([]int, len(sc.Tasks))
	doneNow := make([]int, len(sc.Tasks))
	owed := make([]float64, len(sc.Tasks))
	for p := 0; p < sc.Periods; p++ {
		// The fleet follows the signal sampled at the end of the last period.
		want := max(desired-len(sc.Fixed), 0)
		for len(scaled) < want {
			scaled = append(scaled, &simNode{SimWorker: sc.Scaled, ran: map[string]int{}})
			scaled[len(scaled)-1].Name = fmt.Sprintf("%s-%d", sc.Scaled.Name, len(scaled))
		}
		// Scaling down removes idle workers only (a real scale-down lets batches finish).
		for len(scaled) > want && len(scaled[len(scaled)-1].running) == 0 {
			scaled = scaled[:len(scaled)-1]
		}
		var live []*simNode
		for _, n := range fixed {
			if sc.Gone == nil || !sc.Gone(n.Name, p) {
				live = append(live, n)
			} else if len(n.running) > 0 {
				// A worker that leaves loses its batches; Temporal runs them again elsewhere.
				for _, b := range n.running {
					b.left = 0
					waiting = append(waiting, b)
				}
				n.running, n.used = nil, Resources{}
			}
		}
		live = append(live, scaled...)
		wholes := make([]Resources, len(live))
		for i, n := range live {
			wholes[i] = n.Cap
		}
		row := Row{Period: p, Running: map[string]int{}, Backlog: map[string]int{}, Fleet: len(live), Event: sc.Events[p]}
		clear(arrivedNow)
		clear(doneNow)
		for tick := p * sc.Period; tick < (p+1)*sc.Period; tick++ {
			// Arrivals, spread evenly over the period.
			for ti, t := range sc.Tasks {
				owed[ti] += float64(t.Arrivals(p)) / float64(sc.Period)
				for owed[ti] >= 1-1e-9 {
					owed[ti]--
					waiting = append(waiting, &simBatch{task: ti, arrived: tick})
					arrivedNow[ti]++
				}
			}
			// Running batches advance; finished ones free their worker.
			for _, n := range live {
				kept := n.running[:0]
				for _, b := range n.running {
					if b.left--; b.left > 0 {
						kept = append(kept, b)
						continue
					}
					n.used = n.used.Sub(b.need)
					res.Done[sc.Tasks[b.task].Name]++
					doneNow[b.task]++
				}
				n.running = kept
			}
			waiting = place(sc, waiting, live, wholes, tick, fixed[smallest], &res, &row)
			for _, n := range live {
				if !n.Cap.Covers(n.used) {
					res.OverMemory++
				}
			}
		}
		// Sample: backlog, arrivals and the signal.
		backlog := make([]int, len(sc.Tasks))
		for _, b := range waiting {
			backlog[b.task]++
		}
		for _, n := range live {
			row.Running[n.Name] = len(n.running)
			for _, b := range n.running {
				backlog[b.task]++
			}
		}
		demands := make([]Demand, len(sc.Tasks))
		secs := (time.Duration(sc.Period) * Tick).Seconds()
		for ti, t := range sc.Tasks {
			inflow[ti] = [2]float64{float64(arrivedNow[ti]), inflow[ti][0]}
			perBatch := float64(t.Pages)
			demands[ti] = Demand{Task: t.Name, Backlog: float64(backlog[ti]) * perBatch,
				Inflow:    Inflow(inflow[ti][0], inflow[ti][1]) * perBatch / secs,
				Done:      float64(doneNow[ti]) * perBatch / secs,
				PerWorker: RateOf(t.Cost, sc.Scaled.Cap, sc.Scaled.Slots, t.Concurrency)}
			row.Backlog[t.Name] = backlog[ti]
		}
		row.Waiting = len(waiting)
		// The measured rates count only while work waits: an idle fleet delivers little
		// because it has little to do, not because it is slow.
		eff := 1.0
		if len(waiting) > 0 {
			eff = Efficiency(demands, len(live))
		}
		desired = DesiredWorkers(demands, eff, sc.Target)
		row.Desired = desired
		res.Rows = append(res.Rows, row)
	}
	res.Settle = settle(sc, res.Rows)
	return res
}

// place starts waiting batches, oldest first, each on the live worker that fits it
// most tightly (so small batches fill small workers and large ones find room). A batch
// no live worker could take even idle runs decayed (DecaySteps). The oldest batch of
// each task that has waited a full period reserves the tightest worker that could
// take it: that worker starts nothing else until the batch fits, so large batches are
// not starved by small ones.
func place(sc Scenario, waiting []*simBatch, live []*simNode, wholes []Resources, tick int, small *simNode, res *Result, row *Row) []*simBatch {
	needOf := func(b *simBatch) (Resources, int, int) {
		t := sc.Tasks[b.task]
		steps, _ := DecaySteps(t.Cost, t.Concurrency, wholes)
		conc := Decayed(t.Concurrency, steps)
		return Need(t.Cost, conc), conc, steps
	}
	tightest := func(need Resources, ok func(n *simNode) bool) *simNode {
		var best *simNode
		for _, n := range live {
			if ok(n) && (best == nil || tighter(n.Cap, best.Cap)) {
				best = n
			}
		}
		return best
	}
	reservedFor := map[*simNode]*simBatch{}
	seen := map[int]bool{}
	for _, b := range waiting {
		if seen[b.task] || tick-b.arrived < sc.Period {
			continue
		}
		seen[b.task] = true
		need, _, _ := needOf(b)
		if r := tightest(need, func(n *simNode) bool { return reservedFor[n] == nil && n.Cap.Covers(need) }); r != nil {
			reservedFor[r] = b
		}
	}
	kept := waiting[:0]
	for _, b := range waiting {
		need, conc, steps := needOf(b)
		best := tightest(need, func(n *simNode) bool {
			r := reservedFor[n]
			return (r == nil || r == b) && len(n.running) < n.Slots && n.Cap.Sub(n.used).Covers(need)
		})
		if best == nil {
			kept = append(kept, b)
			continue
		}
		delete(reservedFor, best)
		t := sc.Tasks[b.task]
		rounds := (t.Pages + conc - 1) / conc
		b.left = max(int(math.Ceil(float64(rounds)*t.Cost.MSPerPage/float64(Tick.Milliseconds()))), 1)
		b.need, b.steps = need, steps
		best.used = best.used.Add(need)
		best.running = append(best.running, b)
		if steps > 0 {
			row.Decayed++
		}
		if best == small {
			res.SmallByTask[t.Name]++
		}
		res.MaxWait[t.Name] = max(res.MaxWait[t.Name], tick-b.arrived)
	}
	return kept
}

// tighter orders workers smallest first: by memory, then CPU.
func tighter(a, b Resources) bool {
	return a.MemMB < b.MemMB || (a.MemMB == b.MemMB && a.CPU < b.CPU)
}

// settle measures, for each event, the periods until the signal settled: from then on
// (until the next event) it moves by at most one worker per period.
func settle(sc Scenario, rows []Row) map[int]int {
	events := make([]int, 0, len(sc.Events))
	for p := range sc.Events {
		events = append(events, p)
	}
	slices.Sort(events)
	out := map[int]int{}
	for i, e := range events {
		end := len(rows)
		if i+1 < len(events) {
			end = events[i+1]
		}
		// rows[e] is sampled at the end of the event's period: the first period that
		// sees it. The signal has settled after k periods when rows[e+k-1:end] move by
		// at most one worker per period.
		k := 1
		for j := end - 1; j > e; j-- {
			if d := rows[j].Desired - rows[j-1].Desired; d > 1 || d < -1 {
				k = j - e + 1
				break
			}
		}
		out[e] = k
	}
	return out
}

// DefaultScenario is the fleet and load `trawler bench capacity` and the test run: a
// big, a medium and a small fixed worker plus autoscaled standard ones; a feed task
// (small pages), a detail task with large documents, and a rendering task that needs
// more CPU than any but the big worker has; a backlog step (a run adding 1,500 detail
// batches at once) at period 8, a lasting rise of the feed's arrivals at period 16, and
// the big worker leaving at period 24 (the rendering task decays onto the others) and
// coming back at period 32.
func DefaultScenario() Scenario {
	steady := func(n int) func(int) int { return func(int) int { return n } }
	return Scenario{
		Tasks: []SimTask{
			{Name: "feed", Cost: Cost{MSPerPage: 200, CPUMSPerPage: 4, KBPerPage: 30}, Pages: 50, Concurrency: 16,
				Arrivals: func(p int) int {
					if p >= 16 {
						return 300
					}
					return 150
				}},
			{Name: "detail", Cost: Cost{MSPerPage: 300, CPUMSPerPage: 30, KBPerPage: 400}, Pages: 50, Concurrency: 16,
				Arrivals: func(p int) int {
					if p == 8 {
						return 1500 + 10
					}
					return 10
				}},
			{Name: "render", Cost: Cost{MSPerPage: 2000, CPUMSPerPage: 700, KBPerPage: 2500}, Pages: 20, Concurrency: 16,
				Arrivals: steady(2)},
		},
		Fixed: []SimWorker{
			{Name: "big", Cap: Resources{CPU: 8, MemMB: 4096}, Slots: 8},
			{Name: "medium", Cap: Resources{CPU: 4, MemMB: 2048}, Slots: 8},
			{Name: "small", Cap: Resources{CPU: 1, MemMB: 512}, Slots: 4},
		},
		Gone:    func(w string, p int) bool { return w == "big" && p >= 24 && p < 32 },
		Scaled:  SimWorker{Name: "std", Cap: Resources{CPU: 2, MemMB: 1024}, Slots: 8},
		Target:  Target{Drain: 5 * time.Minute, Min: 3, Max: 40},
		Period:  150, // 15 s
		Periods: 40,
		Events:  map[int]string{8: "+1500 detail batches", 16: "feed arrivals x2", 24: "big worker leaves", 32: "big worker back"},
	}
}

// Print writes the rows as a table, one line per period.
func (r Result) Print(w io.Writer, sc Scenario) {
	fmt.Fprintf(w, "%6s", "t")
	for _, t := range sc.Tasks {
		fmt.Fprintf(w, " %8s", t.Name)
	}
	for _, f := range sc.Fixed {
		fmt.Fprintf(w, " %7s", "run@"+f.Name)
	}
	fmt.Fprintf(w, " %7s %7s %7s %7s  %s\n", "run@std", "decayed", "desired", "fleet", "event")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "%5.0fs", (time.Duration((row.Period+1)*sc.Period) * Tick).Seconds())
		for _, t := range sc.Tasks {
			fmt.Fprintf(w, " %8d", row.Backlog[t.Name])
		}
		std := 0
		for name, n := range row.Running {
			if strings.HasPrefix(name, sc.Scaled.Name+"-") {
				std += n
			}
		}
		for _, f := range sc.Fixed {
			if _, live := row.Running[f.Name]; live {
				fmt.Fprintf(w, " %7d", row.Running[f.Name])
			} else {
				fmt.Fprintf(w, " %7s", "gone")
			}
		}
		fmt.Fprintf(w, " %7d %7d %7d %7d  %s\n", std, row.Decayed, row.Desired, row.Fleet, row.Event)
	}
}
