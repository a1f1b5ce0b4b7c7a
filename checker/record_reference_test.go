package checker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/hiatus-dev/hiatus/history"
	"pgregory.net/rapid"
)

// A lockSim runs workers on a simulated lock server, one key with a
// lease, and writes both what the workers were told (the history) and
// what the server did (its record), with the flaws the record's checks
// look for drawn at random: a library that gives up on a grant it was
// given, takes its fence late, deletes the key with a renewal, answers a
// release ok whatever it found; a server that grants over a live key; and
// kills of holders. It keeps the truth as it goes: which grant each
// worker was told of, when each section ended, which answers were false.
type lockSim struct {
	t        *rapid.T
	now      int64 // the current tick (ms)
	seq      int64 // events this tick: each gets a time of its own
	workers  int
	lease    int64
	shared   bool // the history's tokens are the key's
	ops, rec []history.Op
	key      simKey
	fence    int64
	grants   []simGrant
	falseOKs int
	nextTok  int
	over     []simOver // the grants the server made over a live key
	lies     []string
}

// lie counts a false ok, and says what it was.
func (s *lockSim) lie(format string, args ...any) {
	s.falseOKs++
	s.lies = append(s.lies, fmt.Sprintf(format, args...))
}

// A simOver is a grant the server made over the key of grant prev.
type simOver struct {
	prev int
	at   int64
}

type simKey struct {
	token    string
	grant    int // index into grants; -1 when free
	deadline int64
}

// A simGrant is a grant of the key: its token, who was told of it and
// until when they held it, and its fence.
type simGrant struct {
	token      string
	start, end int64 // the key's span: end is when it left the key (MaxInt64: never)
	expired    bool  // it ended by its deadline
	told       bool  // a worker's acquire was answered with it
	heldTo     int64 // when that worker's section ended
	killed     bool
	assigned   bool  // a worker is being answered with it, or was
	fence      int64 // 0: none
	fenceAt    int64
	slot       int  // the worker slot granted it
	keep       bool // lost by the library, which keeps its lease alive (etcd's session)
	undone     bool // deleted by its worker's give-up at the run's end
}

// A simWorker is one worker slot.
type simWorker struct {
	slot, proc int
	state      int // 0 idle, 1 waiting, 2 answering, 3 holding, 4 dead
	grant      int // the grant it holds or is being answered with
	until      int64
	sections   int
	fenceLate  bool
}

// time is the time of the next event, each its own; the key's deadline,
// if it has passed by then, is an expiry first.
func (s *lockSim) time() int64 {
	s.seq++
	at := s.now*1e6 + s.seq*1000
	s.expireBy(at)
	return at
}

func (s *lockSim) op(typ history.Type, p int, f history.Keyword, extra map[history.Keyword]any, errv any) {
	s.ops = append(s.ops, history.Op{Time: s.time(), Type: typ, Process: history.Process(p), F: f, Extra: extra, Error: errv})
}

func (s *lockSim) event(act history.Keyword, at int64, client, token string, extra map[history.Keyword]any) {
	m := map[history.Keyword]any{history.KeyKey: "lock", history.KeyClient: client}
	if token != "" {
		m[history.KeyToken] = token
	}
	for k, v := range extra {
		m[k] = v
	}
	s.rec = append(s.rec, history.Op{Time: at, Type: history.Info, Process: -2, F: act, Extra: m})
}

// expire removes the key if its deadline has passed, at its deadline.
func (s *lockSim) expire() { s.expireBy(s.now*1e6 + s.seq*1000) }

func (s *lockSim) expireBy(at int64) {
	if s.key.grant >= 0 && s.key.deadline <= at {
		s.event(history.SExpire, s.key.deadline, "", s.key.token, nil)
		s.grants[s.key.grant].end = s.key.deadline
		s.grants[s.key.grant].expired = true
		s.key.grant = -1
	}
}

func (s *lockSim) grantKey(w *simWorker, at int64) int {
	s.nextTok++
	tok := fmt.Sprintf("k%d", s.nextTok)
	if s.key.grant >= 0 { // the server grants over a live key
		s.grants[s.key.grant].end = at
		s.over = append(s.over, simOver{s.key.grant, at})
	}
	s.key = simKey{token: tok, grant: len(s.grants), deadline: at + s.lease*1e6 + 1}
	s.event(history.SGrant, at, fmt.Sprintf("worker-%d", w.slot), tok, map[history.Keyword]any{history.KeyDeadline: s.key.deadline})
	s.grants = append(s.grants, simGrant{token: tok, start: at, end: 1<<63 - 1, heldTo: 1<<63 - 1, slot: w.slot})
	return len(s.grants) - 1
}

