package client

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/jackc/pgx/v5"
)

// InfoWrite names the write o is, when o is an :info write that the audit
// table can settle: one that carries its :section.
func InfoWrite(o history.Op) (WriteID, bool) {
	if !o.IsClient() || !history.IsWrite(o.F) || o.Type != history.Info {
		return WriteID{}, false
	}
	s, ok := history.Int(o.Get(history.KeySection))
	return WriteID{Process: int64(o.Process), Section: s}, ok
}

// Resolve turns an :info write into what the audit table says happened:
// :ok when the write is there, :fail when it is not; the op keeps its
// :error and gains :resolved :audit. Other ops, and :info writes not among
// asked (the writes whose audit rows were read), are returned as they are,
// with false. Call it only when no write can still be in flight: every
// worker has ended and its server sessions with it.
func Resolve(o history.Op, asked, audited map[WriteID]bool) (history.Op, bool) {
	id, ok := InfoWrite(o)
	if !ok || !asked[id] {
		return o, false
	}
	o = o.With(history.KeyResolved, history.Keyword("audit"))
	o.Type = history.Fail
	if audited[id] {
		o.Type = history.Ok
	}
	return o, true
}

// A Section tells a Hook which critical section it is called in.
type Section struct {
	Process history.Process // the worker's process number now
	N       int             // the worker's section number, from 1
	Grant   Grant
}

// A Hook is called inside each critical section, after the read and before
// the write: the place where a holder that stalls loses its lease. The
// nemesis's in-section pause is one; a test can block on a channel there.
type Hook func(ctx context.Context, s Section)

// A Worker runs critical sections — acquire, read, work, write, release —
// and records every step as an invocation and a completion.
type Worker struct {
	Lock     Lock
	Workload Workload // what each section does with the resource
	Clock    Clock
	Record   func(history.Op) // called from the worker's goroutine only
	Process  history.Process  // the process number ops are recorded under
	// Stride is added to Process after an op completes :info: as in Jepsen,
	// a process whose op has an unknown outcome never invokes again.
	Stride    int64
	Work      time.Duration // simulated work between read and write
	OpTimeout time.Duration // bound on each read, write and release; DefaultOpTimeout when 0
	Hook      Hook          // optional
	// ExtendBeforeWrite has the holder, right before its write, ask its
	// lock (an Extender) to extend the grant, and write only when it did:
	// what a careful user of a renewing lock does. The ask is an :extend op.
	ExtendBeforeWrite bool
	// Renewals, when set, records what the lock does on its own while a
	// grant is held (its renewals) as :renew ops of the holder's renewer.
	Renewals *Renewals

	sections int
	failures int // acquires in a row that failed with an error
}

// Run runs critical sections until ctx ends. A section that has begun is
// finished: the lock is released and the write is not abandoned. After an
// acquire that failed with an error (the lock's server is down, say) it
// backs off, up to 100 ms, rather than fill the history with failures. It
// stops early, with the lock's error, when the lock is gone (ErrLockGone).
func (w *Worker) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := w.Section(ctx); err != nil {
			return err
		}
		if w.failures > 0 {
			d := min(time.Duration(1<<min(w.failures, 7))*time.Millisecond, 100*time.Millisecond)
			wait(ctx, d)
		}
	}
	return nil
}

// Section runs one critical section. Acquire waits until ctx ends; the
// steps after it run to their end under OpTimeout each. It returns an error
// only when the lock is gone (ErrLockGone), once the section is recorded.
func (w *Worker) Section(ctx context.Context) error {
	w.sections++
	w.invoke(ctx, history.FAcquire, nil, nil)
	g, err := w.Lock.Acquire(withHolder(ctx, w.Renewals, w.Process))
	switch {
	case errors.Is(err, ErrGaveUp):
		w.complete(ctx, history.Fail, history.FAcquire, nil, history.ErrTimeout, nil)
		return nil
	case err != nil:
		w.failures++
		w.complete(ctx, outcome(err), history.FAcquire, nil, err.Error(), nil)
		if errors.Is(err, ErrLockGone) {
			return err
		}
		return nil
	}
	w.failures = 0
	extra := map[history.Keyword]any{history.KeyToken: g.Token}
	if g.Lease > 0 {
		extra[history.KeyLeaseMS] = g.Lease.Milliseconds()
	}
	if g.Fence > 0 {
		extra[history.KeyFence] = g.Fence
	}
	w.complete(ctx, history.Ok, history.FAcquire, nil, nil, extra)

	// The section is finished even when the run ends meanwhile.
	sctx := context.WithoutCancel(ctx)
	w.step(sctx, g)
	// After an :info the release goes under the worker's new process number.
	return w.release(sctx, g)
}

