package nemesis

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// InSection pauses a worker inside its critical section, after the read and
// before the write, in each of its Every-th sections. With Kind KindSleep
// only the worker's goroutine blocks (a blocking call) while the rest of its
// process — a lock-renewal goroutine, say — runs on. With KindStop the worker
// stops its whole process with SIGSTOP, as a stop-the-world GC pause or a
// frozen container would, and its parent resumes it after the pause: the
// parent learns of it from the :pause event, which is recorded first.
// KindStopWaiters blocks the worker as KindSleep does, and its parent,
// told so by the same event, stops the whole process of every other worker
// waiting for the lock for as long (StopsWaiters): a holder that keeps the
// lock, and waiters frozen in line behind it, past their leases.
type InSection struct {
	Every  int
	Pause  time.Duration
	Kind   history.Keyword // KindSleep (the default), KindStop or KindStopWaiters
	Clock  Clock
	Record Recorder
	// Freeze, if set, stops the rest of the application before KindStop
	// stops the worker: a lock adapter it started. Its parent resumes
	// them together, as their process group.
	Freeze func()
}

// Maybe pauses if section n of the worker recording as process p is due.
// The pause is recorded as :pause and :resume events; a sleep is cut short
// when ctx ends.
func (n *InSection) Maybe(ctx context.Context, p history.Process, section int) {
	if n.Every <= 0 || section%n.Every != 0 {
		return
	}
	kind := n.Kind
	if kind == "" {
		kind = KindSleep
	}
	v := map[history.Keyword]any{"kind": kind, "process": int64(p), "ms": n.Pause.Milliseconds()}
	record(ctx, n.Clock, n.Record, history.FPause, v)
	if kind == KindStop {
		if n.Freeze != nil {
			n.Freeze()
		}
		stopSelf()
	} else {
		sleep(ctx, n.Pause)
	}
	record(ctx, n.Clock, n.Record, history.FResume, v)
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

// StopsWaiters reports whether o is the :pause event an InSection of kind
// KindStopWaiters records as it begins to block, and for how long: whoever
// runs the workers stops, for d, every other worker then waiting for the
// lock, and records each stop as a :pause and a :resume of kind
// KindStopWaiters whose value names the worker (:worker), as SigStop's do.
func StopsWaiters(o history.Op) (d time.Duration, ok bool) {
	v, isMap := o.Value.(map[history.Keyword]any)
	if !isMap || o.F != history.FPause || v["kind"] != KindStopWaiters || v["worker"] != nil {
		return 0, false
	}
	ms, _ := history.Int(v["ms"])
	return time.Duration(ms) * time.Millisecond, true
}

// SelfStopped reports whether o is the :pause event an InSection of kind
// KindStop records just before it stops its own process, and for how long:
// whoever started that process must resume it (SIGCONT) after d, since a
// stopped process cannot wake itself.
func SelfStopped(o history.Op) (d time.Duration, ok bool) {
	v, isMap := o.Value.(map[history.Keyword]any)
	if !isMap || o.F != history.FPause || v["kind"] != KindStop {
		return 0, false
	}
	ms, _ := history.Int(v["ms"])
	return time.Duration(ms) * time.Millisecond, true
}
