//go:build !production

package devcli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"

	"github.com/trawlerhq/trawler/internal/cli"
	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/procstat"
)

// workerProcess is `trawler worker` running as a process of its own, as in production,
// for `trawler bench crawl --worker-process`.
type workerProcess struct {
	cmd      *exec.Cmd
	identity string // how its pollers name it to Temporal: engine.NewWorker's default, pid@host
	logPath  string // its stdout and stderr
	log      *os.File
	exited   chan struct{} // closed once it has ended; waitErr says how
	waitErr  error
	who      string // what started it, at the head of its errors: "--worker-process"
}

// workerPollTimeout bounds the worker process's start-up: dialing Temporal and Redis and
// its first polls take a second or two.
const workerPollTimeout = time.Minute

// workerStopTimeout bounds its graceful stop: the Temporal worker waits up to 5 s for its
// batches, then the sinks close.
const workerStopTimeout = 30 * time.Second

// startWorkerProcess starts bin as `trawler worker` with the settings o of a bench's
// worker (benchWorkerOptions) on the Temporal server s points at, its output to logPath,
// and returns once Temporal sees it polling o.TaskQueue.
func startWorkerProcess(ctx context.Context, c client.Client, s *cli.Settings, bin string, o engine.WorkerOptions, logPath string) (*workerProcess, error) {
	if _, err := processCPUOf(os.Getpid()); err != nil {
		return nil, fmt.Errorf("--worker-process measures the worker process's CPU in /proc, which this system lacks (%v): leave --worker-process out", err)
	}
	cmd := exec.Command(bin, workerProcessArgs(s, o)...)
	// Its settings come from these flags alone, as the in-process worker's come from its
	// options: a TRAWLER_* variable (TRAWLER_DATA, TRAWLER_KAFKA …) would give it stores
	// the in-process worker lacks, and demo.yaml's store: [all] would write every item to
	// each of them.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TRAWLER_") })
	return startWorker(ctx, c, "--worker-process", cmd, o.TaskQueue, logPath)
}

// startWorker starts cmd, a `trawler worker` command line, with its output to logPath,
// and returns once Temporal sees it polling queue; who (what starts it) heads its errors.
func startWorker(ctx context.Context, c client.Client, who string, cmd *exec.Cmd, queue, logPath string) (*workerProcess, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: create the worker's log: %w", who, err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("%s: start %s worker: %w", who, cmd.Path, err)
	}
	host, _ := os.Hostname()
	p := &workerProcess{cmd: cmd, identity: fmt.Sprintf("%d@%s", cmd.Process.Pid, host), logPath: logPath, log: log, exited: make(chan struct{}), who: who}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitPolling(ctx, c, queue); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// workerProcessArgs are the arguments of `trawler worker` with the settings o of a
// bench's worker on the Temporal server s points at.
func workerProcessArgs(s *cli.Settings, o engine.WorkerOptions) []string {
	// No browser, as the in-process worker has none: trawler worker would start one when
	// Chromium is installed and poll the render queue too.
	args := []string{"worker", "--temporal", s.Temporal, "--namespace", s.Namespace, "--task-queue", o.TaskQueue,
		"--out", o.OutDir, "--host-concurrency", strconv.Itoa(o.Fetch.HostConcurrency), "--browser", "none"}
	if o.Fetch.AllowPrivate {
		args = append(args, "--allow-private")
	}
	if o.Redis != "" {
		args = append(args, "--redis", o.Redis)
	}
	return args
}

// waitPolling waits until Temporal lists the process among the pollers of both the
// workflow and the activity tasks of queue.
func (p *workerProcess) waitPolling(ctx context.Context, c client.Client, queue string) error {
	deadline := time.NewTimer(workerPollTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.polls(ctx, c, queue) {
			return nil
		}
		select {
		case <-p.exited:
			return p.exitError("before it polled task queue " + strconv.Quote(queue))
		case <-deadline.C:
			return fmt.Errorf("%s: the worker process (%s) did not poll task queue %q within %s; its log %s ends:\n%s",
				p.who, strings.Join(p.cmd.Args, " "), queue, workerPollTimeout, p.logPath, p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// polls says whether Temporal has seen the process poll both kinds of task of queue.
func (p *workerProcess) polls(ctx context.Context, c client.Client, queue string) bool {
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		r, err := c.DescribeTaskQueue(ctx, queue, kind)
		if err != nil || !slices.ContainsFunc(r.GetPollers(), func(pi *taskqueuepb.PollerInfo) bool { return pi.GetIdentity() == p.identity }) {
			return false
		}
	}
	return true
}

// ended is the error that says the process has ended, when it has; nil while it runs.
func (p *workerProcess) ended() error {
	select {
	case <-p.exited:
		return p.exitError("during the benchmark")
	default:
		return nil
	}
}

// exitError says the process ended (when) and how, with the end of its log.
func (p *workerProcess) exitError(when string) error {
	how := "exited"
	if p.waitErr != nil {
		how = p.waitErr.Error()
	}
	return fmt.Errorf("%s: the worker process (%s) ended %s (%s); its log %s ends:\n%s",
		p.who, strings.Join(p.cmd.Args, " "), when, how, p.logPath, p.logTail())
}

// logTail is the last lines of the process's log.
func (p *workerProcess) logTail() string {
	const lines = 20
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	b = bytes.TrimRight(b, "\n")
	if len(b) == 0 {
		return "(empty)"
	}
	all := strings.Split(string(b), "\n")
	return "  " + strings.Join(all[max(len(all)-lines, 0):], "\n  ")
}

// cpu is the CPU time (user + system) the process has used so far.
func (p *workerProcess) cpu() (time.Duration, error) {
	if err := p.ended(); err != nil {
		return 0, err
	}
	d, err := processCPUOf(p.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("--worker-process: read the worker process's CPU: %w", err)
	}
	return d, nil
}

// stop ends the process as a worker is ended in production, SIGTERM (it finishes its
// batches and closes its sinks), killing it if it has not ended after
// workerStopTimeout.
func (p *workerProcess) stop() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(workerStopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	_ = p.log.Close()
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, 100 on every
// architecture Go builds Linux for.
const userHZ = 100

// processCPUOf is the CPU time (user + system) of every thread of process pid so far,
// from /proc/PID/stat (to 1/USER_HZ s: 10 ms).
func processCPUOf(pid int) (time.Duration, error) {
	// utime and stime are fields 14 and 15.
	f, err := procstat.Fields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want 13 or more", pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: CPU time %q: %w", pid, v, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
