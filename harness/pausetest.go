package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// The paused-holder test: holder A takes the lock and reads; it is paused
// inside its section; holder B takes the lock as soon as the lock lets it,
// reads, writes and releases; then A goes on and writes. A lease lock
// unguarded loses B's update every time; a guard that works rejects A's
// write every time. Nothing in it waits on a guess: B tries to acquire from
// the moment A is paused, and A goes on when B's section is done — or, when
// B cannot take the lock, once the run's Redis clock is a whole lease past
// the end of A's lease counted from its grant (the lock kept the lease for
// A: a renewing lock's watchdog, or a lock with no lease at all).

// A PauseCase is one case of the paused-holder test: a lock, the guard of
// its holders' writes, and how holder A is paused.
type PauseCase struct {
	Lock  string
	Guard client.Guard
	// Pause is nemesis.KindSleep (A blocks in its section; the lock's own
	// work, a watchdog's renewals, runs on) or nemesis.KindStop (A's whole
	// process is stopped: the lock's own work too, by client.Freezer).
	Pause history.Keyword
}

func (c PauseCase) String() string {
	return fmt.Sprintf("%s/%s/%s", c.Lock, c.Guard, c.Pause)
}

// PauseTestKinds are the ways PauseTest pauses a holder: a subset of
// InSectionKinds.
func PauseTestKinds() []history.Keyword {
	return []history.Keyword{nemesis.KindSleep, nemesis.KindStop}
}

// PauseCases are the cases of every lock, guard and pause, in that order.
func PauseCases(locks []string, guards []client.Guard, pauses []history.Keyword) []PauseCase {
	var cs []PauseCase
	for _, l := range locks {
		for _, g := range guards {
			for _, p := range pauses {
				cs = append(cs, PauseCase{Lock: l, Guard: g, Pause: p})
			}
		}
	}
	return cs
}

// A Takeover says what holder B did while A was paused.
type Takeover uint8

const (
	// Took: B took the lock while A was paused: A's lease lapsed.
	Took Takeover = iota + 1
	// Kept: B could not take the lock until a lease past A's lease: the
	// lock kept it for A (a watchdog renewed it).
	Kept
	// Waited: the lock has no lease; B waited for A's release.
	Waited
	// Late: B did not take the lock until a lease past A's lease, yet A's
	// release found its lease lapsed, or B was told it had the lock
	// before A began to release it: B was too slow to take it (a starved
	// machine), and the sequence did not happen. PauseTest runs such a
	// case again.
	Late
)

func (t Takeover) String() string {
	switch t {
	case Took:
		return "took"
	case Kept:
		return "kept"
	case Waited:
		return "waited"
	case Late:
		return "late"
	}
	return "unknown"
}

// A PauseVerdict is what one case of the paused-holder test did.
type PauseVerdict struct {
	Case    PauseCase
	Dir     string          // the case's run directory
	Results checker.Results // the check of its history
	// Taken is what B did while A was paused; After, when B took the
	// lock, how long after A asked for it (the lease began between A's ask
	// and its grant), on the clock of the run's Redis.
	Taken Takeover
	After time.Duration
	// Attempts is how many times the case ran: more than one when B was
	// Late.
	Attempts int
	// Froze says A's lock had work of its own that the stop froze
	// (client.Freezer): with none, a stop pauses A as a sleep does.
	Froze bool
	// Elapsed is the case's wall time, from the counter's reset before A's
	// acquire to its checked run directory (the locks' start not counted:
	// an adapter's interpreter's).
	Elapsed time.Duration
	// Unheld, when A never held the lock, is how its acquire ended, as
	// the history has it: the sequence did not begin.
	Unheld string
	// Complaints are what the holders' adapters did wrong during the case
	// that hiatus lived with (an answer to a request it never sent, or
	// twice to one), as client.Exec's Complaints say them, each after the
	// holder whose adapter it was.
	Complaints []string
}

// Verdict is the case's: Valid when the sequence happened and the check
// found no update lost, Invalid when it found the history invalid (an
// update lost), Unknown when the case reached no verdict on the lock: B
// was Late, A never held the lock (an adapter that broke the protocol, a
// server gone), or the check could not decide. Explanation says why.
func (v PauseVerdict) Verdict() checker.Validity {
	switch {
	case v.Taken == Late:
		return checker.Unknown
	case v.Results.Valid == checker.Invalid:
		return checker.Invalid
	case v.Taken == 0 || v.Results.Valid != checker.Valid:
		return checker.Unknown
	}
	return checker.Valid
}

// Passed says the sequence happened and no update was lost: the check
// found the history valid.
func (v PauseVerdict) Passed() bool { return v.Verdict() == checker.Valid }

