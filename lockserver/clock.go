package lockserver

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node's record is stamped on the node's own clock: MONITOR's timestamps
// are the server's. For the run's Redis that is the history's clock
// itself. A lock node with a clock of its own (a Redlock node, one whose
// clock the clock fault steps) is stamped through its offset from the
// history's clock, measured as the run goes: its TIME between two of the
// run's Redis, the offset the difference from their midpoint, known to half
// their spread. A line whose time the offset makes inconsistent with when
// it arrived (a step of the node's clock, or a line late) has the offset
// measured again at once, and takes whichever of the two offsets puts it
// latest before its arrival: a line is never stamped after it was read.

// resampleEvery is how often a node's offset is measured while its lines
// come, and sampleTimeout bounds one measure: a node or run Redis that is
// paused keeps the offset it had.
const (
	resampleEvery = 200 * time.Millisecond
	// resampleAtMost bounds how often a line's disagreement with its
	// arrival measures the node again: a stream read late disagrees at
	// every line, and a measure a line would slow the reading further.
	resampleAtMost = 50 * time.Millisecond
	sampleTimeout  = 300 * time.Millisecond
	// firstSampleWait bounds the tries of a node's first offset.
	firstSampleWait = 5 * time.Second
	// stepTolerance is how far a line's time may be from its arrival
	// before the offset is measured again: a line read this late, or a
	// clock stepped this far.
	stepTolerance = 20 * time.Millisecond
	// aheadTolerance is how far after its arrival a line may seem to run
	// (the arrival is an estimate, known to the local measure's spread).
	aheadTolerance = 2 * time.Millisecond
)

// A historyClock is the history's clock, the run's Redis TIME, and where
// it stands to this machine's clock.
type historyClock struct {
	rdb     *redis.Client
	startNS int64 // the run's start, unix ns on the history's clock
	localNS int64 // the history's clock minus this machine's, ns
	// spread is how far localNS may be off, ns: half the round trip it
	// was measured in. An event stamped by this machine's clock is known
	// no better.
	spread int64
}

// newHistoryClock measures where the run's Redis's clock stands to this
// machine's: the offset of its TIME from the midpoint of the round trip,
// known to half the trip. One round trip on a loaded machine can take tens
// of milliseconds, the stamps of every event read here (etcd's, ZooKeeper's)
// that far off the history's: TestRunZooKeeperFaults/zk-none's record had
// each release's delete 12 to 37 ms after the history's ok. It keeps the
// narrowest of several rounds, stopping early at one narrow enough.
func newHistoryClock(ctx context.Context, rdb *redis.Client, start time.Time) (*historyClock, error) {
	c := &historyClock{startNS: start.UnixNano(), rdb: rdb}
	ctx, cancel := context.WithTimeout(ctx, firstSampleWait)
	defer cancel()
	off, spread, err := narrowest(ctx, historyTrips, func(ctx context.Context) (int64, int64, error) {
		l0 := time.Now()
		h, err := rdb.Time(ctx).Result()
		l1 := time.Now()
		return h.UnixNano() - (l0.UnixNano()+l1.UnixNano())/2, l1.Sub(l0).Nanoseconds() / 2, err
	})
	if err != nil {
		return nil, err
	}
	c.localNS, c.spread = off, spread
	return c, nil
}

// historyTrips are newHistoryClock's: the narrowest of up to 20, one of
// 100 µs ending them, and so does 100 ms once three were taken (the
// first holds the dial; a loaded machine's are none narrow, and the run
// waits on this).
var historyTrips = trips{rounds: 20, least: 3, enough: 100 * time.Microsecond, budget: 100 * time.Millisecond}

// trips says how many measures of an offset narrowest takes: up to
// rounds; fewer when one's spread is within enough, or once budget has
// passed and least were taken (0: neither).
type trips struct {
	rounds, least  int
	enough, budget time.Duration
}

