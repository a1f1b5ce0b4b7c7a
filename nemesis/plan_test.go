package nemesis

import (
	"context"
	"math/rand"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// TestPlanRecorder: a history's nemesis events become the plan that was
// executed — in-section pauses and faults that failed to begin left out,
// whether the worker held the lock or had a write in flight noted — and the plan survives
// schedule.edn whole.
func TestPlanRecorder(t *testing.T) {
	const ms = int64(time.Millisecond)
	ev := func(at int64, f history.Keyword, v map[history.Keyword]any) history.Op {
		return history.Op{Time: at * ms, Type: history.Info, Process: history.Nemesis, F: f, Value: v}
	}
	client := func(at int64, p history.Process, f history.Keyword, typ history.Type) history.Op {
		return history.Op{Time: at * ms, Type: typ, Process: p, F: f}
	}
	stop := func(w, p int64) map[history.Keyword]any {
		return map[history.Keyword]any{"kind": KindSigStop, "worker": w, "process": p, "ms": int64(800)}
	}
	ops := []history.Op{
		client(90, 1, history.FAcquire, history.Ok),
		ev(100, history.FPause, stop(1, 1)), // worker 1 holds the lock
		ev(150, history.FPause, map[history.Keyword]any{"kind": KindStop, "process": int64(0), "ms": int64(800)}), // in-section
		ev(903, history.FResume, stop(1, 1)),
		client(910, 1, history.FRelease, history.Fail),
		ev(950, history.FResume, map[history.Keyword]any{"kind": KindStop, "process": int64(0), "ms": int64(800)}),
		ev(1700, history.FPause, map[history.Keyword]any{"kind": KindSigStop, "error": "no target", "ms": int64(800)}),
		ev(2500, history.FKill, map[history.Keyword]any{"kind": KindKillRedis, "pid": int64(7), "ms": int64(800)}),
		ev(3320, history.FRestart, map[history.Keyword]any{"kind": KindKillRedis, "pid": int64(7), "ms": int64(800)}),
		ev(3400, history.FStart, map[history.Keyword]any{"kind": KindClock, "node": int64(2), "offset-ms": int64(500), "ms": int64(300)}),
		ev(3700, history.FStop, map[history.Keyword]any{"kind": KindClock, "node": int64(2), "offset-ms": int64(500), "ms": int64(300)}),
		ev(3750, history.FStart, map[history.Keyword]any{"kind": KindPartitionRedis, "worker": int64(0), "process": int64(0),
			"links": "nodes 1,3", "nodes": []any{int64(1), int64(3)}, "ms": int64(100)}),
		ev(3850, history.FStop, map[history.Keyword]any{"kind": KindPartitionRedis, "worker": int64(0), "process": int64(0),
			"links": "nodes 1,3", "nodes": []any{int64(1), int64(3)}, "ms": int64(100)}),
		client(3860, 0, history.FWrite, history.Invoke),
		ev(3870, history.FStart, map[history.Keyword]any{"kind": KindDropPostgres, "worker": int64(0), "process": int64(0),
			"links": "postgres", "ms": int64(20)}), // its write in flight
		ev(3890, history.FStop, map[history.Keyword]any{"kind": KindDropPostgres, "worker": int64(0), "process": int64(0),
			"links": "postgres", "ms": int64(20)}),
		client(3890, 0, history.FWrite, history.Info),
		ev(3895, history.FStart, map[history.Keyword]any{"kind": KindDelayRedisReplies, "worker": int64(1), "process": int64(1),
			"links": "redis", "ms": int64(5), "call": history.FExtend}), // the extend it caught
		ev(3900, history.FStop, map[history.Keyword]any{"kind": KindDelayRedisReplies, "worker": int64(1), "process": int64(1),
			"links": "redis", "ms": int64(5), "call": history.FExtend}),
		client(3900, 5, history.FAcquire, history.Invoke),
		ev(4000, history.FPause, stop(2, 5)),          // never ended: the history stops
		client(4810, 5, history.FAcquire, history.Ok), // its grant came in the freeze
	}
	var r PlanRecorder
	for _, o := range ops {
		r.Add(o)
	}
	want := Plan{
		// Their :ms, not the 803 and 820 ms their events span.
		{Kind: KindSigStop, Worker: On(1), At: 100 * time.Millisecond, Length: 800 * time.Millisecond, Holder: true},
		{Kind: KindKillRedis, At: 2500 * time.Millisecond, Length: 800 * time.Millisecond},
		{Kind: KindClock, Node: On(2), At: 3400 * time.Millisecond, Length: 300 * time.Millisecond},
		{Kind: KindPartitionRedis, Worker: On(0), Nodes: []int{1, 3}, At: 3750 * time.Millisecond, Length: 100 * time.Millisecond},
		{Kind: KindDropPostgres, Worker: On(0), At: 3870 * time.Millisecond, Length: 20 * time.Millisecond, InFlight: true},
		{Kind: KindDelayRedisReplies, Worker: On(1), At: 3895 * time.Millisecond, Length: 5 * time.Millisecond, Call: history.FExtend},
		{Kind: KindSigStop, Worker: On(2), At: 4000 * time.Millisecond, Length: 800 * time.Millisecond, Holder: true},
	}
	got := r.Plan()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan\n%+v\nwant\n%+v", got, want)
	}
	back, err := ParsePlan(string(got.AppendEDN(nil)))
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("through schedule.edn: %+v, %v", back, err)
	}
	if k := got.Kinds(); !reflect.DeepEqual(k, []string{"sigstop", "kill-redis", "clock", "partition-redis", "drop-postgres", "delay-redis-replies"}) {
		t.Errorf("kinds %q", k)
	}
	for _, bad := range []string{"{:faults [{:kind :sigstop :at-ms 10}]}", "[]", "{:faults [{:kind :partition-redis :at-ms 1 :ms 5 :nodes [-1]}]}", "{:faults [{:kind :sigstop :at-ms -1 :ms 5}]}", "{:faults",
		"{:faults [{:kind :delay-redis-replies :at-ms 1 :ms 5 :call :write}]}", `{:faults [{:kind :delay-redis-replies :at-ms 1 :ms 5 :call "extend"}]}`} {
		if _, err := ParsePlan(bad); err == nil {
			t.Errorf("ParsePlan(%q) took it", bad)
		}
	}
}

