package nemesis

import (
	"context"
	"errors"
	"math/rand"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// fakeLink and fakeNode record what was done to them: the faults' own
// logic (which link, which node, in which order) is what is tested here;
// the links and clocks themselves are tested against real proxies and a
// real libfaketime in topology and internal/servers.
type fakeLink struct{ cut, healed int }

func (l *fakeLink) Cut(context.Context) error                 { l.cut++; return nil }
func (l *fakeLink) Slow(context.Context, time.Duration) error { return nil }
func (l *fakeLink) Drop(context.Context) error                { return nil }
func (l *fakeLink) Heal(context.Context) error                { l.healed++; return nil }

type fakeNode struct {
	mu      sync.Mutex
	offsets []time.Duration
}

func (n *fakeNode) JumpClock(d time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.offsets = append(n.offsets, d)
	return nil
}

func (n *fakeNode) jumps() []time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.offsets)
}

// TestSequenceAvoidsCutNodes: in partition-redis+clock the clock jumps on
// a node the cut worker still reaches, whatever the draw; the parts end
// last first; the sequence aims at a worker as its link part does.
func TestSequenceAvoidsCutNodes(t *testing.T) {
	links := []*fakeLink{{}, {}, {}, {}, {}}
	nodes := []*fakeNode{{}, {}, {}, {}, {}}
	var cn []ClockNode
	for _, n := range nodes {
		cn = append(cn, n)
	}
	workers := func() []Target { return []Target{{Worker: 0, PID: 10}, {Worker: 1, PID: 11}} }
	lf := &LinkFault{Which: KindPartitionRedis, Action: Partition, Workers: workers,
		Links: func(slot int, _ []int, r *rand.Rand) ([]Link, string, []int) {
			return []Link{links[1], links[2]}, "nodes 1,2", []int{1, 2}
		}}
	seq := &Sequence{Parts: []Fault{lf, &ClockJump{Nodes: cn, Offset: time.Second}}, Step: time.Millisecond}
	if _, ok := any(seq).(aimer); !ok {
		t.Fatal("a sequence is no aimer: a replay would not aim it at its worker")
	}
	if seq.Kind() != "partition-redis+clock" {
		t.Errorf("kind %s", seq.Kind())
	}
	r := rand.New(rand.NewSource(1))
	for range 50 {
		v, err := seq.Begin(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		node, _ := history.Int(v["node"])
		if node == 1 || node == 2 {
			t.Fatalf("the clock jumped on node %d, which the worker is cut off from", node)
		}
		if !slices.Equal(v["parts"].([]any), []any{KindPartitionRedis, KindClock}) || v["links"] != "nodes 1,2" {
			t.Errorf("event value %v", v)
		}
		if err := seq.End(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := nodes[node].jumps(); len(got) < 2 || got[len(got)-1] != 0 {
			t.Fatalf("node %d's clock: %v, want a jump and back to 0", node, got)
		}
	}
	if links[1].cut != 50 || links[1].healed != 50 || links[0].cut != 0 {
		t.Errorf("links cut %d healed %d (node 0's cut %d); want 50, 50, 0", links[1].cut, links[1].healed, links[0].cut)
	}
}

// TestLinkFaultAimedAtNodes: a replay's nodes reach the fault's Links, and
// the event says which nodes it cut, for the next replay.
func TestLinkFaultAimedAtNodes(t *testing.T) {
	var asked [][]int
	lf := &LinkFault{Which: KindPartitionRedis, Action: Partition,
		Workers: func() []Target { return []Target{{Worker: 0, PID: 10}} },
		Links: func(_ int, nodes []int, _ *rand.Rand) ([]Link, string, []int) {
			asked = append(asked, nodes)
			if nodes == nil {
				nodes = []int{0, 4}
			}
			return []Link{&fakeLink{}}, "nodes", nodes
		}}
	var plan Plan
	for _, aim := range [][]int{nil, {1, 3}} {
		var p PlanRecorder
		lf.aimAtNodes(aim)
		v, err := lf.Begin(context.Background(), rand.New(rand.NewSource(1)))
		if err != nil {
			t.Fatal(err)
		}
		v["kind"], v["ms"] = lf.Kind(), int64(100) // as the schedule records it
		p.Add(history.Op{Type: history.Info, Process: history.Nemesis, F: history.FStart, Value: v})
		plan = append(plan, p.Plan()...)
	}
	if !reflect.DeepEqual(asked, [][]int{nil, {1, 3}}) {
		t.Errorf("Links asked for %v, want nil then [1 3]", asked)
	}
	if len(plan) != 2 || !slices.Equal(plan[0].Nodes, []int{0, 4}) || !slices.Equal(plan[1].Nodes, []int{1, 3}) {
		t.Errorf("planned %+v, want nodes [0 4] then [1 3]", plan)
	}
}

// TestSequencePartFails: a later part that cannot begin leaves the parts
// begun in force (their window is recorded whole) and says why; a first
// part that cannot begin fails the whole.
func TestSequencePartFails(t *testing.T) {
	l := &fakeLink{}
	lf := &LinkFault{Which: KindPartitionRedis, Action: Partition, Workers: func() []Target { return []Target{{Worker: 0}} },
		Links: func(int, []int, *rand.Rand) ([]Link, string, []int) { return []Link{l}, "redis", []int{0} }}
	seq := &Sequence{Parts: []Fault{lf, &ClockJump{}}} // no nodes: it cannot begin
	v, err := seq.Begin(context.Background(), rand.New(rand.NewSource(1)))
	if err != nil || v["part-error"] == nil || l.cut != 1 || l.healed != 0 {
		t.Fatalf("begin: %v, %v; link cut %d healed %d: want no error, a :part-error, the link still cut", v, err, l.cut, l.healed)
	}
	if err := seq.End(context.Background()); err != nil || l.healed != 1 {
		t.Errorf("end: %v, healed %d", err, l.healed)
	}
	first := &Sequence{Parts: []Fault{&ClockJump{}, lf}}
	if _, err := first.Begin(context.Background(), rand.New(rand.NewSource(1))); !errors.Is(err, ErrNoTarget) {
		t.Errorf("a first part that fails: %v, want ErrNoTarget", err)
	}
}

// TestIsolateUndoesAFailedCut: rules a failed cut may have left are
// removed before the fault is said not to have begun.
func TestIsolateUndoesAFailedCut(t *testing.T) {
	healed := -1
	n := &Isolate{Workers: func() []Target { return []Target{{Worker: 2}} },
		Cut:  func(context.Context, int) error { return errors.New("iptables-restore: unsure") },
		Heal: func(_ context.Context, slot int) error { healed = slot; return nil }}
	if _, err := n.Begin(context.Background(), rand.New(rand.NewSource(1))); err == nil || healed != 2 {
		t.Errorf("begin: %v, healed slot %d; want an error and slot 2 healed", err, healed)
	}
}

type fakeReplicated struct {
	primary, promoted int
	cut               []int
}

func (f *fakeReplicated) Primary(context.Context) (int, error) { return f.primary, nil }
func (f *fakeReplicated) Isolate(_ context.Context, node int) error {
	f.cut = append(f.cut, node)
	f.primary = f.promoted
	return nil
}
func (f *fakeReplicated) Rejoin(context.Context, int) error { return nil }

// TestFailoverSaysWhenNoOneWasPromoted: a failover that promoted no one
// ends with an error, so the history does not count it.
func TestFailoverSaysWhenNoOneWasPromoted(t *testing.T) {
	for _, tc := range []struct {
		promoted int
		wantErr  bool
	}{{promoted: 1}, {promoted: 0, wantErr: true}} {
		r := &fakeReplicated{primary: 0, promoted: tc.promoted}
		f := &Failover{Redis: r}
		v, err := f.Begin(context.Background(), nil)
		if err != nil || v["node"] != 0 || !slices.Equal(r.cut, []int{0}) {
			t.Fatalf("begin: %v, %v, cut %v", v, err, r.cut)
		}
		if err := f.End(context.Background()); (err != nil) != tc.wantErr {
			t.Errorf("promoted %d: end %v, want an error %v", tc.promoted, err, tc.wantErr)
		}
	}
}

// TestClockStrobe: a strobing clock goes back and forth between the offset
// (back in time here) and the real time until End, which leaves it real.
func TestClockStrobe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &fakeNode{}
		f := &ClockJump{Nodes: []ClockNode{node}, Offset: -time.Second, Strobe: time.Millisecond}
		v, err := f.Begin(context.Background(), rand.New(rand.NewSource(1)))
		if err != nil || v["strobe-ms"] != int64(1) || v["offset-ms"] != int64(-1000) {
			t.Fatalf("begin: %v, %v", v, err)
		}
		deadline := time.Now().Add(10 * time.Second) // a bound, not a guess: it needs 4 ticks
		for len(node.jumps()) < 5 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if err := f.End(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := node.jumps()
		if len(got) < 5 || got[len(got)-1] != 0 {
			t.Fatalf("jumps %v: want at least 5, the last back to 0", got)
		}
		for i, d := range got[:len(got)-1] {
			if want := [2]time.Duration{-time.Second, 0}[i%2]; d != want {
				t.Fatalf("jump %d to %v, want %v: %v", i, d, want, got)
			}
		}
	})
}

