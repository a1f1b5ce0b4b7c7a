package harness

import (
	"strings"

	"github.com/hiatus-dev/hiatus/client"
)

// A runPlan is a Config read once: the faults its --nemesis names, its
// lock's kind, and what the faults need. Validation reads one, and a run
// (runWatched on) takes one and passes it along; nothing on the run's path
// splits --nemesis or looks the lock up again. Its Config's server URLs
// are filled in once the run has started its throwaway servers, and its
// faults stay as they were read: with the URLs given, a random nemesis
// would allow fewer.
type runPlan struct {
	Config
	items [][]string      // --nemesis's items (FaultNames), each a fault or a sequence's parts
	parts []string        // its faults, the sequences' parts among them
	lock  client.LockKind // the lock's kind, among the lab's and hiatus's
	needs need            // what the faults need, together
}

// runPlan reads c once. A fault it does not know (validation says so)
// needs nothing.
func (c Config) runPlan() runPlan {
	p := runPlan{Config: c, lock: c.lookupLock()}
	for _, f := range c.FaultNames() {
		parts := strings.Split(f, "+")
		p.items = append(p.items, parts)
		p.parts = append(p.parts, parts...)
	}
	for _, f := range p.parts {
		if k, ok := faultKindOf(f); ok {
			p.needs |= k.needs
		}
	}
	if c.onSentinel() {
		p.needs |= needReplica // the run starts the sentinels, with or without a failover
	}
	return p
}

// The Config methods runPlan answers itself (these, Describe in
// settings.go, HolderWait in config.go) would read c's Config again, which
// the run has changed since (its URLs); they answer from what was read.

// FaultNames are the items of c's --nemesis as read, a sequence's parts
// joined by +.
func (c runPlan) FaultNames() []string {
	out := make([]string, len(c.items))
	for i, parts := range c.items {
		out[i] = strings.Join(parts, "+")
	}
	return out
}

// FaultParts are c's faults as read, the sequences' parts among them.
func (c runPlan) FaultParts() []string { return c.parts }