// step runs read, work, hook and write.
func (w *Worker) step(ctx context.Context, g Grant) {
	wl := w.Workload
	guard := wl.WriteGuard()
	var fenced map[history.Keyword]any // the fence the guard checks, on the ops it checks it on
	if guard.Fenced() {
		fenced = map[history.Keyword]any{history.KeyFence: g.Fence}
	}
	var readExtra map[history.Keyword]any
	if guard == GuardFenceRMW {
		readExtra = fenced
	}
	w.invoke(ctx, history.FRead, nil, readExtra)
	rctx, cancel := w.opContext(ctx)
	v, err := wl.SectionRead(rctx, g.Fence)
	cancel()
	switch {
	case errors.Is(err, ErrStale):
		w.complete(ctx, history.Fail, history.FRead, nil, history.ErrStaleFence, readExtra)
		return
	case err != nil:
		// A plain read changes nothing, so one that did not answer is a
		// :fail; a fence-rmw read records its fence, so one that did not
		// answer may have, and is :info.
		t := history.Fail
		if guard == GuardFenceRMW {
			t = outcome(err)
		}
		w.complete(ctx, t, history.FRead, nil, err.Error(), readExtra)
		return
	}
	w.complete(ctx, history.Ok, history.FRead, v, nil, readExtra)

	if w.Work > 0 {
		time.Sleep(w.Work)
	}
	if w.Hook != nil {
		w.Hook(ctx, Section{Process: w.Process, N: w.sections, Grant: g})
	}
	if w.ExtendBeforeWrite && !w.extend(ctx, g) {
		return
	}

	// :section names the write in the audit table, where an :info write is
	// looked up after the run.
	id := WriteID{Process: int64(w.Process), Section: int64(w.sections)}
	extra := map[history.Keyword]any{history.KeySection: id.Section}
	maps.Copy(extra, fenced)
	next, f := wl.Next(v, id), wl.WriteOp()
	w.invoke(ctx, f, next, extra)
	wctx, cancel := w.opContext(ctx)
	err = wl.SectionWrite(wctx, next, v, g.Fence, id)
	cancel()
	switch {
	case err == nil:
		w.complete(ctx, history.Ok, f, next, nil, extra)
	case errors.Is(err, ErrStale):
		w.complete(ctx, history.Fail, f, next, history.ErrStaleFence, extra)
	case errors.Is(err, ErrChanged):
		w.complete(ctx, history.Fail, f, next, history.ErrChanged, extra)
	case errors.Is(err, pgx.ErrNoRows):
		w.complete(ctx, history.Fail, f, next, err.Error(), extra)
	default:
		w.complete(ctx, outcome(err), f, next, err.Error(), extra)
	}
}

// extend asks the lock to extend g, and says whether it did.
func (w *Worker) extend(ctx context.Context, g Grant) bool {
	w.invoke(ctx, history.FExtend, nil, nil)
	var err error = &Refused{Reason: "the lock cannot extend a grant (it is no Extender)"}
	if e, ok := w.Lock.(Extender); ok {
		ectx, cancel := w.opContext(ctx)
		err = e.Extend(ectx, g)
		cancel()
	}
	t, e := heldOutcome(err)
	w.complete(ctx, t, history.FExtend, nil, e, nil)
	return err == nil
}

// heldOutcome is how a release or an extend ended: :ok, a :fail that says
// the grant was not the holder's any more (:expired, :stolen, :lost), or
// the error's own outcome.
func heldOutcome(err error) (history.Type, any) {
	switch {
	case err == nil:
		return history.Ok, nil
	case errors.Is(err, ErrNotHeld):
		return history.Fail, history.ErrExpired
	case errors.Is(err, ErrStolen):
		return history.Fail, history.ErrStolen
	case errors.Is(err, ErrLost):
		return history.Fail, history.ErrLost
	}
	return outcome(err), err.Error()
}

func (w *Worker) release(ctx context.Context, g Grant) error {
	w.invoke(ctx, history.FRelease, nil, nil)
	rctx, cancel := w.opContext(ctx)
	err := w.Lock.Release(rctx, g)
	cancel()
	t, e := heldOutcome(err)
	w.complete(ctx, t, history.FRelease, nil, e, nil)
	if errors.Is(err, ErrLockGone) {
		return err
	}
	return nil
}

// DefaultOpTimeout bounds an op whose worker or lock was given no
// OpTimeout; it is --op-timeout's default.
const DefaultOpTimeout = 5 * time.Second

func (w *Worker) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := w.OpTimeout
	if d <= 0 {
		d = DefaultOpTimeout
	}
	return context.WithTimeout(ctx, d)
}

func (w *Worker) invoke(ctx context.Context, f history.Keyword, value any, extra map[history.Keyword]any) {
	w.Record(history.Op{Index: history.Unset, Time: w.Clock.Now(ctx), Type: history.Invoke,
		Process: w.Process, F: f, Value: value, Extra: extra})
}

// complete records a completion. After an :info the worker takes a new
// process number, as Jepsen does.
func (w *Worker) complete(ctx context.Context, t history.Type, f history.Keyword, value, errVal any, extra map[history.Keyword]any) {
	w.Record(history.Op{Index: history.Unset, Time: w.Clock.Now(ctx), Type: t,
		Process: w.Process, F: f, Value: value, Error: errVal, Extra: extra})
	if t == history.Info {
		w.Process += history.Process(w.Stride)
	}
}