func (s *lockSim) takeFence(w *simWorker) {
	s.fence++
	g := &s.grants[w.grant]
	g.fence, g.fenceAt = s.fence, s.time()
	s.event(history.SFence, g.fenceAt, fmt.Sprintf("worker-%d", w.slot), "", nil)
	s.rec[len(s.rec)-1].Value = s.fence
}

// step acts for worker w at this tick.
func (s *lockSim) step(w *simWorker) {
	s.expire()
	switch w.state {
	case 0:
		if w.sections < 3 && rapid.IntRange(0, 2).Draw(s.t, "begin") == 0 {
			w.sections++
			s.op(history.Invoke, w.proc, history.FAcquire, nil, nil)
			w.state = 1
		}
	case 1:
		if k := s.key.grant; k >= 0 && s.grants[k].keep && s.grants[k].slot == w.slot {
			at := s.time() // the library's keep-alive of the grant it lost
			s.key.deadline = at + s.lease*1e6 + 1
			s.event(history.SRenew, at, fmt.Sprintf("worker-%d", w.slot), s.key.token, map[history.Keyword]any{history.KeyDeadline: s.key.deadline})
			return
		}
		s.tryAcquire(w)
	case 2:
		if s.now >= w.until {
			s.answer(w)
		}
	case 3:
		s.hold(w)
	}
}

// tryAcquire is a waiting worker's SET NX.
func (s *lockSim) tryAcquire(w *simWorker) {
	at := s.time()
	if s.key.grant >= 0 && rapid.IntRange(0, 12).Draw(s.t, "server grants over") != 0 {
		s.event(history.SRefuse, at, fmt.Sprintf("worker-%d", w.slot), s.key.token, nil)
		return
	}
	g := s.grantKey(w, at)
	if rapid.IntRange(0, 5).Draw(s.t, "library gives up") == 0 {
		// the grant goes to no one: the worker asks again, or, the
		// library keeping the lost grant alive, waits on it to the end
		s.grants[g].keep = rapid.IntRange(0, 2).Draw(s.t, "library keeps it") == 0
		return
	}
	w.grant, w.state = g, 2
	s.grants[g].assigned = true
	w.fenceLate = rapid.IntRange(0, 4).Draw(s.t, "fence late") == 0
	w.until = s.now + rapid.Int64Range(0, 1).Draw(s.t, "answer in")
	if w.fenceLate {
		w.until = s.now + rapid.Int64Range(1, 2*s.lease).Draw(s.t, "fence in")
	} else {
		s.takeFence(w)
	}
}

// answer answers a worker's acquire with its grant.
func (s *lockSim) answer(w *simWorker) {
	if w.fenceLate {
		s.takeFence(w)
	}
	g := &s.grants[w.grant]
	tok := g.token
	if !s.shared {
		tok = "h-" + tok
	}
	g.told = true
	s.op(history.Ok, w.proc, history.FAcquire, map[history.Keyword]any{history.KeyToken: tok, history.KeyLeaseMS: s.lease, history.KeyFence: g.fence}, nil)
	// An answer after its key expired is no lie: its grant, made while
	// the acquire was in flight, held the lock at some moment before the
	// answer, when it may have been given (a late ok: heldDuring). After
	// any other end it is.
	if g.end < s.ops[len(s.ops)-1].Time && !g.expired {
		s.lie("acquire %s answered after its key was gone", g.token)
	}
	w.state, w.until = 3, s.now+rapid.Int64Range(1, 2*s.lease).Draw(s.t, "hold")
	s.op(history.Invoke, w.proc, history.FRead, nil, nil)
}

// hold is a holder's tick: killed, renewing, or done.
func (s *lockSim) hold(w *simWorker) {
	g := &s.grants[w.grant]
	switch {
	case rapid.IntRange(0, 15).Draw(s.t, "killed") == 0:
		at := s.time()
		s.ops = append(s.ops, history.Op{Time: at, Type: history.Info, Process: history.Nemesis, F: history.FKill,
			Value: map[history.Keyword]any{"kind": history.Keyword("kill-worker"), "process": int64(w.proc)}})
		s.op(history.Info, w.proc, history.FRead, nil, history.ErrKilled)
		g.heldTo, g.killed = s.ops[len(s.ops)-1].Time, true
		w.state = 4
	case s.now < w.until && rapid.IntRange(0, 3).Draw(s.t, "renew") == 0:
		s.renew(w)
	case s.now >= w.until:
		s.op(history.Ok, w.proc, history.FRead, nil, nil)
		s.release(w)
	}
}

