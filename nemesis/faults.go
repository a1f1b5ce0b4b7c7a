package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// A Target is a worker process the nemesis may act on.
type Target struct {
	Worker int // the worker's slot, from 0
	// PID leads a process group of its own: the worker and any process it
	// started (a lock adapter), which SigStop freezes together.
	PID int
	// Group, when not nil, signals that group wherever the worker runs
	// (a node's PID means nothing here); nil signals -PID here.
	Group   Signaler
	Process history.Process // the process number it records ops under now
	Holding bool            // it holds the lock, as far as its ops say
	Written bool            // it has sent the write of the section it holds
	Writing bool            // that write is sent and not yet answered
	// Op is the :f of the worker's op in flight ("" for none), and
	// Renewing says its lock has a renewal of its own in flight (a
	// :renew of its renewer): see Calling.
	Op       history.Keyword
	Renewing bool
}

// LockCalls are the calls a worker's lock makes to its servers that a
// fault can be aimed at while in flight: the worker's acquire, extend and
// release, and its lock's own renewals.
func LockCalls() []history.Keyword {
	return []history.Keyword{history.FAcquire, history.FExtend, history.FRelease, history.FRenew}
}

// Calling returns the one lock call t has in flight (LockCalls); false
// for none, or for two at once (an extend waiting behind a renewal), when
// which of them a link's request is cannot be told.
func (t Target) Calling() (history.Keyword, bool) {
	call := t.Op == history.FAcquire || t.Op == history.FExtend || t.Op == history.FRelease
	switch {
	case call && !t.Renewing:
		return t.Op, true
	case t.Renewing && !call:
		return history.FRenew, true
	}
	return "", false
}

// ErrNoTarget is returned by a fault that finds nothing to act on.
var ErrNoTarget = errors.New("nemesis: no target")

// holderWait is Schedule.HolderWait's default.
const holderWait = time.Second

// awaitHolder waits until the worker in slot is there, wait at most: a
// replayed fault that hit a lock holder hits one again where a pause costs
// an update, and one that found a write in flight finds one again, whatever
// the phase of the worker's loop at its moment. (A holder stopped after its
// write loses nothing, and with little work that is half its time.) It
// polls every 100 µs: the window is the read and the work, a few
// milliseconds at the least. It returns the worker to aim at: slot's; or,
// when slot's did not get there within the wait, the next worker to get
// there, within another (the workers are alike, and what the fault hit in
// the run was a holder at the start of its section, not a slot: two workers
// with long sections, one re-taking the lock at each release, starved the
// other for seconds); else slot's. False when ctx ended first.
func awaitHolder(ctx context.Context, targets func() []Target, slot int, there func(Target) bool, wait time.Duration) (int, bool) {
	was := map[int]bool{} // after the first wait: who was there at the last look
	for round, deadline := 0, time.Now().Add(wait); round < 2; round, deadline = round+1, time.Now().Add(wait) {
		for time.Now().Before(deadline) {
			for _, t := range targets() {
				switch {
				case round == 0 && t.Worker == slot && there(t):
					return slot, true
				case round == 1 && there(t) && !was[t.Worker]:
					return t.Worker, true
				}
				was[t.Worker] = there(t)
			}
			if !sleep(ctx, 100*time.Microsecond) {
				return 0, false
			}
		}
	}
	return slot, true
}

// holdsUnwritten says t holds the lock and has not yet sent its write:
// where a Planned.Holder fault is aimed.
func holdsUnwritten(t Target) bool { return t.Holding && !t.Written }

// inFlight says t's write is sent and not yet answered: where a
// Planned.InFlight fault is aimed.
func inFlight(t Target) bool { return t.Writing }

// pick chooses a target at random, or the worker a replayed schedule
// aims at.
func pick(targets []Target, r *rand.Rand, aim Slot) (Target, error) {
	if slot, ok := aim.Index(); ok {
		for _, t := range targets {
			if t.Worker == slot {
				return t, nil
			}
		}
		return Target{}, ErrNoTarget
	}
	if len(targets) == 0 {
		return Target{}, ErrNoTarget
	}
	return targets[r.Intn(len(targets))], nil
}

// An aimer is a fault of a worker that a replayed schedule aims at a
// worker slot (none: any), and whose targets it watches for the holder.
type aimer interface {
	aimAt(worker Slot)
	targets() []Target
}

func (t Target) value() map[history.Keyword]any {
	return map[history.Keyword]any{"worker": t.Worker, "pid": t.PID, "process": int64(t.Process)}
}

// SigStop freezes a whole worker: SIGSTOP at Begin, SIGCONT at End, to its
// process group, so that a lock adapter it started stops with it. A stopped
// process runs nothing — not its lock renewal, not its timers — as in a
// long GC pause or a frozen container.
type SigStop struct {
	pauseEvents
	Targets func() []Target
	Freezer *Freezer
	group   Signaler
	aim     Slot // the worker to stop next; none for any
}

func (n *SigStop) aimAt(worker Slot) { n.aim = worker }
func (n *SigStop) targets() []Target { return n.Targets() }

// Kind implements Fault.
func (*SigStop) Kind() history.Keyword { return KindSigStop }

// Begin implements Fault.
func (n *SigStop) Begin(_ context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	t, err := pick(n.Targets(), r, n.aim)
	if err == nil && t.PID <= 1 {
		err = fmt.Errorf("nemesis: worker %d has no process to stop (pid %d)", t.Worker, t.PID) // -0 and -1 would hit hiatus, or everyone
	}
	if err != nil {
		return nil, err
	}
	n.group = t.Group
	if n.group == nil {
		n.group = PID(-t.PID) // the group
	}
	return t.value(), n.Freezer.StopAll(n.group)
}