// Figures are the lock-counter check's figures of the case's history.
func (v PauseVerdict) Figures() checker.LockFigures {
	f, _ := v.Results.LockFigures()
	return f
}

// Explanation says why the case did not pass: the check's explanation of
// an update lost (Invalid), or why the case reached no verdict (Unknown):
// B Late, A's acquire that failed and what its adapter did wrong, the
// check that could not decide. It is empty for a case that passed.
func (v PauseVerdict) Explanation() string {
	verdict := v.Verdict()
	switch {
	case verdict == checker.Valid:
		return ""
	case v.Taken == Late:
		return fmt.Sprintf("inconclusive after %d attempts: A's lease lapsed, but B did not take the lock within a lease after it (a starved machine?)", v.Attempts)
	}
	var why []string
	if len(v.Complaints) > 0 { // first: the cause of what follows
		why = append(why, "the adapter broke the protocol: "+strings.Join(v.Complaints, "; "))
	}
	if v.Unheld != "" {
		why = append(why, "holder A never held the lock: its acquire ended "+v.Unheld)
	}
	for _, r := range v.Results.Checks {
		if r.Valid == verdict && r.Explanation != "" {
			why = append(why, r.Name+": "+r.Explanation)
		}
	}
	switch {
	case len(why) > 0:
		return strings.Join(why, "; ")
	case verdict == checker.Invalid:
		return "the check found the history invalid"
	}
	return "the case reached no verdict" // interrupted: B never took the lock
}

// PauseTest runs the paused-holder test on hiatus's locks and adapters:
// see Lab.PauseTest.
func PauseTest(ctx context.Context, cfg Config, cases []PauseCase, each func(PauseVerdict)) ([]PauseVerdict, error) {
	return Lab{}.PauseTest(ctx, cfg, cases, each)
}

// PauseTest runs each case of the paused-holder test, on the lab's locks
// and hiatus's, and hands each verdict to each (if not nil) as it is
// reached. cfg gives the servers (throwaway ones are started once for all
// cases when it names none), the store, the lease, the retry and the
// timeouts; each case is kept as a run of cfg.Name (its test.edn names
// the lock, guard and pause), with history, results and timeline. Runs on
// servers shared with others at the same time need a Name and CounterID
// of their own. A case whose B was Late runs again, up to three times in
// all. The holders run in this process (a lock of the lab's is built by
// its LockKind's New); an adapter's lock is its own process, which a stop
// stops.
func (l Lab) PauseTest(ctx context.Context, cfg Config, cases []PauseCase, each func(PauseVerdict)) ([]PauseVerdict, error) {
	cfg.own = l.Locks
	cfg.Workers, cfg.Nemesis, cfg.InjectEvery, cfg.Hosts, cfg.Work = 2, "", 1, HostsLocal, 0
	cfg.Pause = 2 * cfg.Lease
	cfg.NoPlots = true // plots of twenty ops say nothing, and took most of a case's time
	for _, c := range cases {
		if err := c.config(cfg).Validate(); err != nil {
			return nil, fmt.Errorf("case %s: %w", c, err)
		}
	}
	if err := store.Writable(cfg.Store); err != nil {
		return nil, &SetupError{Err: err}
	}
	stop, err := StartServers(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	var out []PauseVerdict
	for len(cases) > 0 && ctx.Err() == nil {
		n := 1
		for n < len(cases) && cases[n].Lock == cases[0].Lock {
			n++
		}
		vs, err := pauseLock(ctx, cfg, cases[:n], each)
		out = append(out, vs...)
		if err != nil {
			return out, err
		}
		cases = cases[n:]
	}
	if ctx.Err() != nil {
		return out, ErrInterrupted
	}
	return out, nil
}

// config is c's run of cfg.
func (c PauseCase) config(cfg Config) Config {
	cfg.Lock, cfg.Guard, cfg.PauseKind = c.Lock, c.Guard, c.Pause
	return cfg
}

// pauseLock runs cases, all of one lock, on one set of the lock's servers
// (etcd's, redlock's nodes), with one pair of locks fenced and one not.
func pauseLock(ctx context.Context, cfg Config, cases []PauseCase, each func(PauseVerdict)) (_ []PauseVerdict, err error) {
	lcfg := cases[0].config(cfg).runPlan()
	env, err := startEnv(ctx, context.WithoutCancel(ctx), &lcfg, nil)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, env.close()) }()
	locks := map[bool]*holders{}
	defer func() {
		for _, h := range locks {
			h.close()
		}
	}()
	var out []PauseVerdict
	for _, c := range cases {
		if ctx.Err() != nil {
			break
		}
		ccfg := c.config(lcfg.Config).runPlan()
		fenced := ccfg.guard().Fenced()
		if locks[fenced] == nil {
			h, err := newHolders(ctx, ccfg, env)
			if err != nil {
				return out, fmt.Errorf("case %s: %w", c, err)
			}
			locks[fenced] = h
		}
		var v PauseVerdict
		for v.Attempts < lateAttempts && (v.Attempts == 0 || v.Taken == Late) && ctx.Err() == nil {
			n := v.Attempts + 1
			if v, err = pauseCase(ctx, ccfg, env, locks[fenced]); err != nil {
				return out, fmt.Errorf("case %s: %w", c, err)
			}
			v.Attempts = n
		}
		v.Case = c
		out = append(out, v)
		if each != nil {
			each(v)
		}
	}
	return out, nil
}

