package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/hiatus-dev/hiatus/history"
)

// A ClockNode is a server whose wall clock can be stepped: a Redis node
// started under libfaketime.
type ClockNode interface {
	// JumpClock sets the node's clock to the real one plus offset; 0 puts
	// it back.
	JumpClock(offset time.Duration) error
}

// ClockJump steps one node's wall clock by Offset at Begin and back at End:
// a clock that an NTP correction or an operator jumps. A Redis node
// expires keys by its wall clock, so a forward jump of a lease ends every
// lease it holds at once; a backward one lengthens them. With Strobe, the
// clock goes back and forth between the offset and the real time every
// Strobe until End: a clock that a misconfigured time daemon keeps
// stepping.
type ClockJump struct {
	Nodes  []ClockNode
	Offset time.Duration
	Strobe time.Duration // 0: one jump
	node   ClockNode
	stop   chan struct{} // closed by End to stop the strobe
	done   chan error    // the strobe's first failure, when it ends
	aim    Slot          // the node a replayed schedule aims at; none for any
	avoid  []int         // nodes not to pick (see Sequence)
}

// A nodeAimer is a fault of the lock's nodes that a replayed schedule aims
// at a node (none: any).
type nodeAimer interface{ aimAtNode(node Slot) }

// A nodesAimer is a link fault that a replay can aim at the lock nodes it
// cut in the run.
type nodesAimer interface{ aimAtNodes(nodes []int) }

func (n *ClockJump) aimAtNode(node Slot)   { n.aim = node }
func (n *RestartNode) aimAtNode(node Slot) { n.aim = node }

// A nodeCutter is a fault that cuts a worker off from some of the lock's
// nodes, and a nodeAvoider one that, after it in a Sequence, picks among
// the others: Kleppmann's clock jump is on a node the cut worker holds.
type nodeCutter interface{ cutNodes() []int }
type nodeAvoider interface{ avoidNodes(nodes []int) }

func (n *ClockJump) avoidNodes(nodes []int)   { n.avoid = nodes }
func (n *RestartNode) avoidNodes(nodes []int) { n.avoid = nodes }
func (n *LinkFault) cutNodes() []int          { return n.nodes }

