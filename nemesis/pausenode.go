package nemesis

import (
	"context"
	"errors"
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
	Nodes   []Pausable
	Freezer *Freezer
	stopped []Signaler
	aim     Slot  // as ClockJump's
	avoid   []int // as ClockJump's
}

// A Pausable is a server a pause freezes. One of this machine (a PID) is
// frozen with its children, found by their PIDs here; one of another
// machine (ProcessID 0: a PID there is none of this one's) is frozen by
// its own signal, sent there.
type Pausable interface {
	Signaler
	ProcessID() int // its PID now, on this machine (it changes across restarts); 0 for one of another machine
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
	pid := n.Nodes[i].ProcessID()
	if n.stopped, err = freeze(n.Freezer, pid, n.Nodes[i]); errors.Is(err, ErrNoTarget) {
		return nil, err
	}
	if pid == 0 {
		return map[history.Keyword]any{"node": i}, err // a PID of another machine is none of this one's
	}
	return map[history.Keyword]any{"node": i, "pid": pid}, err
}

// End implements Fault.
func (n *PauseNode) End(context.Context) error { return n.Freezer.ContAll(n.stopped...) }
