// Package nemesis owns the faults: it acts on what it is handed (processes
// and their PIDs, servers, links, hosts) and records what it did as
// :nemesis ops, each fault a pair of events on the run's clock — :pause
// and :resume, :kill and :restart, or :start and :stop — whose window
// covers it. A Schedule draws faults one at a time, or several at once
// (Overlap), or replays a Plan. It never reaches into the workload: the
// in-section pause is a function the worker calls, with the schedule
// decided here, and a killed worker is replaced by whatever the run hands
// to KillWorker.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// A Recorder takes the ops the nemesis records. It must be safe for
// concurrent use.
type Recorder func(history.Op)

// Kinds of fault, written as the :kind of their events.
const (
	KindSigStop       history.Keyword = "sigstop" // SIGSTOP of a whole worker process
	KindSleep                         = history.PauseSleep
	KindStop                          = history.PauseStop
	KindStopWaiters                   = history.PauseStopWaiters
	KindPauseRedis    history.Keyword = "pause-redis"    // SIGSTOP of redis-server
	KindPausePostgres history.Keyword = "pause-postgres" // SIGSTOP of the postmaster and its backends
	KindKillRedis     history.Keyword = "kill-redis"     // SIGKILL of redis-server, restarted empty
	KindKillPostgres  history.Keyword = "kill-postgres"  // immediate shutdown of PostgreSQL, restarted
	KindKillWorker    history.Keyword = "kill-worker"    // SIGKILL of a worker, replaced by a new one

	KindRestart           history.Keyword = "restart"                  // SIGKILL of one of the lock's Redis nodes, restarted empty
	KindClock             history.Keyword = "clock"                    // one of the lock's Redis nodes' wall clock jumps
	KindPartitionRedis    history.Keyword = "partition-redis"          // a worker cut from the lock's Redis nodes (a minority of several)
	KindPartitionMajority history.Keyword = "partition-redis-majority" // a worker cut from a majority of the lock's Redis nodes
	KindPartitionPostgres history.Keyword = "partition-postgres"       // a worker cut from PostgreSQL
	KindDelayRedis        history.Keyword = "delay-redis"              // a worker's links to the lock's nodes slowed
	KindDelayRedisReplies history.Keyword = "delay-redis-replies"      // the lock's nodes' replies to a worker slowed, from a lock call in flight
	KindDelayRedisGrant   history.Keyword = "delay-redis-grant"        // the same, from an acquire while no one holds the lock
	KindDelayPostgres     history.Keyword = "delay-postgres"           // a worker's link to PostgreSQL slowed
	KindDropRedis         history.Keyword = "drop-redis"               // a worker's connections to the lock's nodes reset
	KindDropPostgres      history.Keyword = "drop-postgres"            // a worker's connections to PostgreSQL reset
	KindFailover          history.Keyword = "failover"                 // the Redis primary isolated from its replica and sentinels; they promote the replica
	KindIsolate           history.Keyword = "isolate"                  // a worker's host cut off from the network (--hosts netns)
)

// An eventer is a fault whose events are other than :start and :stop: a
// pause's (:pause and :resume) or a kill's (:kill and :restart).
type eventer interface {
	events() (begin, end history.Keyword)
}

// verbs are the :f of the events that begin and end f.
func verbs(f Fault) (begin, end history.Keyword) {
	if e, ok := f.(eventer); ok {
		return e.events()
	}
	return history.FStart, history.FStop
}

// A pause's events, and a kill's.
type pauseEvents struct{}
type killEvents struct{}

func (pauseEvents) events() (begin, end history.Keyword) { return history.FPause, history.FResume }
func (killEvents) events() (begin, end history.Keyword)  { return history.FKill, history.FRestart }

func record(ctx context.Context, c Clock, rec Recorder, f history.Keyword, v map[history.Keyword]any) {
	rec(history.Op{Index: history.Unset, Time: c.Now(ctx), Type: history.Info,
		Process: history.Nemesis, F: f, Value: v})
}

// A Fault is one kind of fault the schedule can inject.
type Fault interface {
	// Kind names the fault in the history.
	Kind() history.Keyword
	// Begin injects the fault, choosing its target with r, and returns what
	// the events should say about it.
	Begin(ctx context.Context, r *rand.Rand) (map[history.Keyword]any, error)
	// End undoes the fault begun last. It is called exactly once after each
	// Begin that succeeded, even when the run is ending.
	End(ctx context.Context) error
}

// A Schedule injects faults: every Interval it picks one of Faults at
// random, begins it, waits Pause and ends it. Each fault is recorded as two
// events; the first is stamped before the fault began and the second after
// it ended, so the window they span covers the fault.
type Schedule struct {
	Faults   []Fault
	Interval time.Duration // between the end of one fault and the start of the next
	Pause    time.Duration // how long each fault lasts
	Rand     *rand.Rand    // seeded, so that a schedule can be replayed
	Clock    Clock
	Record   Recorder
	// Plan, when not nil, is what Run injects instead of drawing: each
	// fault at its time, on its worker, for its length.
	Plan Plan
	// Overlap lets faults overlap in time: every Interval one begins, on a
	// target no other holds, and lasts Pause, whatever is under way
	// meanwhile (see overlap).
	Overlap bool
	// HolderWait bounds how long a replayed fault that hit a holder (or a
	// write in flight) waits for its worker to be there again: a few
	// sections' time, since another worker may take the lock turn after
	// turn. 0: a second.
	HolderWait time.Duration
}