// pickNode chooses one of n nodes at random but those in avoid, or the one
// aimed at.
func pickNode(n int, r *rand.Rand, aim Slot, avoid []int) (int, error) {
	if i, ok := aim.Index(); ok {
		if i >= n {
			return 0, ErrNoTarget
		}
		return i, nil
	}
	var free []int
	for i := range n {
		if !slices.Contains(avoid, i) {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return 0, ErrNoTarget
	}
	return free[r.Intn(len(free))], nil
}

// Kind implements Fault.
func (*ClockJump) Kind() history.Keyword { return KindClock }

// Begin implements Fault.
func (n *ClockJump) Begin(_ context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	i, err := pickNode(len(n.Nodes), r, n.aim, n.avoid)
	if err != nil {
		return nil, err
	}
	n.node = n.Nodes[i]
	v := map[history.Keyword]any{"node": i, "offset-ms": n.Offset.Milliseconds()}
	if err := n.node.JumpClock(n.Offset); err != nil {
		return v, err
	}
	if n.Strobe > 0 {
		v["strobe-ms"] = n.Strobe.Milliseconds()
		n.stop, n.done = make(chan struct{}), make(chan error, 1)
		go n.strobe()
	}
	return v, nil
}

// strobe steps the node's clock between the offset and the real time
// every Strobe until End stops it.
func (n *ClockJump) strobe() {
	t := time.NewTicker(n.Strobe)
	defer t.Stop()
	offsets := [2]time.Duration{0, n.Offset} // the clock is at the offset now
	for i := 0; ; i++ {
		select {
		case <-n.stop:
			n.done <- nil
			return
		case <-t.C:
			if err := n.node.JumpClock(offsets[i%2]); err != nil {
				n.done <- err
				return
			}
		}
	}
}

// End implements Fault: the strobe, if any, stops, and the clock is put
// back.
func (n *ClockJump) End(context.Context) error {
	var err error
	if n.stop != nil {
		close(n.stop)
		err = <-n.done
		n.stop = nil
	}
	return errors.Join(err, n.node.JumpClock(0))
}

// RestartNode crashes one of Nodes at Begin and starts it again at End: a
// Redis node without persistence restarts empty, every lease it held gone.
type RestartNode struct {
	killEvents
	Nodes []Restartable
	// Holding, when set, aims a restart that follows a partition in a
	// sequence: it waits until a holder holds a bare majority of the
	// nodes not in avoid, none of those in it, and names one of its nodes
	// (false: none did in time, and a node is drawn). Once the partition
	// heals, the restarted node and the cut ones make a majority for
	// another worker while the holder still holds.
	Holding func(ctx context.Context, avoid []int) (node int, ok bool)
	node    Restartable
	aim     Slot  // as ClockJump's
	avoid   []int // as ClockJump's
}

// Kind implements Fault.
func (*RestartNode) Kind() history.Keyword { return KindRestart }

// Begin implements Fault.
func (n *RestartNode) Begin(ctx context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	aim := n.aim
	if n.Holding != nil && len(n.avoid) > 0 {
		// A replay aims at the node the run crashed, one of a holder's
		// bare majority then: it waits, as the run did, for a holder to
		// have one again, or the crash finds a majority whole.
		if i, ok := n.Holding(ctx, n.avoid); ok && aim.IsNone() {
			aim = On(i)
		}
	}
	i, err := pickNode(len(n.Nodes), r, aim, n.avoid)
	if err != nil {
		return nil, err
	}
	n.node = n.Nodes[i]
	v := map[history.Keyword]any{"node": i}
	if pid := n.node.ProcessID(); pid > 0 {
		v["pid"] = pid
	}
	return v, n.node.Crash()
}

// End implements Fault.
func (n *RestartNode) End(ctx context.Context) error { return n.node.Restart(ctx) }

// A Link is what a link fault acts on between a worker and servers: a
// proxy in the path (topology.Link), or the kernel's filter on the
// worker's host. Heal undoes whatever was done: a cut, a delay, a drop.
type Link interface {
	Cut(ctx context.Context) error
	Slow(ctx context.Context, d time.Duration) error
	Drop(ctx context.Context) error
	Heal(ctx context.Context) error
}

// How a LinkFault acts on its links.
type LinkAction int

// The link faults.
const (
	// Partition: nothing crosses the links; what was sent is held and
	// delivered at the heal, as TCP retransmits it.
	Partition LinkAction = iota
	// Delay: every byte sent over the links meanwhile arrives Slow late.
	Delay
	// Drop: the links' connections are reset, and new ones until the heal:
	// a request in flight may have arrived or not.
	Drop
	// DelayReplies: what the servers answer arrives Slow late, what the
	// worker sends at once; begun once a lock call is in flight (see
	// LinkFault.Call), whose reply it holds.
	DelayReplies
	// DelayGrant is DelayReplies begun once the worker asks for the lock
	// while no other worker holds it, as far as their ops say: the call
	// most likely granted, whose "yes" then comes late. Any lock call
	// that a reply delay catches is refused more often than granted.
	DelayGrant
)

// LinkFault cuts, slows or breaks the links of one worker: to the lock's
// Redis nodes or to PostgreSQL, as Links hands them.
type LinkFault struct {
	Which  history.Keyword // its kind: KindPartitionRedis, KindDelayPostgres, …
	Action LinkAction
	Slow   time.Duration // Delay's added latency
	// Links returns the links of the worker in slot that the fault acts
	// on, what the history should say they are ("postgres", "nodes 1,3"),
	// and the lock nodes they lead to: those of nodes, a replay's, when it
	// is not nil; else r chooses, for a minority or a majority of several
	// nodes.
	Links func(slot int, nodes []int, r *rand.Rand) ([]Link, string, []int)
	// Writes says the links carry the worker's write (PostgreSQL's): a
	// fault aimed at a write in flight waits for them to have a request
	// unanswered.
	Writes  bool
	Workers func() []Target
	// CallWait bounds how long a DelayReplies fault waits, once begun, for
	// a lock call of its worker's in flight to catch (0: holderWait);
	// past it the delay begins on idle links.
	CallWait time.Duration
	links    []Link
	nodes    []int           // the lock nodes the links cut lead to
	aim      Slot            // as SigStop's
	aimNodes []int           // the lock nodes to act on; nil to choose
	call     history.Keyword // the lock call to catch in flight; "" for any
}

// A replyLink can delay what the server answers and not what the worker
// sends (a proxy's can), and count the replies it held.
type replyLink interface {
	SlowReplies(ctx context.Context, d time.Duration) error
	RepliesHeld() int64
}

// A callAimer is a fault a replay can aim at a lock call in flight
// (LockCalls), as the run's fault caught one.
type callAimer interface{ aimAtCall(call history.Keyword) }

func (n *LinkFault) aimAtCall(call history.Keyword) { n.call = call }

// An awaitingLink can tell whether a request a worker sent over it has not
// yet been answered (a proxy's can; the kernel's cannot).
type awaitingLink interface{ Awaiting() bool }

// A flightAimer is a fault that a replay can aim at a request in flight
// on the links of the worker in slot: awaiting says one is. The worker's
// write is sent by the time its invocation is seen, but its bytes may not
// yet be in the link: a drop then would fail it unsent, not leave it in
// flight.
type flightAimer interface {
	awaiting(slot int) bool
}

// awaiting says a request the worker in slot sent over the links its write
// goes by is unanswered; true when the fault's links do not carry the
// write, or none of them can tell.
func (n *LinkFault) awaiting(slot int) bool {
	if !n.Writes {
		return true
	}
	links, _, _ := n.Links(slot, n.aimNodes, rand.New(rand.NewSource(1)))
	var as []awaitingLink
	for _, l := range links {
		if a, ok := l.(awaitingLink); ok {
			as = append(as, a)
		}
	}
	return len(as) == 0 || slices.ContainsFunc(as, awaitingLink.Awaiting)
}

func (n *LinkFault) aimAt(worker Slot)      { n.aim = worker }
func (n *LinkFault) aimAtNodes(nodes []int) { n.aimNodes = nodes }
func (n *LinkFault) targets() []Target      { return n.Workers() }

// Kind implements Fault.
func (n *LinkFault) Kind() history.Keyword { return n.Which }

// Begin implements Fault. A fault that fails to begin on one link heals
// them all: it leaves nothing behind.
func (n *LinkFault) Begin(ctx context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	t, err := pick(n.Workers(), r, n.aim)
	if err != nil {
		return nil, err
	}
	links, what, nodes := n.Links(t.Worker, n.aimNodes, r)
	if len(links) == 0 {
		return nil, fmt.Errorf("nemesis: worker %d has no link to %s: %w", t.Worker, n.Which, ErrNoTarget)
	}
	n.links, n.nodes = links, nodes
	v := t.value()
	v["links"] = what
	if len(nodes) > 0 {
		v["nodes"] = nodeList(nodes) // for a replay to act on the same
	}
	repliesOnly := n.Action == DelayReplies || n.Action == DelayGrant
	if n.Action == Delay || repliesOnly {
		v["delay-ms"] = n.Slow.Milliseconds()
	}
	if repliesOnly {
		if err := n.catchCall(ctx, t.Worker, v); err != nil {
			return nil, errors.Join(err, n.End(context.WithoutCancel(ctx)))
		}
		return v, nil
	}
	for _, l := range links {
		switch n.Action {
		case Partition:
			err = l.Cut(ctx)
		case Delay:
			err = l.Slow(ctx, n.Slow)
		case Drop:
			err = l.Drop(ctx)
		}
		if err != nil {
			return nil, errors.Join(err, n.End(context.WithoutCancel(ctx)))
		}
	}
	return v, nil
}

// catchCall begins a DelayReplies fault on a lock call of the worker in
// slot in flight (the one aimed at, or any), and says which in v's :call:
// it waits, up to CallWait, for the worker's ops to show the call in
// flight, delays the replies on its links, and keeps the delay once a
// reply is held before the call completes. When the call completed
// first — answered before the delay began: the worker's op is recorded
// before its request is sent, and seen a little after — the delay ends
// and it waits for the next. Past CallWait it delays the replies with no
// call caught. A link that cannot delay replies alone is an error.
func (n *LinkFault) catchCall(ctx context.Context, slot int, v map[history.Keyword]any) error {
	var links []replyLink
	for _, l := range n.links {
		rl, ok := l.(replyLink)
		if !ok {
			return fmt.Errorf("nemesis: %s: a link of worker %d cannot delay replies alone (it takes a proxy)", n.Which, slot)
		}
		links = append(links, rl)
	}
	held := func() (h int64) {
		for _, l := range links {
			h += l.RepliesHeld()
		}
		return h
	}
	slow := func(d time.Duration) error {
		var errs []error
		for _, l := range links {
			errs = append(errs, l.SlowReplies(ctx, d))
		}
		return errors.Join(errs...)
	}
	deadline := time.Now().Add(cmp.Or(n.CallWait, holderWait))
	for time.Now().Before(deadline) {
		call, ok := n.calling(slot)
		if !ok {
			if !sleep(ctx, 100*time.Microsecond) {
				break
			}
			continue
		}
		before := held()
		if err := slow(n.Slow); err != nil {
			return err
		}
		if n.heldBefore(ctx, slot, call, before, held, deadline) {
			v["call"] = call
			return nil
		}
		if err := slow(0); err != nil {
			return err
		}
	}
	return slow(n.Slow)
}

// calling returns the lock call the worker in slot has in flight, when it
// is the one the fault is aimed at (any, when none is; for DelayGrant, an
// acquire that has not lost the lock to another worker).
func (n *LinkFault) calling(slot int) (history.Keyword, bool) {
	want := n.call
	if n.Action == DelayGrant {
		want = history.FAcquire
	}
	for _, t := range n.Workers() {
		if t.Worker == slot {
			call, ok := t.Calling()
			return call, ok && (want == "" || call == want) && !n.lost(slot)
		}
	}
	return "", false
}

// lost says a DelayGrant fault's acquire cannot be granted now: a worker
// other than the one in slot holds the lock.
func (n *LinkFault) lost(slot int) bool {
	return n.Action == DelayGrant && slices.ContainsFunc(n.Workers(), func(t Target) bool { return t.Worker != slot && t.Holding })
}

// heldBefore waits until the links hold a reply more than before, true,
// or the worker in slot no longer has call in flight (or the deadline
// passed: a call that hangs), false.
func (n *LinkFault) heldBefore(ctx context.Context, slot int, call history.Keyword, before int64, held func() int64, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		if held() > before {
			return true
		}
		if now, ok := n.calling(slot); !ok || now != call {
			// A reply held as the call completed counts, but not for a
			// grant whose acquire lost the lock: it is refused.
			return held() > before && !n.lost(slot)
		}
		if !sleep(ctx, 100*time.Microsecond) {
			return false
		}
	}
	return held() > before
}

