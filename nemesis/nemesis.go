// Package nemesis owns the faults: it acts on processes (PIDs, signals) and
// records what it did as :nemesis ops, each fault a :pause and a :resume on
// the run's clock. It never reaches into the workload: the in-section pause
// is a function the worker calls, with the schedule decided here.
package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// A Clock tells the time on the clock the history is stamped with.
type Clock interface {
	// Now returns nanoseconds since the run's start.
	Now(ctx context.Context) int64
}

// Kinds of pause, written as the :kind of a :pause event.
const (
	KindSigStop history.Keyword = "sigstop" // the nemesis stops a whole worker process
	KindSleep   history.Keyword = "sleep"   // the worker's goroutine blocks in its section
	KindStop    history.Keyword = "stop"    // the worker stops its own process in its section
)

// A Recorder takes the ops the nemesis records. It must be safe for
// concurrent use.
type Recorder func(history.Op)

func record(ctx context.Context, c Clock, rec Recorder, f history.Keyword, v map[history.Keyword]any) {
	rec(history.Op{Index: history.Unset, Time: c.Now(ctx), Type: history.Info,
		Process: history.Nemesis, F: f, Value: v})
}

// A Target is a worker process the nemesis may stop.
type Target struct {
	Worker int // the worker's slot, from 0
	PID    int
	// Process returns the process number the worker records ops under now.
	Process func() history.Process
}

// SigStop freezes whole worker processes: every Interval it picks a target
// at random, sends SIGSTOP, waits Pause and sends SIGCONT. A stopped process
// runs nothing — not its lock renewal, not its timers — as in a long GC
// pause or a frozen container.
type SigStop struct {
	Targets  []Target
	Pause    time.Duration
	Interval time.Duration
	Rand     *rand.Rand // seeded, so that a schedule can be replayed
	Clock    Clock
	Record   Recorder

	mu      sync.Mutex
	stopped map[int]bool // PIDs stopped now
}

// Run injects pauses until ctx ends. Every process it stopped is resumed
// before it returns, whatever ended it.
func (n *SigStop) Run(ctx context.Context) error {
	defer n.ResumeAll()
	for {
		if !sleep(ctx, n.Interval) {
			return nil
		}
		t := n.Targets[n.Rand.Intn(len(n.Targets))]
		v := map[history.Keyword]any{
			"kind": KindSigStop, "worker": t.Worker, "pid": t.PID,
			"process": int64(t.Process()), "ms": n.Pause.Milliseconds(),
		}
		record(ctx, n.Clock, n.Record, "pause", v)
		if err := n.signal(t.PID, syscall.SIGSTOP); err != nil {
			return err
		}
		sleep(ctx, n.Pause) // ended early when the run ends: resume at once
		err := n.signal(t.PID, syscall.SIGCONT)
		record(ctx, n.Clock, n.Record, "resume", v)
		if err != nil {
			return err
		}
	}
}

func (n *SigStop) signal(pid int, sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped == nil {
		n.stopped = map[int]bool{}
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("nemesis: %v to pid %d: %w", sig, pid, err)
	}
	n.stopped[pid] = sig == syscall.SIGSTOP
	return nil
}

// ResumeAll sends SIGCONT to every process the nemesis left stopped. It is
// safe to call at any time, from any goroutine, any number of times.
func (n *SigStop) ResumeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for pid, stopped := range n.stopped {
		if stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT) // the process may be gone: nothing to resume
			n.stopped[pid] = false
		}
	}
}

// stopSelf stops the calling process with SIGSTOP until its parent resumes
// it (if the parent is gone, the kernel's parent-death signal ends it). The
// signal is aimed at the calling thread: sent to the process, it may be
// taken by another thread while this one goes on for a while.
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// InSection pauses a worker inside its critical section, after the read and
// before the write, in each of its Every-th sections. With Kind KindSleep
// only the worker's goroutine blocks (a blocking call) while the rest of its
// process — a lock-renewal goroutine, say — runs on. With KindStop the worker
// stops its whole process with SIGSTOP, as a stop-the-world GC pause or a
// frozen container would, and its parent resumes it after the pause: the
// parent learns of it from the :pause event, which is recorded first.
type InSection struct {
	Every  int
	Pause  time.Duration
	Kind   history.Keyword // KindSleep (the default) or KindStop
	Clock  Clock
	Record Recorder
}

// Maybe pauses if section n of the worker recording as process p is due.
// The pause is recorded as :pause and :resume events; it is cut short when
// ctx ends.
func (n *InSection) Maybe(ctx context.Context, p history.Process, section int) {
	if n.Every <= 0 || section%n.Every != 0 {
		return
	}
	kind := n.Kind
	if kind == "" {
		kind = KindSleep
	}
	v := map[history.Keyword]any{"kind": kind, "process": int64(p), "ms": n.Pause.Milliseconds()}
	record(ctx, n.Clock, n.Record, "pause", v)
	if kind == KindStop {
		stopSelf()
	} else {
		sleep(ctx, n.Pause)
	}
	record(ctx, n.Clock, n.Record, "resume", v)
}
