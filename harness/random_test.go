package harness_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A fault span is one fault of a history: its kind, what it hit, and when.
type faultSpan struct {
	kind, target string
	from, to     int64
}

// faultSpans pairs the fault events of ops, each fault with its target: a
// worker, a lock node, or the server its kind names.
func faultSpans(ops []history.Op) []faultSpan {
	var out []faultSpan
	var pairs history.FaultPairer
	end := int64(0)
	for _, o := range ops {
		end = max(end, o.Time)
		e, ok := history.ReadFaultEvent(o)
		if !ok || e.Failed {
			continue
		}
		if i := pairs.Add(len(out), e); i >= 0 {
			out[i].to = o.Time
		}
		if !e.Begin {
			continue
		}
		target := "server " + string(e.Kind)
		if w, ok := history.Int(e.Value["worker"]); ok {
			target = fmt.Sprintf("worker %d", w)
		} else if n, ok := history.Int(e.Value["node"]); ok {
			target = fmt.Sprintf("node %d", n)
		}
		out = append(out, faultSpan{kind: string(e.Kind), target: target, from: o.Time, to: -1})
	}
	for _, i := range pairs.Open() {
		out[i].to = end
	}
	return out
}

// overlapping counts the pairs of spans that overlap in time, and fails t
// for any two of one kind or on one target.
func overlapping(t *testing.T, spans []faultSpan) int {
	t.Helper()
	n := 0
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.from >= b.to || b.from >= a.to {
				continue
			}
			n++
			if a.target == b.target || a.kind == b.kind {
				t.Errorf("%s on %s and %s on %s at once", a.kind, a.target, b.kind, b.target)
			}
		}
	}
	return n
}

// TestRunRandom: --nemesis random injects every kind of fault the run
// allows, overlapping in time, never two on one target nor two of one kind
// at once; its schedule.edn replays them, overlapping again. On one lock
// node and the workers' proxies: the lock's node faults, the links', the
// workers'.
func TestRunRandom(t *testing.T) {
	t.Parallel() // its runs sleep through their faults, as do the other parallel tests'
	shared := harness.DefaultConfig()
	stop, err := harness.StartServers(context.Background(), &shared)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cfg := harness.DefaultConfig()
	cfg.Store, cfg.Name, cfg.CounterID, cfg.Seed = t.TempDir(), "random", 900, 1
	cfg.RedisURL, cfg.PostgresURL = shared.RedisURL, shared.PostgresURL
	// Faults of two leases, one begun every third of a lease: several at
	// once most of the run.
	cfg.Nemesis, cfg.Lease, cfg.Pause, cfg.Interval, cfg.TimeLimit = harness.Random, faultLease, 2*faultLease, faultLease/3, 3*time.Second
	// An eighth of a lease's delay: a replayed fault that hit a holder
	// waits up to HolderWait, five sections of two delayed round trips
	// each, a second at the least (6 s with the lease's delay, the least
	// with this), and the replay is given that long for each such fault
	// (below).
	cfg.Delay = faultLease / 8
	kinds := cfg.FaultNames()
	if len(kinds) < 8 {
		t.Fatalf("random on setnx with servers given by URL: %v, want the worker, node and link faults", kinds)
	}
	res, err := harness.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ops := readOps(t, res.Dir)
	// The history's checks give a verdict. One of the record's may not,
	// when a fault took the record's sight of the node (a restart, beside
	// two CPU burners once also its MONITOR connection): it says so.
	for _, c := range res.Results.Checks {
		unsure := c.Get("unsure") != nil // a check of the record, which says what it did not see
		if c.Valid == checker.Unknown && (!unsure || !strings.Contains(c.Explanation, "lost sight")) {
			t.Errorf("the history does not check (%s): %s", c.Name, res.Results.AppendEDN(nil))
		}
	}
	spans := faultSpans(ops)
	seen := map[string]bool{}
	for _, s := range spans {
		seen[s.kind] = true
	}
	if n := overlapping(t, spans); n == 0 || len(seen) < 3 {
		t.Fatalf("%d faults of %d kinds, %d pairs overlapping: want faults of several kinds at once", len(spans), len(seen), n)
	}

	replay, err := harness.ReplayConfig(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(replay.Plan) != len(spans) {
		t.Errorf("schedule.edn holds %d faults, the history %d", len(replay.Plan), len(spans))
	}
	replay.RedisURL, replay.PostgresURL = shared.RedisURL, shared.PostgresURL
	// Room for the holders' waits: each delays the faults after it (in a
	// quiet suite once, 6 of 15 fell past a replay given 2 s for all).
	replay.TimeLimit += time.Duration(replay.Plan.Waits()) * replay.HolderWait()
	again, err := harness.Run(context.Background(), replay)
	if err != nil {
		t.Fatal(err)
	}
	replayed := readOps(t, again.Dir)
	rs := faultSpans(replayed)
	n := overlapping(t, rs)
	t.Logf("the run: %d faults of %d kinds; the replay: %d faults (%d waiting for a holder, %v the run), %d pairs overlapping",
		len(spans), len(seen), len(rs), replay.Plan.Waits(), replay.TimeLimit, n)
	if n == 0 || len(rs) < len(spans)*3/4 {
		t.Errorf("the replay injected %d of %d faults, %d pairs overlapping; %s", len(rs), len(spans), n, replayShortfall(replay.Plan, rs))
	}
}

// replayShortfall says, for a replay that injected fewer faults than its
// plan, when each began in the plan and in the replay, and which waited
// for a holder: a replayed fault that hit a holder waits up to two
// seconds for one (nemesis.awaitHolder), and the faults after it wait
// behind it, so that the run may end before the last begin.
func replayShortfall(plan nemesis.Plan, got []faultSpan) string {
	var b strings.Builder
	for i, p := range plan {
		fmt.Fprintf(&b, "planned %s at %v (holder %v, in flight %v, call %q)", p.Kind, p.At, p.Holder, p.InFlight, p.Call)
		if i < len(got) {
			fmt.Fprintf(&b, ", the replay's %d-th began %s at %v", i, got[i].kind, time.Duration(got[i].from))
		}
		b.WriteString("; ")
	}
	return b.String()
}