// End implements Fault.
func (n *SigStop) End(context.Context) error { return n.Freezer.ContAll(n.group) }

// PauseServer freezes a server process and its children (a PostgreSQL
// postmaster's backends): clients' requests wait until it is resumed, or
// until their own timeouts.
type PauseServer struct {
	pauseEvents
	Which  history.Keyword // KindPauseRedis or KindPausePostgres
	Target string          // the server's name: a random nemesis holds it, for the kill of the same server
	PID    func() int      // the server's PID now, on this machine (it changes across restarts); 0 for none here
	// Remote, for a server of another machine (PID 0), is it and its
	// children there, whom a signal sent there stops: they cannot be
	// listed here.
	Remote  Signaler
	Freezer *Freezer
	stopped []Signaler
}

// Kind implements Fault.
func (n *PauseServer) Kind() history.Keyword { return n.Which }

// Begin implements Fault.
func (n *PauseServer) Begin(context.Context, *rand.Rand) (map[history.Keyword]any, error) {
	pid := n.PID()
	stopped, err := freeze(n.Freezer, pid, n.Remote)
	if errors.Is(err, ErrNoTarget) {
		return nil, err
	}
	n.stopped = stopped
	if pid == 0 {
		return map[history.Keyword]any{}, err // a PID of another machine is none of this one's
	}
	return map[history.Keyword]any{"pid": pid, "pids": len(stopped)}, err
}

// freeze stops a server for a pause, and returns what its end resumes:
// one of this machine (pid above 1) with its children (stopTree); one of
// another machine (pid 0) by remote, a signal sent there.
func freeze(f *Freezer, pid int, remote Signaler) ([]Signaler, error) {
	switch {
	case pid == 0 && remote != nil:
		return []Signaler{remote}, f.StopAll(remote)
	case pid <= 1:
		return nil, ErrNoTarget // -1 would stop everyone
	}
	pids, err := stopTree(f, pid, childrenOf(pid))
	return asPIDs(pids), err
}

// stopTree stops the server pid, then its children as children lists
// them (read after the stop: a stopped server forks no more), and returns
// those stopped. A child that exited after it was listed (a backend whose
// client hung up: a timed-out query's) has nothing left to freeze. The
// server gone fails the fault, as does any other failure, which resumes
// those stopped: a fault that failed to begin is not ended, and would
// leave the server frozen for the rest of the run, which its history
// said was never paused.
func stopTree(f *Freezer, pid int, children func() []int) ([]int, error) {
	if err := f.Stop(pid); err != nil {
		return nil, err
	}
	stopped := []int{pid}
	for _, c := range children() {
		switch err := f.Stop(c); {
		case err == nil:
			stopped = append(stopped, c)
		case !gone(err):
			return nil, errors.Join(err, f.Cont(stopped...))
		}
	}
	return stopped, nil
}

// childrenOf lists pid's children, from /proc.
func childrenOf(pid int) func() []int { return func() []int { return withChildren(pid)[1:] } }

// End implements Fault.
func (n *PauseServer) End(context.Context) error { return n.Freezer.ContAll(n.stopped...) }

func (n *PauseServer) server() string { return n.Target }

// A Restartable is a server the nemesis may kill and start again.
type Restartable interface {
	// Crash ends the server abruptly: SIGKILL, or an immediate shutdown.
	Crash() error
	// Restart starts it again where it was and waits until it answers.
	Restart(ctx context.Context) error
	// ProcessID is the server's PID now; 0 for none of this machine's.
	ProcessID() int
}

// KillServer crashes a server at Begin and restarts it at End.
type KillServer struct {
	killEvents
	Which  history.Keyword // KindKillRedis or KindKillPostgres
	Target string          // the server's name, as PauseServer's
	Server Restartable
}

// Kind implements Fault.
func (n *KillServer) Kind() history.Keyword { return n.Which }

// Begin implements Fault.
func (n *KillServer) Begin(context.Context, *rand.Rand) (map[history.Keyword]any, error) {
	v := map[history.Keyword]any{}
	if pid := n.Server.ProcessID(); pid > 0 {
		v["pid"] = pid
	}
	return v, n.Server.Crash()
}

// End implements Fault.
func (n *KillServer) End(ctx context.Context) error { return n.Server.Restart(ctx) }

func (n *KillServer) server() string { return n.Target }

// Workers are what KillWorker acts on: the run's worker processes.
type Workers interface {
	Targets() []Target
	// Kill ends the worker in slot with SIGKILL and records its open
	// operation, if any, as :info.
	Kill(slot int) error
	// Replace starts a new worker in slot, under a new process number.
	Replace(ctx context.Context, slot int) error
}

// KillWorker kills a worker in the middle of whatever it does and, at End,
// starts a replacement: a client that crashes and a new one that takes its
// place.
type KillWorker struct {
	killEvents
	Workers Workers
	slot    int
	aim     Slot // as SigStop's
}

func (n *KillWorker) aimAt(worker Slot) { n.aim = worker }
func (n *KillWorker) targets() []Target { return n.Workers.Targets() }

// Kind implements Fault.
func (*KillWorker) Kind() history.Keyword { return KindKillWorker }

// Begin implements Fault.
func (n *KillWorker) Begin(_ context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	t, err := pick(n.Workers.Targets(), r, n.aim)
	if err != nil {
		return nil, err
	}
	n.slot = t.Worker
	return t.value(), n.Workers.Kill(t.Worker)
}

// End implements Fault.
func (n *KillWorker) End(ctx context.Context) error { return n.Workers.Replace(ctx, n.slot) }
