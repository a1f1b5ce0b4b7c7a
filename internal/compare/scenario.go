package compare

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
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
	redlock := func(nemesis string, pause time.Duration) Setup {
		return Setup{Lock: "redlock", Lease: lease, Nemesis: nemesis,
			PauseLen: pause, Interval: 700 * time.Millisecond}
	}
	return []Scenario{
		{Name: "gc-pause", Title: "a holder stops (a GC pause) longer than its lease, on Redlock over 5 nodes",
			Setup: redlock("sigstop", 800*time.Millisecond)},
		{Name: "clock-jump", Title: "one of Redlock's 5 nodes' clock jumps forward by a lease, alone",
			Setup: redlock("clock", 800*time.Millisecond)},
		// Kleppmann's counterexample: a client cut off from two nodes takes
		// the other three; one of those jumps; another client takes it and
		// the two. The jump must find the client holding: 200 ms sections.
		{Name: "clock-jump-partition", Title: "a worker cut off from 2 of Redlock's 5 nodes, then one of the others' clock jumps (Kleppmann's sequence)",
			Setup: func() Setup {
				s := redlock("partition-redis+clock", 800*time.Millisecond)
				s.Work = 200 * time.Millisecond
				return s
			}()},
		{Name: "delayed-write", Title: "a holder's requests to the resource arrive a lease late (the delayed packet), on Redlock",
			Setup: redlock("delay-postgres", 800*time.Millisecond)},
		{Name: "restart", Title: "one of Redlock's 5 nodes restarts without persistence, 200 ms down, within a 2 s lease",
			Setup: Setup{Lock: "redlock", Lease: 2 * time.Second, Nemesis: "restart",
				PauseLen: 200 * time.Millisecond, Interval: 700 * time.Millisecond}},
		// A failover takes the sentinels about 2.3 s; a lock lost in it
		// matters only to a holder still inside its section by then.
		{Name: "failover", Title: "a single Redis primary with an asynchronous replica fails over (sentinels), its holders still working",
			Setup: Setup{Lock: "setnx", Lease: 4 * time.Second, Nemesis: "failover",
				PauseLen: 6 * time.Second, Interval: 2 * time.Second, Work: 3 * time.Second, Limit: 24 * time.Second}},
	}
}

// ScenarioNames lists what --scenario takes: the debate's scenarios, and
// the findings.
func ScenarioNames() []string {
	names := []string{DebateName}
	for _, s := range Scenarios() {
		names = append(names, s.Name)
	}
	names = append(names, FindingsName)
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
	return out, nil
}
