package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// Fakes of each kind of target: a fault of a worker, of one of the lock's
// nodes, of a server. Each says in its value what it hit, as the real ones
// do, and fails the test should two of its own overlap.
type fakeTargets struct {
	mu     sync.Mutex
	t      *testing.T
	active map[history.Keyword]bool
}

func (f *fakeTargets) begin(k history.Keyword) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active[k] {
		f.t.Errorf("two %s faults at once: one Fault holds one fault's state", k)
	}
	f.active[k] = true
}

func (f *fakeTargets) end(k history.Keyword) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.active, k)
}

type fakeWorkerFault struct {
	*fakeTargets
	kind history.Keyword
	aim  Slot
}

func (n *fakeWorkerFault) Kind() history.Keyword { return n.kind }
func (n *fakeWorkerFault) aimAt(w Slot)          { n.aim = w }
func (n *fakeWorkerFault) targets() []Target {
	return []Target{{Worker: 0, PID: 10}, {Worker: 1, PID: 11}, {Worker: 2, PID: 12}}
}
func (n *fakeWorkerFault) Begin(_ context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	t, err := pick(n.targets(), r, n.aim)
	n.begin(n.kind)
	return map[history.Keyword]any{"worker": int64(t.Worker)}, err
}
func (n *fakeWorkerFault) End(context.Context) error { n.end(n.kind); return nil }

type fakeNodeFault struct {
	*fakeTargets
	kind history.Keyword
	aim  Slot
}

func (n *fakeNodeFault) Kind() history.Keyword { return n.kind }
func (n *fakeNodeFault) aimAtNode(s Slot)      { n.aim = s }
func (n *fakeNodeFault) nodeCount() int        { return 2 }
func (n *fakeNodeFault) Begin(_ context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	i, err := pickNode(2, r, n.aim, nil)
	n.begin(n.kind)
	return map[history.Keyword]any{"node": int64(i)}, err
}
func (n *fakeNodeFault) End(context.Context) error { n.end(n.kind); return nil }

type fakeServerFault struct {
	*fakeTargets
	kind history.Keyword
	slow time.Duration // how long End takes: a restart's wait for its server
}

func (n *fakeServerFault) Kind() history.Keyword { return n.kind }
func (n *fakeServerFault) server() string        { return "redis" }
func (n *fakeServerFault) Begin(context.Context, *rand.Rand) (map[history.Keyword]any, error) {
	n.begin(n.kind)
	return map[history.Keyword]any{}, nil
}
func (n *fakeServerFault) End(context.Context) error {
	time.Sleep(n.slow) // a slow end, not a wait for something
	n.end(n.kind)
	return nil
}

// A span is one fault as its events record it.
type span struct {
	kind, target string
	from, to     int64
}

// spans pairs the events of ops into faults, each with its target.
func spans(t *testing.T, ops []history.Op) []span {
	t.Helper()
	var out []span
	var pairs history.FaultPairer
	for _, o := range ops {
		e, ok := history.ReadFaultEvent(o)
		if !ok {
			t.Fatalf("not a fault's event: %+v", o)
		}
		if i := pairs.Add(len(out), e); i >= 0 {
			out[i].to = o.Time
		}
		if e.Begin {
			target := "server " + string(e.Kind)
			if w, ok := history.Int(e.Value["worker"]); ok {
				target = fmt.Sprintf("worker %d", w)
			} else if n, ok := history.Int(e.Value["node"]); ok {
				target = fmt.Sprintf("node %d", n)
			}
			if e.Kind == "pause-redis" || e.Kind == "kill-redis" {
				target = "server redis"
			}
			out = append(out, span{kind: string(e.Kind), target: target, from: o.Time, to: -1})
		}
	}
	if open := pairs.Open(); len(open) > 0 {
		t.Errorf("%d faults never ended", len(open))
	}
	return out
}