// End implements Fault.
func (n *LinkFault) End(ctx context.Context) error {
	var errs []error
	for _, l := range n.links {
		errs = append(errs, l.Heal(ctx))
	}
	return errors.Join(errs...)
}

// Replicated is a Redis primary with a replica and sentinels.
type Replicated interface {
	// Primary returns the node the sentinels name the primary now.
	Primary(ctx context.Context) (int, error)
	// Isolate cuts node off from the sentinels and the other node, not
	// from the workers; Rejoin heals that.
	Isolate(ctx context.Context, node int) error
	Rejoin(ctx context.Context, node int) error
}

// Failover isolates the primary from the sentinels and its replica (not
// from the workers) for the fault's length: the sentinels promote the
// replica after their down-after time, and workers that have not yet heard
// of it go on taking locks on the old primary, which are never replicated.
// At the heal the sentinels make the old primary a replica of the new one,
// and what it held is gone.
type Failover struct {
	Redis Replicated
	node  int
}

// Kind implements Fault.
func (*Failover) Kind() history.Keyword { return KindFailover }

// Begin implements Fault.
func (n *Failover) Begin(ctx context.Context, _ *rand.Rand) (map[history.Keyword]any, error) {
	node, err := n.Redis.Primary(ctx)
	if err != nil {
		return nil, err
	}
	n.node = node
	if err := n.Redis.Isolate(ctx, node); err != nil {
		return nil, errors.Join(err, n.Redis.Rejoin(context.WithoutCancel(ctx), node))
	}
	return map[history.Keyword]any{"node": node}, nil
}

