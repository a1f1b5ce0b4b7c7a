// Package configgen draws valid run configurations for property tests:
// every lock, guard, hosts mode, nemesis list and sequence, node count,
// clock and delay setting, and a schedule with its targets.
package configgen

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/lockserver"
	"github.com/hiatus-dev/hiatus/nemesis"
	"pgregory.net/rapid"
)

const ms = time.Millisecond

// Config draws a Config that Validate accepts, with a Plan or none. Server
// URLs are left empty: a replay does not take them.
func Config(t *rapid.T) harness.Config {
	c := harness.DefaultConfig()
	c.Name = rapid.SampledFrom([]string{"lock-counter", "my-test", "a.b_c"}).Draw(t, "name")
	c.Workers = rapid.IntRange(1, 6).Draw(t, "workers")
	c.Lease = duration(t, "lease", 1, 5000)
	c.Work = duration(t, "work", 0, 100)
	c.Retry = duration(t, "retry", 0, 50)
	c.OpTimeout = duration(t, "op-timeout", 1, 10000)
	c.AdapterHello = duration(t, "adapter-hello", 1, 60000)
	c.Interval = duration(t, "interval", 0, 2000)
	c.Lock = rapid.SampledFrom(append(client.LockNames(), `exec:node "my lock.js" --it's`, "exec:python3 a.py")).Draw(t, "lock")
	if c.Lock == "redlock" && rapid.Bool().Draw(t, "nodes given") {
		c.Nodes = rapid.IntRange(1, 7).Draw(t, "nodes")
	}
	c.Guard = rapid.SampledFrom(append(client.Guards(), "")).Draw(t, "guard")
	if k, _ := client.LockKindOf(c.Lock, nil); k.Extends {
		c.ExtendBeforeWrite = rapid.Bool().Draw(t, "extend-before-write")
	}
	c.Hosts = rapid.SampledFrom([]harness.Hosts{"", harness.HostsLocal, harness.HostsNetns}).Draw(t, "hosts")
	if rapid.Bool().Draw(t, "in-section") {
		c.InjectEvery = rapid.IntRange(1, 30).Draw(t, "inject-every")
		c.PauseKind = rapid.SampledFrom(harness.InSectionKinds()).Draw(t, "pause-kind")
	}
	// The faults are drawn under the longest pause, which allows them all
	// (a failover needs 3 s or more), and the pause after them: a short
	// one where they take it.
	long := c
	long.Pause, long.TimeLimit = 5000*ms, 5000*ms
	c.Nemesis = harness.Nemesis(nemesisOf(t, long))
	c.Pause = duration(t, "pause", 1, 2000)
	c.TimeLimit = c.Pause + duration(t, "time-limit past the pause", 0, 20000)
	if c.Validate() != nil {
		c.Pause = duration(t, "long pause", 3000, 5000)
		c.TimeLimit = c.Pause + duration(t, "time-limit past the long pause", 0, 20000)
	}
	parts := c.FaultParts()
	if slices.Contains(parts, string(nemesis.KindClock)) {
		c.ClockJump = duration(t, "clock-jump", -3000, 3000)
		c.ClockStrobe = duration(t, "clock-strobe", 0, 200)
	}
	if slices.ContainsFunc(parts, func(p string) bool { return slices.Contains(harness.DelayFaults(), p) }) {
		c.Delay = duration(t, "delay", 0, 1000)
	}
	c.LockServerRecord = rapid.SampledFrom(lockserver.Modes()).Draw(t, "lock-server-record")
	c.Seed = rapid.Int64().Draw(t, "seed")
	c.CounterID = rapid.Int64Range(1, 1000).Draw(t, "counter-id")
	if rapid.Bool().Draw(t, "schedule") {
		c.Plan = planOf(t, c)
	}
	if err := c.Validate(); err != nil {
		// The faults are drawn by what validation allows; any other
		// refusal is a draw gone astray, not one to pass over.
		t.Fatalf("drew an invalid configuration: %v", err)
	}
	return c
}

func duration(t *rapid.T, label string, lo, hi int64) time.Duration {
	return time.Duration(rapid.Int64Range(lo, hi).Draw(t, label)) * ms
}

// nemesisOf draws a --nemesis c allows: "none", random, or up to three
// items, each a fault or a sequence of them. What c allows is the
// validation's to say: a draw that would make c invalid is left out.
func nemesisOf(t *rapid.T, c harness.Config) string {
	switch rapid.IntRange(0, 9).Draw(t, "nemesis none or random") {
	case 0, 1:
		return "none"
	case 2:
		return string(harness.Random)
	}
	kinds := c.FaultsAllowed()
	if len(kinds) == 0 {
		return "none"
	}
	var items []string
	with := func(item string) bool {
		try := c
		try.Nemesis = harness.Nemesis(strings.Join(append(slices.Clone(items), item), ","))
		return !slices.Contains(items, item) && try.Validate() == nil
	}
	for i := range rapid.IntRange(1, 3).Draw(t, "items") {
		if k := rapid.SampledFrom(kinds).Draw(t, fmt.Sprintf("item %d", i)); with(k) {
			items = append(items, k)
		}
	}
	if seq := sequenceOf(t, kinds); seq != "" && with(seq) {
		items = append(items, seq)
	}
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ",")
}

// sequenceOf draws a sequence (a+b) of the faults of kinds that may make
// one, or "".
func sequenceOf(t *rapid.T, kinds []string) string {
	seqable := slices.DeleteFunc(harness.SequenceFaults(), func(k string) bool { return !slices.Contains(kinds, k) })
	if len(seqable) < 2 {
		return ""
	}
	var parts []string
	for i := range rapid.IntRange(0, 2).Draw(t, "sequence parts") {
		if k := rapid.SampledFrom(seqable).Draw(t, fmt.Sprintf("part %d", i)); !slices.Contains(parts, k) {
			parts = append(parts, k)
		}
	}
	if len(parts) < 2 {
		return ""
	}
	return strings.Join(parts, "+")
}

// planOf draws a schedule of c's faults, each aimed at a worker or none,
// a node or none, and nodes or none.
func planOf(t *rapid.T, c harness.Config) nemesis.Plan {
	items := c.FaultNames()
	plan := nemesis.Plan{}
	if len(items) == 0 {
		return plan
	}
	at := time.Duration(0)
	for i := range rapid.IntRange(0, 4).Draw(t, "faults") {
		f := nemesis.Planned{Kind: history.Keyword(rapid.SampledFrom(items).Draw(t, fmt.Sprintf("fault %d", i)))}
		at += duration(t, "gap", 0, 2000)
		f.At, f.Length = at, duration(t, "length", 1, 2000)
		if rapid.Bool().Draw(t, "worker") {
			f.Worker = nemesis.On(rapid.IntRange(0, c.Workers-1).Draw(t, "slot"))
			f.Holder = rapid.Bool().Draw(t, "holder")
			f.InFlight = rapid.Bool().Draw(t, "in flight")
			if rapid.Bool().Draw(t, "call") {
				f.Call = rapid.SampledFrom(nemesis.LockCalls()).Draw(t, "lock call")
			}
		}
		if rapid.Bool().Draw(t, "node") {
			f.Node = nemesis.On(rapid.IntRange(0, 4).Draw(t, "node index"))
		}
		if rapid.Bool().Draw(t, "nodes") {
			f.Nodes = []int{rapid.IntRange(0, 2).Draw(t, "first node"), rapid.IntRange(3, 4).Draw(t, "second node")}
		}
		plan = append(plan, f)
	}
	return plan
}