// lateAttempts is how many times a case runs while B is Late.
const lateAttempts = 3

// holders are the locks of holders A and B.
type holders struct {
	a, b           client.Lock
	closeA, closeB func()
	told           [2]int // how many of each lock's complaints were told
}

// A complainer is a lock that says what its adapter did wrong:
// client.Exec.
type complainer interface{ Complaints() []string }

// complaints are what the holders' adapters did wrong since it was last
// asked, each named by its holder.
func (h *holders) complaints() []string {
	var out []string
	for i, l := range []client.Lock{h.a, h.b} {
		c, ok := l.(complainer)
		if !ok {
			continue
		}
		all := c.Complaints()
		for _, s := range all[min(h.told[i], len(all)):] {
			out = append(out, fmt.Sprintf("holder %c's adapter %s", 'A'+i, s))
		}
		h.told[i] = len(all)
	}
	return out
}

func newHolders(ctx context.Context, cfg runPlan, env *env) (*holders, error) {
	h := &holders{closeA: func() {}, closeB: func() {}}
	var err error
	if h.a, h.closeA, err = workerLock(ctx, cfg.workerConfig(env.topo, 0, 0), env.rdb, env.db, cfg.own); err != nil {
		return nil, fmt.Errorf("holder A's lock: %w", err)
	}
	if h.b, h.closeB, err = workerLock(ctx, cfg.workerConfig(env.topo, 1, 1), env.rdb, env.db, cfg.own); err != nil {
		h.closeA()
		return nil, fmt.Errorf("holder B's lock: %w", err)
	}
	return h, nil
}

func (h *holders) close() { h.closeA(); h.closeB() }

// pauseCase runs one case on env's servers and keeps it as a run.
func pauseCase(ctx context.Context, cfg runPlan, env *env, h *holders) (PauseVerdict, error) {
	bg := context.WithoutCancel(ctx)
	began := time.Now()
	env.resource = cfg.resource(env.db)
	if err := env.resource.Setup(bg); err != nil {
		return PauseVerdict{}, setupErrorf("PostgreSQL at %s: %v", Redact(cfg.PostgresURL), err)
	}
	run, start, lg, err := createRun(bg, cfg, env, io.Discard)
	if err != nil {
		return PauseVerdict{}, err
	}
	defer lg.close()
	lg.logf("run %s: the paused-holder test (hiatus pause-test) of lock %s, guard %s, pause %s, lease %v",
		run.Dir, cfg.Lock, cfg.guard(), cfg.PauseKind, cfg.Lease)
	col, journal, err := openJournal(run, 2)
	if err != nil {
		return PauseVerdict{}, err
	}
	defer journal.Close()
	clock := client.NewRedisClock(env.rdb, start)
	p := &pausedHolder{cfg: cfg.Config, clock: clock, rec: col.record, resource: env.resource, lg: lg}
	v := p.run(ctx, h)
	v.Complaints = h.complaints()
	for _, c := range v.Complaints {
		lg.logf("%s", c)
	}
	final(bg, clock, env.resource, col, 2)
	rs, err := finish(bg, cfg, env, run, col, lg)
	if err != nil {
		return PauseVerdict{}, err
	}
	lg.logf("results: valid? %v; B %s the lock", rs.Valid, v.Taken)
	v.Dir, v.Results, v.Elapsed = run.Dir, rs, time.Since(began)
	return v, nil
}

// A pausedHolder runs the paused-holder sequence once.
type pausedHolder struct {
	cfg      Config
	clock    client.Clock
	rec      func(history.Op)
	resource client.Resource
	lg       *runLog
}

