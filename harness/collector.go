package harness

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/nemesis"
)

// A collector gathers ops from every worker and the nemesis into the
// journal, each as it arrives, and keeps none of them: the journal is the
// run's only copy until the history is made from it, so that a run of any
// length takes the same memory, and a crash leaves what happened up to then.
type collector struct {
	mu         sync.Mutex
	journal    *history.Writer
	err        error // the first op the journal could not take
	ops        int
	maxProcess history.Process
	infoWrites []client.WriteID // :info writes the audit table may settle
	current    []atomic.Int64   // per worker slot: the process it records as now
	pending    []*history.Op    // per worker slot: its open invocation, if any
	renewing   []*history.Op    // per worker slot: the open renewal of its lock, if any
	holding    []bool           // per worker slot: it holds the lock (acquired, release not completed)
	written    []bool           // per worker slot: it has sent the write of the section it holds
	resume     func(slot int)   // sends SIGCONT to the worker in slot
	// stopWaiters stops, for d, the workers waiting for the lock but the
	// one in slot, whose pause began at from (nemesis.StopsWaiters).
	stopWaiters func(slot int, from int64, d time.Duration)
	wg          sync.WaitGroup // the workers' readers
	protocol    []error        // worker output that was not ops
}

func newCollector(journal io.Writer, workers int) *collector {
	c := &collector{journal: history.NewWriter(journal), current: make([]atomic.Int64, workers),
		pending: make([]*history.Op, workers), renewing: make([]*history.Op, workers), holding: make([]bool, workers), written: make([]bool, workers), maxProcess: -1}
	for i := range c.current {
		c.current[i].Store(int64(i))
	}
	return c
}

// record takes one op; safe for concurrent use.
func (c *collector) record(o history.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops++
	if o.IsClient() && o.Process > c.maxProcess {
		c.maxProcess = o.Process
	}
	if id, ok := client.InfoWrite(o); ok {
		c.infoWrites = append(c.infoWrites, id)
	}
	if c.err != nil {
		return
	}
	err := c.journal.Write(o)
	if err == nil {
		err = c.journal.Flush()
	}
	if err != nil {
		c.err = fmt.Errorf("journal: op %d: %w", c.ops, err)
	}
}

// read takes the ops a worker prints until its output ends.
func (c *collector) read(slot int, r io.Reader, lg *runLog) {
	defer c.wg.Done()
	hr := history.NewReader(r, fmt.Sprintf("worker %d output", slot))
	for n := 0; ; n++ {
		o, err := hr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			if n == 0 {
				// Nothing it said was an op: the binary did not serve as
				// a worker.
				err = fmt.Errorf("%w (does the program call harness.ServeWorker first, in main or TestMain?)", err)
			}
			lg.printf("worker %d: %v", slot, err)
			c.mu.Lock()
			c.protocol = append(c.protocol, err)
			c.mu.Unlock()
			_, _ = io.Copy(io.Discard, r) // let it finish rather than die on a closed pipe
			return
		}
		c.take(slot, o)
	}
}

// take records op o of the worker in slot, and resumes the worker after
// an in-section stop, which it cannot wake from alone.
func (c *collector) take(slot int, o history.Op) {
	o.Index = history.Unset // the reader numbers ops within this one stream
	if o.Process.IsRenewer() {
		// The lock's own renewals run beside the worker's ops, under a
		// process of their own: they change nothing of the worker's.
		c.record(o)
		c.mu.Lock()
		c.renewing[slot] = nil
		if o.Type == history.Invoke {
			c.renewing[slot] = &o
		}
		c.mu.Unlock()
		return
	}
	if o.IsClient() {
		c.current[slot].Store(int64(o.Process))
	}
	c.record(o)
	if o.IsClient() {
		c.mu.Lock()
		if o.Type == history.Invoke {
			c.pending[slot] = &o
		} else {
			c.pending[slot] = nil
		}
		switch {
		case o.F == history.FAcquire && o.Type == history.Ok:
			c.holding[slot], c.written[slot] = true, false
		case history.IsWrite(o.F) && o.Type == history.Invoke:
			c.written[slot] = true
		case o.F == history.FRelease && o.Type != history.Invoke:
			c.holding[slot] = false
		}
		c.mu.Unlock()
	}
	if d, ok := nemesis.SelfStopped(o); ok && c.resume != nil {
		time.AfterFunc(d, func() { c.resume(slot) })
	}
	if d, ok := nemesis.StopsWaiters(o); ok && c.stopWaiters != nil {
		c.stopWaiters(slot, o.Time, d)
	}
}

// waiting reports whether the worker in slot is waiting for the lock: its
// acquire invoked, and not completed.
func (c *collector) waiting(slot int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	inv := c.pending[slot]
	return inv != nil && inv.F == history.FAcquire
}

func (c *collector) wait() { c.wg.Wait() }

// holds reports whether the worker in slot holds the lock now, whether it
// has sent its write, and whether that write is still unanswered.
func (c *collector) holds(slot int) (holding, written, writing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[slot]
	return c.holding[slot], c.written[slot], p != nil && history.IsWrite(p.F)
}

// calling reports what the worker in slot has in flight: the :f of its
// open op ("" for none), and whether its lock has a renewal open.
func (c *collector) calling(slot int) (f history.Keyword, renewing bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pending[slot]; p != nil {
		f = p.F
	}
	return f, c.renewing[slot] != nil
}

// crashed completes the open invocation of the worker in slot, killed at
// time t, and its lock's open renewal, as :info: they may or may not have
// taken effect.
func (c *collector) crashed(slot int, t int64) {
	c.mu.Lock()
	inv, renewal := c.pending[slot], c.renewing[slot]
	c.pending[slot], c.renewing[slot], c.holding[slot] = nil, nil, false
	c.mu.Unlock()
	for _, inv := range []*history.Op{inv, renewal} {
		if inv != nil {
			c.record(history.Op{Index: history.Unset, Time: t, Type: history.Info, Process: inv.Process,
				F: inv.F, Value: inv.Value, Error: history.ErrKilled, Extra: inv.Extra})
		}
	}
}

// stats returns what the collector learned of the ops it took.
func (c *collector) stats() (ops int, maxProcess history.Process, infoWrites []client.WriteID, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops, c.maxProcess, c.infoWrites, c.err
}

// protocolErrors are the workers' outputs that could not be read as ops.
func (c *collector) protocolErrors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.protocol
}
