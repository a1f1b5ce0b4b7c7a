package harness

import (
	"context"
	"slices"
	"time"

	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/lockserver"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A recordedClock is a lock node's clock that the clock fault steps
// through the lock server's record (nil: none), which then stamps the
// node's commands by the step it knows rather than by its measures. The
// node is the record's Redis node of its number: the lock's nodes come
// first there, in their order.
type recordedClock struct {
	s   *servers.Server
	i   int
	rec *lockserver.Recorder
}

func (c recordedClock) JumpClock(offset time.Duration) error {
	return c.rec.StepClock(context.Background(), c.i, offset, func() error { return c.s.JumpClock(offset) })
}

// nodeFaults act on one of the lock's own servers: its life, its clock, a
// pause of its process. A run with one keeps the lock on nodes apart from the run's
// Redis, whose clock stamps the history and whose counter hands out the
// fences: a jumped clock there would jump the history, a restart reset the
// fences.
func nodeFaults() []faultKind {
	return []faultKind{
		{name: nemesis.KindClock, about: "step a lock node's clock by --clock-jump", needs: needLockServers | needRedisNodes | needFakeClock | sequenceable,
			build: func(e faultEnv) nemesis.Fault {
				var nodes []nemesis.ClockNode
				for i, s := range e.env.topo.nodes {
					nodes = append(nodes, recordedClock{s, i, e.env.record})
				}
				return &nemesis.ClockJump{Nodes: nodes, Offset: e.cfg.clockJump(), Strobe: e.cfg.ClockStrobe}
			}},
		{name: nemesis.KindRestart, about: "SIGKILL one of the lock's nodes, restart it: a Redis node empty (unless --node-aof), a ZooKeeper server with its data", needs: needLockServers | needLockNodes | sequenceable,
			build: func(e faultEnv) nemesis.Fault {
				var nodes []nemesis.Restartable
				for _, s := range e.env.topo.nodes {
					nodes = append(nodes, s)
				}
				// After a partition, aimed at a bare majority's node; a
				// holder takes one within a few sections (the cut worker's
				// keys on the cut nodes lapse a lease after its grant).
				if e.env.topo.zk != nil {
					return &nemesis.RestartNode{Nodes: nodes}
				}
				holding := bareMajority(e.env.topo.nodeURLs, lockKey(e.cfg.Name), 3*(e.cfg.Lease+e.cfg.Work))
				return &nemesis.RestartNode{Nodes: nodes, Holding: holding}
			}},
		{name: nemesis.KindPauseNode, about: "SIGSTOP one of the lock's own servers: a Redis node, etcd's, or a ZooKeeper server", needs: needLockServers,
			build: func(e faultEnv) nemesis.Fault {
				var nodes []nemesis.Pausable
				for _, s := range append(slices.Clone(e.env.topo.nodes), e.env.topo.etcd) {
					if s != nil {
						nodes = append(nodes, s)
					}
				}
				return &nemesis.PauseNode{Nodes: nodes, Freezer: e.freezer}
			}},
	}
}
