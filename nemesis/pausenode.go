package nemesis

import (
	"context"
	"math/rand"

	"github.com/hiatus-dev/hiatus/history"
)

// KindPauseNode is SIGSTOP of one of the lock's own servers: a Redis node,
// or etcd's.
const KindPauseNode history.Keyword = "pause-node"

// PauseNode freezes one of the lock's own servers, and its children, as
// PauseServer freezes one of the run's: the lock's requests to it wait,
// while the other nodes, and the leases they hold, go on. It is the pause
// a node's GC, a stalled disk or a frozen VM gives; on hosts of their own
// it reaches the node where no fault of the run's Redis can.
type PauseNode struct {
	pauseEvents
	Nodes   []func() int // each node's PID now (it changes across restarts)
	Freezer *Freezer
	pids    []int
	aim     Slot  // as ClockJump's
	avoid   []int // as ClockJump's
}

func (n *PauseNode) aimAtNode(node Slot)    { n.aim = node }
func (n *PauseNode) avoidNodes(nodes []int) { n.avoid = nodes }

// Kind implements Fault.
func (*PauseNode) Kind() history.Keyword { return KindPauseNode }

// Begin implements Fault.
func (n *PauseNode) Begin(_ context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	i, err := pickNode(len(n.Nodes), r, n.aim, n.avoid)
	if err != nil {
		return nil, err
	}
	pid := n.Nodes[i]()
	if pid <= 1 {
		return nil, ErrNoTarget // -1 would stop everyone
	}
	n.pids = withChildren(pid)
	return map[history.Keyword]any{"node": i, "pid": pid}, n.Freezer.Stop(n.pids...)
}

// End implements Fault.
func (n *PauseNode) End(context.Context) error { return n.Freezer.Cont(n.pids...) }
