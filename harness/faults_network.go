package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// networkFaults cut whole machines apart: the lock's Redis primary from its
// replica and sentinels (which promote the replica), or a worker's host
// from every other.
func networkFaults() []faultKind {
	return []faultKind{
		{name: nemesis.KindFailover, about: "the lock's Redis primary cut off from its replica and sentinels", needs: needReplica | sequenceable,
			check: func(c runPlan) error {
				if c.Pause < 3*time.Second {
					return fmt.Errorf("--nemesis failover needs --pause of 3s or more: the sentinels take about 2.3 s to promote the replica, and a shorter fault would fail nothing over")
				}
				if !c.lock.Failover {
					var can []string
					for _, k := range client.LockKinds() {
						if k.Failover {
							can = append(can, k.Name)
						}
					}
					return fmt.Errorf("--nemesis failover fails over the Redis one lock is kept on: --lock %s, or an exec: adapter with --adapter-store %s; not %s", strings.Join(can, ", "), AdapterOnSentinel, c.Lock)
				}
				return nil
			},
			build: func(e faultEnv) nemesis.Fault { return &nemesis.Failover{Redis: e.env.topo.repl} }},
		{name: nemesis.KindIsolate, about: "a worker's host cut off from the network; --hosts netns or ssh:FILE", needs: needHosts | sequenceable,
			build: func(e faultEnv) nemesis.Fault { return e.env.topo.isolate(e.workers.Targets) }},
	}
}