// End implements Fault. A fault in which the sentinels promoted no one
// ends with an error, so that the history does not count it a failover.
func (n *Failover) End(ctx context.Context) error {
	now, err := n.Redis.Primary(ctx)
	if rerr := n.Redis.Rejoin(ctx, n.node); rerr != nil {
		return errors.Join(rerr, err)
	}
	switch {
	case err != nil:
		return fmt.Errorf("after the fault: %w", err)
	case now == n.node:
		return fmt.Errorf("the sentinels promoted no replica while node %d was cut off", n.node)
	}
	return nil
}

// A Sequence is faults that begin one after another, Step apart, and end
// together, in reverse: a fault that needs another in force before it, as
// Kleppmann's Redlock counterexample needs a partition before a clock
// jump. Its kind is its parts' joined by "+", and its events carry every
// part's fields (the first part's where two share a name) and :parts.
type Sequence struct {
	Parts []Fault
	Step  time.Duration
	begun []Fault
}

// Kind implements Fault.
func (n *Sequence) Kind() history.Keyword {
	var k []string
	for _, p := range n.Parts {
		k = append(k, string(p.Kind()))
	}
	return history.Keyword(strings.Join(k, "+"))
}

func (n *Sequence) targets() []Target {
	for _, p := range n.Parts {
		if a, ok := p.(aimer); ok {
			return a.targets()
		}
	}
	return nil
}

