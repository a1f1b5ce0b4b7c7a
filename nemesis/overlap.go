package nemesis

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
)

// A serverFault acts on one of the run's servers, which it names.
type serverFault interface{ server() string }

// A nodeCounter is a fault of the lock's nodes that says how many there
// are, so that a schedule of faults at once can aim it at a free one.
type nodeCounter interface {
	nodeAimer
	nodeCount() int
}

func (n *ClockJump) nodeCount() int   { return len(n.Nodes) }
func (n *RestartNode) nodeCount() int { return len(n.Nodes) }
func (n *PauseNode) nodeCount() int   { return len(n.Nodes) }

// overlap injects faults that overlap in time, as Jepsen's combined
// nemeses do: every Interval it begins one, drawn among those not under
// way, on a target no other fault holds — a worker, one of the lock's
// nodes, a server — and ends it Pause later, while others come and go.
// Faults of one kind take turns (a Fault holds the state of the one it
// began). It returns once ctx has ended and every fault begun has ended.
func (s *Schedule) overlap(ctx context.Context) error {
	var mu sync.Mutex
	held := map[string]bool{} // the targets and kinds under way
	var wg sync.WaitGroup
	defer wg.Wait()
	for sleep(ctx, s.Interval) {
		mu.Lock()
		f, claims := s.draw(held)
		for _, c := range claims {
			held[c] = true
		}
		mu.Unlock()
		if f == nil {
			continue // every kind is under way, or finds its targets taken
		}
		// Each fault draws with a source of its own: a Rand is not safe
		// for two goroutines, and the draws stay the seed's.
		r := rand.New(rand.NewSource(s.Rand.Int63()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.injectWith(ctx, f, s.Pause, r)
			mu.Lock()
			for _, c := range claims {
				delete(held, c)
			}
			mu.Unlock()
		}()
	}
	return nil
}

// draw picks a fault not under way with a target free of held, aims it
// there, and returns it with what it holds while it lasts: its kind and
// its target. It returns nil when there is none.
func (s *Schedule) draw(held map[string]bool) (Fault, []string) {
	for _, i := range s.Rand.Perm(len(s.Faults)) {
		f := s.Faults[i]
		kind := "kind " + string(f.Kind())
		if held[kind] {
			continue
		}
		if target, ok := s.aimFree(f, held); ok {
			return f, []string{kind, target}
		}
	}
	return nil, nil
}

// aimFree aims f at a target held does not hold, and names it: a worker
// slot, one of the lock's nodes, or, for a fault of a server, the server.
func (s *Schedule) aimFree(f Fault, held map[string]bool) (string, bool) {
	switch a := f.(type) {
	case aimer:
		var free []int
		for _, t := range a.targets() {
			if !held[fmt.Sprintf("worker %d", t.Worker)] {
				free = append(free, t.Worker)
			}
		}
		if len(free) == 0 {
			return "", false
		}
		slot := free[s.Rand.Intn(len(free))]
		a.aimAt(On(slot))
		return fmt.Sprintf("worker %d", slot), true
	case nodeCounter:
		var free []int
		for n := range a.nodeCount() {
			if !held[fmt.Sprintf("node %d", n)] {
				free = append(free, n)
			}
		}
		if len(free) == 0 {
			return "", false
		}
		node := free[s.Rand.Intn(len(free))]
		a.aimAtNode(On(node))
		return fmt.Sprintf("node %d", node), true
	}
	// A pause and a kill of one server hold the same target; any other
	// fault is its own.
	target := "fault " + string(f.Kind())
	if s, ok := f.(serverFault); ok {
		target = "server " + s.server()
	}
	return target, !held[target]
}