// Run injects faults until ctx ends, or replays Plan when it has one. A
// fault under way when ctx ends is ended at once.
func (s *Schedule) Run(ctx context.Context) error {
	switch {
	case s.Plan != nil:
		return s.replay(ctx)
	case s.Overlap:
		return s.overlap(ctx)
	}
	for {
		if !sleep(ctx, s.Interval) {
			return nil
		}
		s.inject(ctx, s.Faults[s.Rand.Intn(len(s.Faults))], s.Pause)
	}
}

// inject begins f, waits length (cut short when ctx ends) and ends it,
// recording both.
func (s *Schedule) inject(ctx context.Context, f Fault, length time.Duration) {
	s.injectWith(ctx, f, length, s.Rand)
}

// injectWith is inject, f drawing its target with r.
func (s *Schedule) injectWith(ctx context.Context, f Fault, length time.Duration, r *rand.Rand) {
	begin, end := verbs(f)
	t0 := s.Clock.Now(ctx)
	v, err := f.Begin(ctx, r)
	if v == nil {
		v = map[history.Keyword]any{}
	}
	v["kind"], v["ms"] = f.Kind(), length.Milliseconds()
	if err != nil {
		v["error"] = err.Error()
	}
	s.Record(history.Op{Index: history.Unset, Time: t0, Type: history.Info,
		Process: history.Nemesis, F: begin, Value: v})
	if err != nil {
		return // nothing to end; the failure is in the history
	}
	sleep(ctx, length)
	err = f.End(context.WithoutCancel(ctx))
	w := v
	if err != nil {
		w = copyMap(v)
		w["error"] = err.Error()
	}
	record(ctx, s.Clock, s.Record, end, w)
}

func copyMap(m map[history.Keyword]any) map[history.Keyword]any {
	c := make(map[history.Keyword]any, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

// A Signaler is what a Freezer stops and resumes: a process or a group,
// of this machine (a PID) or of another. It must be comparable.
type Signaler interface {
	Signal(syscall.Signal) error
}

// A PID is a process of this machine, or with a minus sign the group it
// leads.
type PID int

// Signal sends sig to the process, or the group.
func (p PID) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(int(p), sig); err != nil {
		return fmt.Errorf("pid %d: %w", int(p), err)
	}
	return nil
}

// A Freezer sends SIGSTOP and SIGCONT and remembers what it has left
// stopped, so that nothing is: ResumeAll undoes every stop.
type Freezer struct {
	mu      sync.Mutex
	stopped map[Signaler]bool
}

// Stop sends SIGSTOP to pids.
func (f *Freezer) Stop(pids ...int) error { return f.signal(syscall.SIGSTOP, asPIDs(pids)) }

// Cont sends SIGCONT to pids.
func (f *Freezer) Cont(pids ...int) error { return f.signal(syscall.SIGCONT, asPIDs(pids)) }

// StopAll sends SIGSTOP to each of ps.
func (f *Freezer) StopAll(ps ...Signaler) error { return f.signal(syscall.SIGSTOP, ps) }

// ContAll sends SIGCONT to each of ps.
func (f *Freezer) ContAll(ps ...Signaler) error { return f.signal(syscall.SIGCONT, ps) }

func asPIDs(pids []int) []Signaler {
	out := make([]Signaler, len(pids))
	for i, p := range pids {
		out[i] = PID(p)
	}
	return out
}

func (f *Freezer) signal(sig syscall.Signal, ps []Signaler) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped == nil {
		f.stopped = map[Signaler]bool{}
	}
	var first error
	for _, p := range ps {
		err := p.Signal(sig)
		switch {
		case err == nil:
			f.stopped[p] = sig == syscall.SIGSTOP
		case gone(err):
			// Nothing to resume, and its PID may be another process's by
			// the run's end.
			delete(f.stopped, p)
		default:
			// A stop that may have taken, or a resume that did not: the
			// run's end resumes it (again).
			f.stopped[p] = true
		}
		if err != nil && first == nil {
			first = fmt.Errorf("nemesis: %v: %w", sig, err)
		}
	}
	return first
}

// gone says err is a signal's to a process that has exited.
func gone(err error) bool { return errors.Is(err, syscall.ESRCH) || errors.Is(err, os.ErrProcessDone) }

// ResumeAll sends SIGCONT to every process the freezer left stopped. It is
// safe to call at any time, from any goroutine, any number of times.
func (f *Freezer) ResumeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, stopped := range f.stopped {
		if stopped {
			_ = p.Signal(syscall.SIGCONT) // the process may be gone: nothing to resume
			f.stopped[p] = false
		}
	}
}

// withChildren returns pid and the PIDs of its children, read from /proc:
// a PostgreSQL server is its postmaster and one backend per connection.
func withChildren(pid int) []int {
	out := []int{pid}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
			out = append(out, child)
		}
	}
	return out
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