func (n *Sequence) aimAt(worker Slot) {
	for _, p := range n.Parts {
		if a, ok := p.(aimer); ok {
			a.aimAt(worker)
		}
	}
}

func (n *Sequence) aimAtNodes(nodes []int) {
	for _, p := range n.Parts {
		if a, ok := p.(nodesAimer); ok {
			a.aimAtNodes(nodes)
		}
	}
}

func (n *Sequence) aimAtCall(call history.Keyword) {
	for _, p := range n.Parts {
		if a, ok := p.(callAimer); ok {
			a.aimAtCall(call)
		}
	}
}

func (n *Sequence) aimAtNode(node Slot) {
	for _, p := range n.Parts {
		if a, ok := p.(nodeAimer); ok {
			a.aimAtNode(node)
		}
	}
}

// Begin implements Fault. A part begins on the nodes the parts before it
// left alone (a clock jump on a node the worker still reaches). A part
// that cannot begin is said in :part-error, and the parts begun stay in
// force until End: their window is recorded whole. Only when the first
// part fails does the whole.
func (n *Sequence) Begin(ctx context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	n.begun = nil
	v := map[history.Keyword]any{}
	var kinds []any
	var avoid []int
	for i, p := range n.Parts {
		if i > 0 && !sleep(ctx, n.Step) {
			v["part-error"] = fmt.Sprintf("%s: %v", p.Kind(), ctx.Err())
			break
		}
		if a, ok := p.(nodeAvoider); ok {
			a.avoidNodes(avoid)
		}
		pv, err := p.Begin(ctx, r)
		if err != nil && i == 0 {
			return nil, err
		}
		if err != nil {
			v["part-error"] = fmt.Sprintf("%s: %v", p.Kind(), err)
			break
		}
		if c, ok := p.(nodeCutter); ok {
			avoid = append(avoid, c.cutNodes()...)
		}
		n.begun = append(n.begun, p)
		kinds = append(kinds, p.Kind())
		for k, x := range pv {
			if _, ok := v[k]; !ok {
				v[k] = x
			}
		}
	}
	v["parts"] = kinds
	return v, nil
}

// End implements Fault: the parts begun, last first.
func (n *Sequence) End(ctx context.Context) error {
	var errs []error
	for i := len(n.begun) - 1; i >= 0; i-- {
		if err := n.begun[i].End(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.begun[i].Kind(), err))
		}
	}
	n.begun = nil
	return errors.Join(errs...)
}

// Isolate cuts a worker's host off from the network (the machine the
// servers are on) at the kernel, packets dropped both ways, for the
// fault's length: a client machine partitioned away, its connections
// stalled until TCP's retransmissions get through after the heal.
type Isolate struct {
	Workers   func() []Target
	Cut, Heal func(ctx context.Context, slot int) error
	slot      int
	aim       Slot // as SigStop's
}

func (n *Isolate) aimAt(worker Slot) { n.aim = worker }
func (n *Isolate) targets() []Target { return n.Workers() }

// Kind implements Fault.
func (*Isolate) Kind() history.Keyword { return KindIsolate }

// Begin implements Fault.
func (n *Isolate) Begin(ctx context.Context, r *rand.Rand) (map[history.Keyword]any, error) {
	t, err := pick(n.Workers(), r, n.aim)
	if err != nil {
		return nil, err
	}
	n.slot = t.Worker
	if err := n.Cut(ctx, t.Worker); err != nil {
		// The rules may be in force all the same: a fault that failed to
		// begin must leave nothing behind.
		return nil, errors.Join(err, n.Heal(context.WithoutCancel(ctx), t.Worker))
	}
	return t.value(), nil
}

// End implements Fault.
func (n *Isolate) End(ctx context.Context) error { return n.Heal(ctx, n.slot) }