// run runs A's section and B's, and says what B did while A was paused.
func (p *pausedHolder) run(ctx context.Context, h *holders) PauseVerdict {
	var v PauseVerdict
	var askedA, grantedA, grantedB, releasingA atomic.Int64 // on the server's clock
	var releasedA atomic.Value                              // how A's release ended: its history.Type
	var unheld atomic.Value                                 // how A's acquire ended when it did not grant: words
	inside, resume := make(chan client.Grant, 1), make(chan struct{})
	a := p.worker(h.a, 0, func(o history.Op) {
		switch {
		case o.F == history.FAcquire && o.Type == history.Invoke:
			askedA.Store(o.Time)
		case o.F == history.FAcquire && o.Type == history.Ok:
			grantedA.Store(o.Time)
		case o.F == history.FAcquire:
			unheld.Store(fmt.Sprintf(":%s, %v", o.Type, o.Error))
		case o.F == history.FRelease && o.Type == history.Invoke:
			releasingA.Store(o.Time)
		case o.F == history.FRelease:
			releasedA.Store(o.Type)
		}
	}, func(ctx context.Context, s client.Section) {
		pause := map[history.Keyword]any{"kind": p.cfg.PauseKind, "process": int64(s.Process), "ms": p.cfg.Pause.Milliseconds()}
		p.event(history.FPause, pause)
		thaw := func() {}
		if f, ok := h.a.(client.Freezer); ok && p.cfg.PauseKind == nemesis.KindStop {
			thaw, v.Froze = f.Freeze(), true
		}
		inside <- s.Grant
		<-resume
		thaw()
		p.event(history.FResume, pause)
	})
	bGot := make(chan struct{})
	b := p.worker(h.b, 1, func(o history.Op) {
		if o.F == history.FAcquire && o.Type == history.Ok {
			grantedB.Store(o.Time)
			close(bGot)
		}
	}, nil)

	aDone, bDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(aDone); _ = a.Section(ctx) }()
	var g client.Grant
	select {
	case g = <-inside:
	case <-aDone: // A never held: its acquire failed, and the history says why
		v.Unheld, _ = unheld.Load().(string)
		return v
	}
	// B's wait is bounded only against a lock that never grants again.
	bctx, cancel := context.WithTimeout(ctx, 4*p.cfg.Lease+2*p.cfg.OpTimeout)
	defer cancel()
	go func() { defer close(bDone); _ = b.Section(bctx) }()
	v.Taken = p.await(ctx, g, grantedA.Load(), bGot, bDone)
	if v.Taken == Took {
		v.After = time.Duration(grantedB.Load() - askedA.Load())
	}
	close(resume)
	<-aDone
	<-bDone
	// The lease was not kept, but lapsed unseen, when A's release found
	// it lapsed, or when B was told it had the lock before A began to
	// release it: a lock whose release cannot tell (a plain DEL) says so
	// only by B.
	if v.Taken == Kept && (releasedA.Load() != history.Ok || grantedB.Load() != 0 && grantedB.Load() < releasingA.Load()) {
		v.Taken = Late
	}
	return v
}

// await holds A paused until B's section is done, or until the server's
// clock is a lease past the end of A's lease, which began before A was
// told it had the lock, at granted (B could not take the lock), and says
// which. The grant, not the ask: on a starved machine an acquire takes a
// lease's time, and a lease counted from the ask is not over when A
// wakes. B's acquisition, not its read, decides: a B that holds the lock
// finishes its section before A goes on.
func (p *pausedHolder) await(ctx context.Context, g client.Grant, granted int64, bGot, bDone <-chan struct{}) Takeover {
	lease, none := g.Lease, g.Lease <= 0
	if none {
		lease = p.cfg.Lease
	}
	until := granted + 2*lease.Nanoseconds()
	tick := time.NewTicker(max(time.Millisecond, lease/100))
	defer tick.Stop()
	for {
		select {
		case <-bGot:
			<-bDone
			return Took
		case <-ctx.Done():
			return 0
		case <-tick.C:
		}
		if p.clock.Now(ctx) < until {
			continue
		}
		if none {
			return Waited
		}
		return Kept
	}
}

// worker is holder p's worker on lock l; seen sees each op it records,
// once recorded.
func (p *pausedHolder) worker(l client.Lock, proc history.Process, seen func(history.Op), hook client.Hook) *client.Worker {
	return &client.Worker{Lock: l, Workload: p.resource, Clock: p.clock, Process: proc, Stride: 2,
		OpTimeout: p.cfg.OpTimeout, Hook: hook, Record: func(o history.Op) {
			p.rec(o)
			seen(o)
		}}
}

// event records an event of the nemesis's process, now.
func (p *pausedHolder) event(f history.Keyword, v map[history.Keyword]any) {
	p.lg.logf("nemesis: %s %s", f, history.AppendValue(nil, v))
	p.rec(history.Op{Index: history.Unset, Time: p.clock.Now(context.Background()), Type: history.Info,
		Process: history.Nemesis, F: f, Value: v})
}
