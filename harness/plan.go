package harness

import (
	"strings"

	"github.com/hiatus-dev/hiatus/client"
)

// A plan is a Config read once: the faults its --nemesis names, its lock's
// kind, and what the faults need. Validation and the run take one and
// read these from it; nothing after splits --nemesis or looks the lock up
// again.
type plan struct {
	Config
	items [][]string      // --nemesis's items (FaultNames), each a fault or a sequence's parts
	parts []string        // its faults, the sequences' parts among them
	lock  client.LockKind // the lock's kind, among the lab's and hiatus's
	needs need            // what the faults need, together
}

// plan reads c once. A fault it does not know (validation says so) needs
// nothing.
func (c Config) plan() plan {
	p := plan{Config: c, lock: c.lookupLock()}
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

// names are the items of c's --nemesis, a sequence's joined by +, as
// FaultNames says them.
func (c plan) names() []string {
	out := make([]string, len(c.items))
	for i, parts := range c.items {
		out[i] = strings.Join(parts, "+")
	}
	return out
}
