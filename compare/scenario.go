package compare

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A Scenario is one situation of the public Redlock debate, made a run:
// a lock, the fault the debate argues about, and the settings under which
// that fault can matter.
type Scenario struct {
	Name  string // as --scenario names it
	Title string // what the debate says happens
	Setup Setup  // without its guard: each scenario is run under every one
}

// DebateName names the whole pack.
const DebateName = "redlock-debate"

// Scenarios are the situations of the Redlock debate (Kleppmann, "How to do
// distributed locking", 2016; Sanfilippo, "Is Redlock safe?", 2016), each on
// the reference settings unless its fault needs others.
func Scenarios() []Scenario {
	const lease = 500 * time.Millisecond
	redlock := func(faults string, pause time.Duration) Setup {
		return Setup{Lock: "redlock", Lease: lease, Nemesis: faults,
			PauseLen: pause, Interval: 700 * time.Millisecond}
	}
	// Two workers: the one cut off is the holder half the time, and a
	// holder that releases while cut off takes its next section on the 3
	// nodes it reaches (the 2 keep its old keys until they expire). A 1.5
	// s lease outlasts 1 s sections with a margin, and the old keys expire
	// while the holder is in its next section.
	restart := func(pause time.Duration, aof bool) Setup {
		return Setup{Lock: "redlock", Lease: 1500 * time.Millisecond, Nemesis: sequence(nemesis.KindPartitionRedis, nemesis.KindRestart),
			PauseLen: pause, Interval: 500 * time.Millisecond, Work: time.Second, Workers: 2, NodeAOF: aof}
	}
	return []Scenario{
		{Name: "gc-pause", Title: "a holder stops (a GC pause) longer than its lease, on Redlock over 5 nodes",
			Setup: redlock(sequence(nemesis.KindSigStop), 800*time.Millisecond)},
		{Name: "clock-jump", Title: "one of Redlock's 5 nodes' clock jumps forward by a lease, alone",
			Setup: redlock(sequence(nemesis.KindClock), 800*time.Millisecond)},
		// Kleppmann's counterexample: a client cut off from two nodes takes
		// the other three; one of those jumps; another client takes it and
		// the two. The jump must find the client holding: 200 ms sections.
		{Name: "clock-jump-partition", Title: "a worker cut off from 2 of Redlock's 5 nodes, then one of the others' clock jumps (Kleppmann's sequence)",
			Setup: func() Setup {
				s := redlock(sequence(nemesis.KindPartitionRedis, nemesis.KindClock), 800*time.Millisecond)
				s.Work = 200 * time.Millisecond
				return s
			}()},
		{Name: "delayed-write", Title: "a holder's requests to the resource arrive a lease late (the delayed packet), on Redlock",
			Setup: redlock(sequence(nemesis.KindDelayPostgres), 800*time.Millisecond)},
		// The restart Kleppmann and go-redsync/redsync#186 describe: a
		// holder cut off from 2 of the 5 nodes takes the other 3; one of
		// those crashes and comes back empty while it holds; another
		// client takes that node and the 2. One node lost from a holder of
		// all 5 breaks nothing: the bare majority comes first. The crash
		// waits for one (bareMajority in harness); the node is down for
		// the fault's 600 ms, inside the holder's 1 s section.
		{Name: string(nemesis.KindRestart), Title: "a worker cut off from 2 of Redlock's 5 nodes takes the other 3; one of those restarts without persistence",
			Setup: restart(600*time.Millisecond, false)},
		// antirez's two mitigations, on the same sequence: the node kept
		// down twice the lease, and every write fsynced.
		{Name: "restart-delayed", Title: "the same, the node restarted only after twice the 1.5 s lease (antirez's delayed restart)",
			Setup: restart(3*time.Second, false)},
		{Name: "restart-aof", Title: "the same, every node fsyncing each write to its append-only file (antirez's appendfsync always)",
			Setup: restart(600*time.Millisecond, true)},
		// A failover takes the sentinels about 2.3 s; a lock lost in it
		// matters only to a holder still inside its section by then.
		{Name: string(nemesis.KindFailover), Title: "a single Redis primary with an asynchronous replica fails over (sentinels), its holders still working",
			Setup: Setup{Lock: "setnx", Lease: 4 * time.Second, Nemesis: sequence(nemesis.KindFailover),
				PauseLen: 6 * time.Second, Interval: 2 * time.Second, Work: 3 * time.Second, Limit: 24 * time.Second}},
	}
}

// sequence is the --nemesis of one fault, or of a sequence of them (a+b).
func sequence(kinds ...history.Keyword) string {
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = string(k)
	}
	return strings.Join(parts, "+")
}

// ScenarioNames lists what --scenario takes: the debate's scenarios, and
// the findings.
func ScenarioNames() []string {
	names := []string{DebateName}
	for _, s := range Scenarios() {
		names = append(names, s.Name)
	}
	names = append(names, FindingsName, CensusName)
	for _, f := range Findings() {
		names = append(names, f.Name)
	}
	return names
}

// ScenarioSetups returns the rows of the scenarios list names (comma-
// separated; redlock-debate for all the debate's, findings for all
// findings): each scenario under every guard, each finding's affected and
// fixed versions.
func ScenarioSetups(list string) ([]Setup, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(ScenarioNames(), n) {
			return nil, fmt.Errorf("--scenario %q: want one or more of %s", n, strings.Join(ScenarioNames(), ", "))
		}
		want[n] = true
	}
	var out []Setup
	for _, sc := range Scenarios() {
		if !want[sc.Name] && !want[DebateName] {
			continue
		}
		for _, g := range client.Guards() {
			s := sc.Setup
			s.Scenario, s.Guard = sc.Name, g
			out = append(out, s)
		}
	}
	for _, f := range Findings() {
		if want[f.Name] || want[FindingsName] {
			out = append(out, findingSetups(f)...)
		}
	}
	if want[CensusName] {
		out = append(out, censusSetups()...)
	}
	return out, nil
}