// TestAwaitHolder: a replayed fault that hit a holder is aimed at its own
// worker once that one holds (or, for a write in flight, writes); when it
// does not within the wait, at the next worker that comes to hold (not one
// that held all along, near its section's end); when none does, at its own.
func TestAwaitHolder(t *testing.T) {
	const wait = 50 * time.Millisecond // the switch, 25 ms from each end of the second wait
	holding := Target{Worker: 0, Holding: true}
	writing := Target{Worker: 0, Holding: true, Written: true, Writing: true}
	free := Target{Worker: 0}
	for _, tc := range []struct {
		name          string
		before, after []Target // until two waits have passed, and after
		inFlight      bool
		want          int
	}{
		{"its own holds", []Target{holding, {Worker: 1, Holding: true}}, nil, false, 1},
		{"another holds throughout", []Target{holding, {Worker: 1}}, nil, false, 1},
		{"another takes it after the wait", []Target{free, {Worker: 1}}, []Target{holding, {Worker: 1}}, false, 0},
		{"another takes it anew", []Target{holding, {Worker: 1}}, []Target{free, {Worker: 1}}, false, 1},
		{"none holds", []Target{free, {Worker: 1}}, nil, false, 1},
		{"its own writes", []Target{writing, {Worker: 1, Holding: true, Written: true, Writing: true}}, nil, true, 1},
		{"another writes after the wait", []Target{holding, {Worker: 1, Holding: true}}, []Target{writing, {Worker: 1, Holding: true}}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				targets := func() []Target {
					if tc.after != nil && time.Since(start) > 3*wait/2 {
						return tc.after
					}
					return tc.before
				}
				there := holdsUnwritten
				if tc.inFlight {
					there = inFlight
				}
				got, ok := awaitHolder(context.Background(), targets, 1, there, wait)
				if !ok || got != tc.want {
					t.Errorf("aimed at worker %d (%v), want %d", got, ok, tc.want)
				}
			})
		})
	}
}

// heldLink is a link whose Awaiting is set by the test: the proxy's word
// that a request sent over it is unanswered.
type heldLink struct {
	fakeLink
	held func() bool
}

func (l *heldLink) Awaiting() bool { return l.held() }

// TestAimInFlight: a fault of the links the write goes by, aimed at a write
// in flight, begins only at a look that finds the worker's write invoked
// and unanswered and its links with a request unanswered, both at once.
// Here the write was sent before the delay that holds the links' requests
// began and was answered unheld; the next request held is the next
// section's read; only the write after that is held in flight. (Aimed in two waits, write then links, the drop
// began on the read, and a test's run of drop-postgres found a read cut
// where it wanted a write.)
func TestAimInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type phase struct {
			looks         int // how many looks it lasts
			writing, held bool
			name          string
		}
		phases := []phase{
			{10, true, false, "the write invoked, sent before the delay, unheld"},
			{10, false, true, "the write answered; the next read held"},
			{10, false, false, "the read answered; work"},
			{10, true, false, "the next write invoked, its bytes not yet in the link"},
			{1, true, true, "the next write held"},
		}
		looks := 0
		now := func() phase {
			n := looks
			for _, p := range phases {
				if n < p.looks {
					return p
				}
				n -= p.looks
			}
			return phases[len(phases)-1]
		}
		targets := func() []Target {
			looks++
			p := now()
			return []Target{{Worker: 0, Holding: true, Written: p.writing, Writing: p.writing}}
		}
		link := &heldLink{held: func() bool { return now().held }}
		f := &LinkFault{Which: KindDropPostgres, Action: Drop, Workers: targets, Writes: true,
			Links: func(int, []int, *rand.Rand) ([]Link, string, []int) { return []Link{link}, "postgres", nil }}
		s := &Schedule{HolderWait: time.Minute}
		if !s.aim(context.Background(), f, Planned{Kind: KindDropPostgres, Worker: On(0), InFlight: true}) {
			t.Fatal("aim: the context ended")
		}
		if p := now(); !p.writing || !p.held {
			t.Errorf("the drop was aimed at look %d, %s: want it at a held write", looks, p.name)
		}

		// A fault of links the write does not go by (Redis's) waits for the
		// write alone: its links are idle while the worker writes.
		looks, f.Writes = 0, false
		if !s.aim(context.Background(), f, Planned{Kind: KindDropRedis, Worker: On(0), InFlight: true}) {
			t.Fatal("aim: the context ended")
		}
		if looks != 1 {
			t.Errorf("a drop of links the write does not go by was aimed at look %d: want the first, at the write", looks)
		}
	})
}