// renew is a renewal by the holder's watchdog.
func (s *lockSim) renew(w *simWorker) {
	g := &s.grants[w.grant]
	renewer, _ := history.Renewer(history.Process(w.proc), 0)
	tok := g.token
	if !s.shared {
		tok = "h-" + tok
	}
	extra := map[history.Keyword]any{history.KeyToken: tok}
	s.ops = append(s.ops, history.Op{Time: s.time(), Type: history.Invoke, Process: renewer, F: history.FRenew, Extra: extra})
	at := s.time() // the server's act
	mine := s.key.grant == w.grant
	typ, errv := history.Type(history.Ok), any(nil)
	switch {
	case mine && rapid.IntRange(0, 5).Draw(s.t, "renewal deletes") == 0:
		s.event(history.SDelete, at, fmt.Sprintf("worker-%d", w.slot), g.token, map[history.Keyword]any{history.KeyCommand: "PEXPIRE lock 0"})
		g.end, s.key.grant = at, -1
		s.lie("renewal deleted %s", g.token)
	case mine:
		s.key.deadline = at + s.lease*1e6 + 1
		s.event(history.SRenew, at, fmt.Sprintf("worker-%d", w.slot), g.token, map[history.Keyword]any{history.KeyDeadline: s.key.deadline})
	default:
		typ, errv = history.Fail, history.ErrLost
	}
	s.ops = append(s.ops, history.Op{Time: s.time(), Type: typ, Process: renewer, F: history.FRenew, Extra: extra, Error: errv})
}

// release is a holder's release: a compare-and-delete, answered as the
// library answers it.
func (s *lockSim) release(w *simWorker) {
	g := &s.grants[w.grant]
	s.op(history.Invoke, w.proc, history.FRelease, nil, nil)
	at := s.time() // the server's act
	if s.key.grant == w.grant {
		s.event(history.SDelete, at, fmt.Sprintf("worker-%d", w.slot), g.token, nil)
		g.end, s.key.grant = at, -1
		s.op(history.Ok, w.proc, history.FRelease, nil, nil)
	} else if rapid.IntRange(0, 3).Draw(s.t, "release says ok") == 0 {
		s.op(history.Ok, w.proc, history.FRelease, nil, nil)
		s.lie("release of %s said ok", g.token)
	} else {
		s.op(history.Fail, w.proc, history.FRelease, nil, history.ErrExpired)
	}
	g.heldTo = s.ops[len(s.ops)-1].Time
	w.state = 0
}

// genRecordRun draws a run of the simulation: its history, its record and
// the simulation itself, for the truth.
func genRecordRun(t *rapid.T) *lockSim {
	s := &lockSim{t: t, workers: rapid.IntRange(1, 3).Draw(t, "workers"), lease: rapid.Int64Range(2, 6).Draw(t, "lease"),
		shared: rapid.Bool().Draw(t, "shared tokens"), key: simKey{grant: -1}}
	ws := make([]*simWorker, s.workers)
	for i := range ws {
		ws[i] = &simWorker{slot: i, proc: i}
	}
	for s.now = 0; s.now < 40; s.now++ {
		s.seq = 0
		for _, i := range rapid.Permutation(ws).Draw(t, "order") {
			s.step(i)
		}
	}
	s.seq = 0
	s.expire()
	for _, w := range ws {
		if w.state == 1 || w.state == 2 { // the run's end gives up its acquire
			if w.state == 1 && s.key.grant < 0 && rapid.IntRange(0, 2).Draw(t, "granted as given up") == 0 {
				g := s.grantKey(w, s.time()) // the grant races the give-up
				for _, o := range ws {
					if o != w && o.state == 1 {
						s.event(history.SRefuse, s.time(), fmt.Sprintf("worker-%d", o.slot), s.grants[g].token, nil)
					}
				}
			}
			at := s.time() // the give-up deletes its own key (an expiry due comes first)
			if k := s.key.grant; k >= 0 && s.grants[k].slot == w.slot && !s.grants[k].told && rapid.IntRange(0, 3).Draw(t, "give-up undoes") != 0 {
				s.event(history.SDelete, at, fmt.Sprintf("worker-%d", w.slot), s.key.token, nil)
				s.grants[k].end, s.grants[k].undone, s.key.grant = at, true, -1
			}
			s.op(history.Fail, w.proc, history.FAcquire, nil, history.ErrTimeout)
		}
	}
	for _, o := range s.over {
		if g := s.grants[o.prev]; g.told && g.heldTo > o.at {
			s.lie("granted over %s", g.token) // over a live holder's key
		}
	}
	return s
}