// replyFake is a link that can delay replies alone, which records the
// delays asked and counts a reply held when a delay begins while the
// test's phase says the call's reply is yet to come.
type replyFake struct {
	fakeLink
	mu      sync.Mutex
	slowed  []time.Duration
	held    int64
	pending func() bool
}

func (l *replyFake) SlowReplies(_ context.Context, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slowed = append(l.slowed, d)
	if d > 0 && l.pending() {
		l.held++
	}
	return nil
}

func (l *replyFake) RepliesHeld() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// TestCatchCall: a reply-only delay begins on a lock call in flight, and
// keeps only a delay that held a reply before the call completed. Here
// the first extend is answered before the delay took hold (the worker's op
// is seen after its request went): the delay ends, and begins again on
// the next extend, whose reply it holds, and its event says :call
// :extend. An extend and a renewal in flight at once are not taken (which
// request is whose cannot be told), nor, when the fault is aimed at a
// renewal, an extend. A call that never completes, its reply never held,
// is given up at CallWait: the delay begins with no call caught. Aimed
// at a grant (DelayGrant), it takes an acquire only while no other worker
// holds the lock.
func TestCatchCall(t *testing.T) {
	type phase struct {
		looks   int
		t       Target
		pending bool // the call's reply is yet to come: a delay holds it
		name    string
		other   bool // worker 1 holds the lock
	}
	extend := Target{Worker: 0, Holding: true, Op: history.FExtend}
	acquire := Target{Worker: 0, Op: history.FAcquire}
	for _, tc := range []struct {
		name   string
		action LinkAction
		aim    history.Keyword
		wait   time.Duration
		phases []phase
		slowed []time.Duration
		call   any
		at     string // the phase it began in
	}{
		{"the second extend", DelayReplies, "", time.Minute, []phase{
			{10, Target{Worker: 0}, false, "no call", false},
			{10, extend, false, "an extend, answered before the delay", false},
			{10, Target{Worker: 0, Holding: true, Op: history.FWrite}, false, "the write", false},
			{10, Target{Worker: 0, Holding: true, Op: history.FExtend, Renewing: true}, true, "an extend behind a renewal", false},
			{1, extend, true, "the next extend, its reply to come", false},
		}, []time.Duration{time.Second, 0, time.Second}, history.FExtend, "the next extend, its reply to come"},
		{"aimed at a renewal", DelayReplies, history.FRenew, time.Minute, []phase{
			{10, extend, true, "an extend", false},
			{10, Target{Worker: 0, Holding: true}, false, "the write", false},
			{1, Target{Worker: 0, Holding: true, Renewing: true}, true, "a renewal, its reply to come", false},
		}, []time.Duration{time.Second}, history.FRenew, "a renewal, its reply to come"},
		{"a call that hangs", DelayReplies, "", 20 * time.Millisecond, []phase{
			{1, extend, false, "an extend, its request lost", false},
		}, []time.Duration{time.Second, 0, time.Second}, nil, "an extend, its request lost"},
		{"a grant", DelayGrant, "", time.Minute, []phase{
			{10, extend, true, "an extend", false},
			{10, acquire, true, "an acquire while worker 1 holds", true},
			{10, Target{Worker: 0, Op: history.FRelease}, true, "a release, no one holding", false},
			{1, acquire, true, "an acquire of the free lock", false},
		}, []time.Duration{time.Second}, history.FAcquire, "an acquire of the free lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				looks := 0
				now := func() phase {
					n := looks
					for _, p := range tc.phases {
						if n < p.looks {
							return p
						}
						n -= p.looks
					}
					return tc.phases[len(tc.phases)-1]
				}
				link := &replyFake{pending: func() bool { return now().pending }}
				f := &LinkFault{Which: KindDelayRedisReplies, Action: tc.action, Slow: time.Second, CallWait: tc.wait,
					Workers: func() []Target { looks++; return []Target{now().t, {Worker: 1, Holding: now().other}} },
					Links:   func(int, []int, *rand.Rand) ([]Link, string, []int) { return []Link{link}, "redis", nil }}
				f.aimAtCall(tc.aim)
				f.aimAt(On(0))
				v, err := f.Begin(context.Background(), rand.New(rand.NewSource(1)))
				if err != nil {
					t.Fatal(err)
				}
				if v["call"] != tc.call || !reflect.DeepEqual(link.slowed[:min(len(link.slowed), 3)], tc.slowed) || now().name != tc.at {
					t.Errorf("began at %q with :call %v, delays %v; want at %q, :call %v, delays %v", now().name, v["call"], link.slowed, tc.at, tc.call, tc.slowed)
				}
				if err := f.End(context.Background()); err != nil || link.healed != 1 {
					t.Errorf("End: %v, healed %d times", err, link.healed)
				}
			})
		})
	}

	// A link that cannot delay replies alone (a kernel's filter) is an
	// error, and leaves nothing behind.
	plain := &fakeLink{}
	f := &LinkFault{Which: KindDelayRedisReplies, Action: DelayReplies, Slow: time.Second,
		Workers: func() []Target { return []Target{extend} },
		Links:   func(int, []int, *rand.Rand) ([]Link, string, []int) { return []Link{plain}, "redis", nil }}
	if _, err := f.Begin(context.Background(), rand.New(rand.NewSource(1))); err == nil || plain.healed != 1 {
		t.Errorf("Begin on a link that cannot delay replies: %v, healed %d times", err, plain.healed)
	}
}