// narrowest takes measures of an offset as n says and keeps the one of
// the narrowest spread: the one least bent by a delay on the way. A
// measure that fails ends them; err is its error when none answered.
func narrowest(ctx context.Context, n trips, measure func(context.Context) (off, spread int64, err error)) (off, spread int64, err error) {
	spread = -1
	until := time.Now().Add(n.budget)
	for i := 0; i < n.rounds && (spread < 0 || spread > int64(n.enough)); i++ {
		if n.budget > 0 && i >= n.least && time.Now().After(until) {
			break
		}
		o, sp, merr := measure(ctx)
		if merr != nil {
			if spread < 0 {
				err = merr
			}
			break
		}
		if spread < 0 || sp < spread {
			off, spread = o, sp
		}
	}
	return off, spread, err
}

// now is the history's time now, unix ns, as this machine's clock says.
func (c *historyClock) now() int64 { return time.Now().UnixNano() + c.localNS }

// A nodeClock stamps one node's lines on the history's clock.
type nodeClock struct {
	own  bool                                     // the node's clock is not the history's
	node func(context.Context) (time.Time, error) // the node's clock now: its TIME
	hist *historyClock
	// steps are the steps the run makes of the node's clock (StepClock);
	// nil for none.
	steps *steps
	// off is the node's clock, less the run's steps of it, minus the
	// history's, ns, as last measured, known to spread; prev as measured
	// before, for the lines read after a step the run did not make that
	// ran before it (off itself when the two measures agree within their
	// spreads: no step between them), known to prevSpread.
	off, prev, spread int64
	prevSpread        int64
	// fake is the run's steps of the node's clock at the place in its
	// stream being read: the sum of the steps whose markers came. A
	// measure is of the clock now, and the stream may be read late; the
	// run's steps are counted where they fall in it.
	fake    int64
	sampled time.Time
}

// sampleTrips are a sample's measures: the narrowest of up to six, one
// within a millisecond ending them, and so does 20 ms once three were
// taken: on a loaded machine three may all be tens of ms wide.
var sampleTrips = trips{rounds: 6, least: 3, enough: time.Millisecond, budget: 20 * time.Millisecond}