// truthOrphans counts the orphans the simulation had, instant by
// instant: between each two events, the key held a token no worker was
// told of, or whose holder's section had ended, while no worker held the
// lock by what it was told; a run of such instants of one token in which
// the server refused an acquire is an orphan, reported when its holder
// was killed and it lasted no longer than the lease.
func (s *lockSim) truthOrphans() (n, reported int) {
	var times []int64
	for _, o := range slices.Concat(s.ops, s.rec) {
		times = append(times, o.Time)
	}
	slices.Sort(times)
	times = slices.Compact(times)
	run, start := -1, int64(0)
	end := func(at int64) {
		if run < 0 {
			return
		}
		refused := false
		for _, e := range s.rec {
			if e.F == history.SRefuse && e.Time >= start && e.Time < at {
				refused = true
			}
		}
		if refused {
			n++
			if g := s.grants[run]; (g.killed || g.undone) && at-start <= s.lease*1e6+1 {
				reported++
			}
		}
		run = -1
	}
	for i := 0; i+1 < len(times); i++ {
		x := (times[i] + times[i+1]) / 2
		g := s.orphanAt(x)
		if g != run {
			end(times[i])
			if g >= 0 {
				run, start = g, times[i]
			}
		}
	}
	end(times[len(times)-1])
	return n, reported
}

// orphanAt is the grant whose token the key held at instant x with no
// holder, while no worker held the lock; -1 if none.
func (s *lockSim) orphanAt(x int64) int {
	key := -1
	for i, g := range s.grants {
		if g.start <= x && x < g.end {
			key = i
		}
		if g.told && s.toldAt(i) <= x && x < g.heldTo {
			return -1 // a worker holds the lock
		}
	}
	if key < 0 {
		return -1
	}
	if g := s.grants[key]; g.told && x < g.heldTo {
		return -1 // told, or being told
	}
	return key
}

// toldAt is when grant i's worker was told of it: its acquire's :ok.
func (s *lockSim) toldAt(i int) int64 {
	tok := s.grants[i].token
	for _, o := range s.ops {
		if o.F == history.FAcquire && o.Type == history.Ok {
			if t, _ := o.Get(history.KeyToken).(string); t == tok || t == "h-"+tok {
				return o.Time
			}
		}
	}
	return 1<<63 - 1
}

// truthInversions counts the grants with a fence no larger than a grant
// before them.
func (s *lockSim) truthInversions() int {
	n := 0
	for i, g := range s.grants {
		for _, h := range s.grants[:i] {
			if g.fence > 0 && h.fence >= g.fence {
				n++
				break
			}
		}
	}
	return n
}

// TestRecordChecksAgreeWithSimulation: on every drawn run of the
// simulated lock, the record's checks find the orphans, the fence
// inversions and the false oks the simulation made, whether the history's
// tokens are the key's (matched by token) or not (matched by connection
// and interval).
func TestRecordChecksAgreeWithSimulation(t *testing.T) {
	var drawn, orphaned, reportedRuns, inverted, lied int
	defer func() {
		t.Logf("%d runs: %d with orphans (%d reported), %d with inversions, %d with false oks", drawn, orphaned, reportedRuns, inverted, lied)
		if drawn >= 1000 && (orphaned == 0 || reportedRuns == 0 || inverted == 0 || lied == 0) {
			t.Errorf("the runs drawn never had one of the anomalies: the agreement says nothing of it")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		s := genRecordRun(t)
		slices.SortStableFunc(s.ops, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
		for i := range s.ops {
			s.ops[i].Index = int64(i)
		}
		for i := range s.rec {
			s.rec[i].Index = int64(i)
		}
		rs, err := Check(context.Background(), s.ops, Options{Model: ModelLockCounter, Record: &Record{Ops: s.rec, Slack: 1}}) // the simulation's clock is the history's
		if err != nil {
			t.Fatal(err)
		}
		n, reported := s.truthOrphans()
		av, _ := rs.Check("availability")
		fo, _ := rs.Check("fence-order")
		ls, _ := rs.Check("lock-server")
		got := func(r Result, fig string) int {
			v, _ := history.Int(r.Get(fig))
			return int(v)
		}
		drawn++
		orphaned += min(n, 1)
		reportedRuns += min(reported, 1)
		inverted += min(s.truthInversions(), 1)
		lied += min(s.falseOKs, 1)
		if got(av, "orphans") != n || got(av, "orphans-reported") != reported {
			t.Fatalf("orphans %d (%d reported), the simulation's %d (%d)\n%s\nhistory:\n%s\nrecord:\n%s",
				got(av, "orphans"), got(av, "orphans-reported"), n, reported, av.Explanation, edn(s.ops), edn(s.rec))
		}
		if got(fo, "fence-inversions") != s.truthInversions() {
			t.Fatalf("fence inversions %d, the simulation's %d\nhistory:\n%s\nrecord:\n%s", got(fo, "fence-inversions"), s.truthInversions(), edn(s.ops), edn(s.rec))
		}
		if got(ls, "false-oks") != s.falseOKs {
			t.Fatalf("false oks %d, the simulation's %d %q\n%s\nhistory:\n%s\nrecord:\n%s", got(ls, "false-oks"), s.falseOKs, s.lies, ls.Explanation, edn(s.ops), edn(s.rec))
		}
	})
}
