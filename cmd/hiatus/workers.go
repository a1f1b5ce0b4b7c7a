package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/urfave/cli/v2"
)

// workerConfig is what `hiatus worker` reads on its standard input: JSON,
// so that server URLs never show in the process list.
type workerConfig struct {
	RedisURL, PostgresURL string
	LockKey, FenceKey     string
	CounterID             int64
	Lease, Retry, Work    time.Duration
	OpTimeout, Pause      time.Duration
	Fenced                bool
	InjectEvery           int
	PauseKind             string
	Lock                  string
	Process, Stride       int64
	StartUnixNano         int64 // the run's start on the Redis clock
	DeadlineUnixNano      int64 // when to stop starting sections, local clock
}

// workerSet is the worker processes of a run.
type workerSet struct {
	deadline time.Time
	procs    []*exec.Cmd
	done     []chan struct{}
}

// startWorkers starts cfg.Workers processes of this same binary, each
// running `hiatus worker`, and feeds their output to col.
func startWorkers(ctx context.Context, cfg runConfig, start time.Time, col *collector, lg *runLog) (*workerSet, error) {
	self, err := os.Executable()
	if err != nil {
		return &workerSet{}, fmt.Errorf("find own binary: %w", err)
	}
	ws := &workerSet{deadline: time.Now().Add(cfg.TimeLimit)}
	for i := range cfg.Workers {
		wc := workerConfig{
			RedisURL: cfg.RedisURL, PostgresURL: cfg.PostgresURL, LockKey: lockKey(cfg.Name),
			FenceKey: fenceKey(cfg.Name), CounterID: cfg.CounterID, Lease: cfg.Lease, Retry: cfg.Retry,
			Work: cfg.Work, OpTimeout: cfg.OpTimeout, Pause: cfg.Pause, Fenced: cfg.Fenced,
			InjectEvery: cfg.InjectEvery, PauseKind: cfg.PauseKind, Lock: cfg.Lock, Process: int64(i), Stride: int64(cfg.Workers),
			StartUnixNano: start.UnixNano(), DeadlineUnixNano: ws.deadline.UnixNano(),
		}
		in, err := json.Marshal(wc)
		if err != nil {
			return ws, fmt.Errorf("worker config: %w", err)
		}
		cmd := exec.Command(self, "worker")
		cmd.Stdin = bytesReader(in)
		cmd.Stderr = lg.f
		// A worker dies with the run, even when the run is killed.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return ws, fmt.Errorf("worker %d: %w", i, err)
		}
		if err := cmd.Start(); err != nil {
			return ws, fmt.Errorf("start worker %d: %w", i, err)
		}
		done := make(chan struct{})
		ws.procs = append(ws.procs, cmd)
		ws.done = append(ws.done, done)
		col.wg.Add(1)
		go func() {
			col.read(i, stdout, lg)
			if err := cmd.Wait(); err != nil {
				lg.logf("worker %d (pid %d): %v", i, cmd.Process.Pid, err)
			}
			close(done)
		}()
	}
	return ws, nil
}

func bytesReader(b []byte) io.Reader {
	r, w := io.Pipe()
	go func() { w.Write(b); w.Close() }()
	return r
}

// targets are the workers as the nemesis sees them.
func (ws *workerSet) targets(col *collector) []nemesis.Target {
	var ts []nemesis.Target
	for i, cmd := range ws.procs {
		ts = append(ts, nemesis.Target{Worker: i, PID: cmd.Process.Pid,
			Process: func() history.Process { return history.Process(col.current[i].Load()) }})
	}
	return ts
}

// wait waits up to grace for the workers to finish their last sections, then
// ends those still running.
func (ws *workerSet) wait(grace time.Duration, lg *runLog) {
	t := time.NewTimer(grace)
	defer t.Stop()
	for i, d := range ws.done {
		select {
		case <-d:
		case <-t.C:
			lg.printf("workers still running %v after the time limit: ending them", grace)
			ws.kill()
			return
		default:
			select {
			case <-d:
			case <-t.C:
				lg.printf("worker %d still running %v after the time limit: ending the workers", i, grace)
				ws.kill()
				return
			}
		}
	}
}

// resume sends SIGCONT to the worker in slot, if it still runs.
func (ws *workerSet) resume(slot int) {
	select {
	case <-ws.done[slot]:
	default:
		_ = ws.procs[slot].Process.Signal(syscall.SIGCONT)
	}
}

// signal resumes every worker still running and sends it sig.
func (ws *workerSet) signal(sig syscall.Signal) {
	for i, cmd := range ws.procs {
		select {
		case <-ws.done[i]:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Signal(sig)
		}
	}
}

// kill resumes and ends every worker still running, and waits for them. A
// stopped process is sent SIGCONT first, so that none is ever left stopped.
func (ws *workerSet) kill() {
	var wg sync.WaitGroup
	for i, cmd := range ws.procs {
		select {
		case <-ws.done[i]:
			continue
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		wg.Add(1)
		go func() { defer wg.Done(); <-ws.done[i] }()
	}
	wg.Wait()
}

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:   "worker",
		Hidden: true,
		Usage:  "one worker process of a run (started by hiatus run; reads its configuration on stdin)",
		Action: func(c *cli.Context) error {
			var wc workerConfig
			if err := json.NewDecoder(os.Stdin).Decode(&wc); err != nil {
				return usageErrorf("worker: read configuration from stdin: %w", err)
			}
			return runWorker(c.Context, wc, c.App.Writer)
		},
	}
}

// runWorker runs critical sections until the deadline, printing each op as
// one EDN line as soon as it is recorded.
func runWorker(ctx context.Context, wc workerConfig, out io.Writer) error {
	// SIGINT or SIGTERM ends the run early: the section under way is
	// finished, no new one begins.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, wc.DeadlineUnixNano))
	defer cancel()
	rdb, err := redisClient(wc.RedisURL, 1)
	if err != nil {
		return err
	}
	defer rdb.Close()
	db, err := postgresPool(context.WithoutCancel(ctx), wc.PostgresURL, 2)
	if err != nil {
		return err
	}
	defer db.Close()

	var mu sync.Mutex
	hw := history.NewWriter(out)
	var werr error
	rec := func(o history.Op) {
		mu.Lock()
		defer mu.Unlock()
		if werr != nil {
			return
		}
		if werr = hw.Write(o); werr == nil {
			werr = hw.Flush()
		}
		if werr != nil {
			cancel() // the run is gone: nothing more to record for
		}
	}
	clock := client.NewRedisClock(rdb, time.Unix(0, wc.StartUnixNano))
	lock, err := client.NewLock(wc.Lock, client.LockConfig{Redis: rdb, Postgres: db, Key: wc.LockKey,
		FenceKey: wc.FenceKey, Lease: wc.Lease, Retry: wc.Retry, Fenced: wc.Fenced})
	if err != nil {
		return err
	}
	w := &client.Worker{
		Lock:    lock,
		Counter: &client.Counter{DB: db, ID: wc.CounterID, Fenced: wc.Fenced},
		Clock:   clock, Record: rec, Process: history.Process(wc.Process), Stride: wc.Stride,
		Work: wc.Work, OpTimeout: wc.OpTimeout,
	}
	if wc.InjectEvery > 0 {
		in := &nemesis.InSection{Every: wc.InjectEvery, Pause: wc.Pause, Kind: history.Keyword(wc.PauseKind),
			Clock: clock, Record: rec}
		w.Hook = func(ctx context.Context, s client.Section) { in.Maybe(ctx, s.Process, s.N) }
	}
	w.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		return fmt.Errorf("worker: write ops: %w", werr)
	}
	return nil
}