// firstSample is sample, tried again for up to firstSampleWait: a run's
// start on a loaded machine may hold one round of TIMEs past
// sampleTimeout, and without a first offset there is no record.
func (c *nodeClock) firstSample(ctx context.Context) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, firstSampleWait)
	defer cancel()
	for {
		if off, spread, ok := c.sample(ctx); ok || ctx.Err() != nil {
			c.off, c.prev, c.spread, c.prevSpread = off, off, spread, spread
			return off, ok
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sample measures the node's offset, known to spread; ok is false when it
// could not.
func (c *nodeClock) sample(ctx context.Context) (off, spread int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
	defer cancel()
	fake0, steady := c.steps.now()
	if !steady {
		return 0, 0, false // a step under way: the measure could straddle it
	}
	best, spread, err := narrowest(ctx, sampleTrips, c.measure)
	if err != nil || !c.steady(fake0) {
		return 0, 0, false
	}
	best -= fake0 // the run's steps of the clock, as they stand now
	c.sampled = time.Now()
	// Any offset within the spread of the measure is as good as it: keep
	// the one the node had, if it is, known as well as it was or better;
	// else take a whole millisecond if one is (a clock the fault stepped
	// by whole milliseconds, on this machine, is off by exactly that),
	// else the measure. A node's first measure keeps 0 so (a node on
	// this machine, whose clock is the history's). An offset taken off
	// the measure's midpoint is known to the spread plus how far off it
	// lies: the true offset is within spread of the measure, and within
	// the old spread of the old offset.
	if d := abs(best - c.off); d <= spread {
		if c.spread == 0 { // not measured before
			return c.off, d + spread, true
		}
		return c.off, min(d+spread, c.spread), true
	}
	if ms := (best + sign(best)*int64(time.Millisecond)/2) / int64(time.Millisecond) * int64(time.Millisecond); abs(ms-best) <= spread {
		return ms, abs(ms-best) + spread, true
	}
	return best, spread, true
}

// adopt takes off, known to spread, as the node's offset. The one it had
// stays as prev, for the lines that ran before a step, only when the two
// disagree by more than both spreads: a measure on a loaded machine may be
// tens of ms wide, and kept as prev it would stamp every line read late
// that much later (pick takes the latest offset that fits), though the
// node's clock never moved.
func (c *nodeClock) adopt(off, spread int64) {
	if off == c.off {
		if c.prev == c.off {
			c.prevSpread = spread
		}
		c.spread = spread // the same offset, known as well as the measures knew it: prev stands
		return
	}
	if d := off - c.off; d > spread+c.spread || -d > spread+c.spread {
		c.prev, c.prevSpread = c.off, c.spread
	} else {
		c.prev, c.prevSpread = off, spread
	}
	c.off, c.spread = off, spread
}

// uncertainty is how far a stamp by the offsets now may be from when its
// line ran (ns): the wider of the two offsets' spreads, as a line may be
// stamped by either (pick); 0 for a node whose clock is the history's.
func (c *nodeClock) uncertainty() int64 {
	if !c.own {
		return 0
	}
	return max(c.spread, c.prevSpread)
}

func abs(n int64) int64 { return n * sign(n) }

func sign(n int64) int64 {
	if n < 0 {
		return -1
	}
	return 1
}

// measure takes the node's TIME between two of the run's Redis: the
// offset from their midpoint, and half their spread.
func (c *nodeClock) measure(ctx context.Context) (off, spread int64, err error) {
	t0, err := c.hist.rdb.Time(ctx).Result()
	if err != nil {
		return 0, 0, err
	}
	n, err := c.node(ctx)
	if err != nil {
		return 0, 0, err
	}
	t1, err := c.hist.rdb.Time(ctx).Result()
	if err != nil {
		return 0, 0, err
	}
	mid := (t0.UnixNano() + t1.UnixNano()) / 2
	// TIME counts microseconds: each reading is known to one.
	return n.UnixNano() - mid, (t1.UnixNano()-t0.UnixNano())/2 + int64(time.Microsecond), nil
}

// stamp returns the history's time (unix ns) of a line stamped us on the
// node's clock, read now.
func (c *nodeClock) stamp(ctx context.Context, us int64) int64 {
	ns := us * 1000
	if !c.own {
		return ns
	}
	arrived := c.hist.now()
	h := c.pick(ns, arrived)
	since := time.Since(c.sampled)
	agrees := h >= arrived-int64(stepTolerance) && h <= arrived+int64(aheadTolerance)
	if agrees && since < resampleEvery || !agrees && since < resampleAtMost {
		return h
	}
	if off, spread, ok := c.sample(ctx); ok {
		c.adopt(off, spread)
	}
	return c.pick(ns, arrived)
}

// steady reports whether the run's steps stand as they did before a
// measure, at fake0: none began or ended during it.
func (c *nodeClock) steady(fake0 int64) bool {
	fake, steady := c.steps.now()
	return steady && fake == fake0
}

// pick stamps a line of node time ns that arrived at arrived (history
// ns) by whichever offset puts it latest before it arrived: the one it
// ran under.
func (c *nodeClock) pick(ns, arrived int64) int64 {
	a, b := ns-c.off-c.fake, ns-c.prev-c.fake
	limit := arrived + int64(aheadTolerance)
	switch {
	case a <= limit && b <= limit:
		return max(a, b)
	case a <= limit:
		return a
	case b <= limit:
		return b
	}
	return min(a, b)
}

// at converts a time on the node's clock (unix ns) to the history's by the
// offset now.
func (c *nodeClock) at(ns int64) int64 {
	if !c.own {
		return ns
	}
	return ns - c.off - c.fake
}