// TestOverlap: a schedule with Overlap begins a fault every Interval
// whatever is under way, so that faults overlap in time; but never two on
// one target (a worker, a node, a server: pause-redis and kill-redis are of
// one), nor two of one kind; and every fault it begins, it ends.
func TestOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := &fakeTargets{t: t, active: map[history.Keyword]bool{}}
		var mu sync.Mutex
		var ops []history.Op
		s := &Schedule{
			Faults: []Fault{
				&fakeWorkerFault{fakeTargets: ft, kind: "sigstop"}, &fakeWorkerFault{fakeTargets: ft, kind: "partition-redis"},
				&fakeNodeFault{fakeTargets: ft, kind: "clock"}, &fakeNodeFault{fakeTargets: ft, kind: "pause-node"},
				&fakeServerFault{fakeTargets: ft, kind: "pause-redis"}, &fakeServerFault{fakeTargets: ft, kind: "kill-redis"},
			},
			// Faults twenty intervals long: a dozen or so at once, were
			// targets and kinds not held.
			Interval: 2 * time.Millisecond, Pause: 40 * time.Millisecond, Overlap: true,
			Rand: rand.New(rand.NewSource(1)), Clock: &tick{},
			Record: func(o history.Op) { mu.Lock(); ops = append(ops, o); mu.Unlock() },
		}
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		sp := spans(t, ops)
		overlaps := 0
		for i, a := range sp {
			for _, b := range sp[i+1:] {
				if a.from >= b.to || b.from >= a.to {
					continue
				}
				overlaps++
				if a.target == b.target || a.kind == b.kind {
					t.Errorf("%s on %s and %s on %s at once", a.kind, a.target, b.kind, b.target)
				}
			}
		}
		if overlaps == 0 || len(sp) < 6 {
			t.Errorf("%d faults, %d pairs overlapping: want faults at once", len(sp), overlaps)
		}
	})
}

// TestReplayOverlap: a replay begins each fault at its time; faults that
// overlapped in the plan overlap again, and one that began after another
// ended waits for it, as it did, even when its end takes longer than it did
// (a restart's server slow to come back).
func TestReplayOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := &fakeTargets{t: t, active: map[history.Keyword]bool{}}
		var mu sync.Mutex
		var ops []history.Op
		ms := time.Millisecond
		s := &Schedule{
			Faults: []Fault{&fakeWorkerFault{fakeTargets: ft, kind: "sigstop"}, &fakeNodeFault{fakeTargets: ft, kind: "clock"},
				&fakeServerFault{fakeTargets: ft, kind: "pause-redis"}, &fakeServerFault{fakeTargets: ft, kind: "kill-redis", slow: 200 * ms}},
			Plan: Plan{
				{Kind: "sigstop", Worker: On(1), At: 10 * ms, Length: 300 * ms},
				{Kind: "clock", Node: On(0), At: 20 * ms, Length: 300 * ms}, // overlaps the first
				{Kind: "kill-redis", At: 40 * ms, Length: 100 * ms},         // overlaps both; ends 200 ms late
				{Kind: "pause-redis", At: 150 * ms, Length: 20 * ms},        // after the kill ended, in the plan
				{Kind: "sigstop", Worker: On(2), At: 330 * ms, Length: 20 * ms},
			},
			Rand: rand.New(rand.NewSource(1)), Clock: &sinceStart{start: time.Now()},
			Record: func(o history.Op) { mu.Lock(); ops = append(ops, o); mu.Unlock() },
		}
		if err := s.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		sp := spans(t, ops)
		if len(sp) != 5 {
			t.Fatalf("%d faults replayed, want 5: %+v", len(sp), sp)
		}
		first, clock, kill, pause, last := sp[0], sp[1], sp[2], sp[3], sp[4]
		if !(clock.from < first.to && kill.from < first.to && kill.from < clock.to) {
			t.Errorf("the overlapping faults did not overlap: %+v", sp[:3])
		}
		if pause.kind != "pause-redis" || pause.from < kill.to {
			t.Errorf("the pause began before the kill it followed had ended: %+v", sp)
		}
		if last.from < first.to || last.target != "worker 2" || first.target != "worker 1" || clock.target != "node 0" {
			t.Errorf("the last sigstop began before the first ended, or a target moved: %+v", sp)
		}
	})
}

// sinceStart is a clock of the time since start.
type sinceStart struct{ start time.Time }

func (c *sinceStart) Now(context.Context) int64 { return int64(time.Since(c.start)) }
