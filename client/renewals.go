package client

import (
	"context"
	"slices"
	"sync"

	"github.com/hiatus-dev/hiatus/history"
)

// Renewals records the calls a lock makes on its own while a grant is
// held — a watchdog's renewals, an adapter's library's — as :renew ops,
// which no worker op makes: they run beside the worker's ops, so each goes
// under a renewer process of the grant's holder (history.Renewer): its
// first, :renew-P, while no other renewal of P's grants is open; another,
// :renew-P-1 and on, when two run at once (hiatus's watchdog and an
// adapter's library) and after a renewal of unknown outcome, whose renewer
// never invokes again, as a worker whose op completed :info takes a new
// process. A Worker with Renewals hands them, with its process, to its
// lock's Acquire in the context (see RecordRenewal); a lock used elsewhere
// renews unrecorded.
type Renewals struct {
	Clock  Clock
	Record func(history.Op) // safe for concurrent use

	mu       sync.Mutex
	renewers map[history.Process]*renewers // by holder
}

// renewers are one holder's renewer processes: how many it has had, and
// those with no renewal open and none of unknown outcome (free).
type renewers struct {
	n    int
	free []int // generations, lowest last
}

// A holder is the worker process a grant is acquired for, and what its
// lock's renewals are recorded by.
type holder struct {
	renewals *Renewals
	process  history.Process
}

type holderKey struct{}

// withHolder returns ctx carrying the holder of the grant an Acquire under
// it takes: the lock's renewals of that grant are recorded as its.
func withHolder(ctx context.Context, r *Renewals, p history.Process) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, holderKey{}, holder{renewals: r, process: p})
}

// holderOf returns the holder ctx carries, if any.
func holderOf(ctx context.Context) (holder, bool) {
	h, ok := ctx.Value(holderKey{}).(holder)
	return h, ok
}

// RecordRenewal runs renew, one renewal of g that a lock makes on its own
// (by history.ByWatchdog or history.ByAdapter), and records it as a :renew
// op of a renewer of g's holder when ctx, the context of the Acquire that
// granted g (or one made from it), names one; it returns renew's error.
// renew's error is classified as a release's or an extend's is: nil :ok;
// ErrLost, ErrNotHeld or ErrStolen :fail (:lost, :expired, :stolen); a
// refusal :fail; any other error, whose outcome is unknown, :info.
func RecordRenewal(ctx context.Context, by history.Keyword, g Grant, renew func(context.Context) error) error {
	h, ok := holderOf(ctx)
	if !ok {
		return renew(ctx)
	}
	rn := h.begin(ctx, by, g)
	err := renew(ctx)
	rn.end(ctx, err)
	return err
}

// A renewing is a renewal recorded as begun, to be recorded as ended.
type renewing struct {
	h     holder
	gen   int
	p     history.Process
	known bool // the holder has renewers (a worker's process)
	extra map[history.Keyword]any
}

// begin records the invocation of a renewal of g by its holder h's lock.
func (h holder) begin(ctx context.Context, by history.Keyword, g Grant) renewing {
	extra := map[history.Keyword]any{history.KeyToken: g.Token, history.KeyBy: by}
	if g.Lease > 0 {
		extra[history.KeyLeaseMS] = g.Lease.Milliseconds()
	}
	r := h.renewals
	gen := r.take(h.process)
	p, known := history.Renewer(h.process, gen)
	if known {
		r.Record(history.Op{Index: history.Unset, Time: r.Clock.Now(ctx), Type: history.Invoke, Process: p, F: history.FRenew, Extra: extra})
	}
	return renewing{h: h, gen: gen, p: p, known: known, extra: extra}
}

// end records the renewal's completion, as err says it ended.
func (rn renewing) end(ctx context.Context, err error) {
	r := rn.h.renewals
	t, e := heldOutcome(err)
	if rn.known {
		r.Record(history.Op{Index: history.Unset, Time: r.Clock.Now(ctx), Type: t, Process: rn.p, F: history.FRenew, Error: e, Extra: rn.extra})
	}
	r.give(rn.h.process, rn.gen, t != history.Info)
}

// take returns the generation of a renewer of holder's with no renewal
// open: the lowest free one, or a new one.
func (r *Renewals) take(holder history.Process) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.renewers == nil {
		r.renewers = map[history.Process]*renewers{}
	}
	rs := r.renewers[holder]
	if rs == nil {
		rs = &renewers{}
		r.renewers[holder] = rs
	}
	if n := len(rs.free); n > 0 {
		gen := rs.free[n-1]
		rs.free = rs.free[:n-1]
		return gen
	}
	rs.n++
	return rs.n - 1
}

// give returns a renewer whose renewal ended, unless it may never invoke
// again (reuse false: the renewal's outcome is unknown).
func (r *Renewals) give(holder history.Process, gen int, reuse bool) {
	if !reuse {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rs := r.renewers[holder]
	i := len(rs.free)
	for i > 0 && rs.free[i-1] < gen { // lowest last
		i--
	}
	rs.free = slices.Insert(rs.free, i, gen)
}
