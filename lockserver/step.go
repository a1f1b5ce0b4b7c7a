package lockserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A clock the run steps itself (the clock fault, through StepClock) is
// stamped exactly, whatever the lag of the stream: the recorder has the
// node log a marker before the step and another after it, and knows the
// step's size. Lines before the first marker ran before the step, lines
// after the second after it, each stamped by its own offset; the few
// between, which the recorder holds until the second marker comes, are
// stamped by whichever offset puts them between the two markers' stamps:
// for a step longer than the markers' window (a round trip and the clock
// file's write), only one does.

// StepClock steps the clock of the record's Redis node index, by calling
// step, which sets the node's clock to the real one plus offset (0 puts it
// back), and tells the node's record so. step runs whatever becomes of the
// markers: a record that cannot mark it falls back on its measures.
func (r *Recorder) StepClock(ctx context.Context, index int, offset time.Duration, step func() error) error {
	if r == nil || index < 0 || index >= len(r.redis) || !r.redis[index].node.OwnClock {
		return step()
	}
	s := r.redis[index]
	// Each marker has a measure's bound of its own: the step between them
	// (over SSH, a session that writes the node's clock file) may take
	// longer than a bound under load, and a bound shared with it left the
	// second marker unsent ("context deadline exceeded").
	mark := func(m string) error {
		if r.cfg.dropMark != nil && r.cfg.dropMark(m) {
			return context.DeadlineExceeded
		}
		ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
		defer cancel()
		return s.side.Echo(ctx, m).Err()
	}
	st := s.steps.begin()
	if err := mark(st.before); err != nil {
		s.steps.abandon(st)
		return step()
	}
	err := step()
	if err != nil {
		s.steps.abandon(st)
		return err
	}
	s.steps.stepped(st, offset)
	// The second marker need only come after the step: it is tried again,
	// since the lines held until it comes are stamped exactly, and those
	// read after it is given up are not (a line that ran before the step
	// and is read after takes the new offset).
	for try := 0; try < markTries; try++ {
		if err = mark(st.after); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		// The lines held since the first marker go now, and the record
		// goes on under the new offset: held for a marker that does not
		// come, a grant after it never reached the record.
		s.steps.unsent(st)
		s.rec.logf("%s: mark the end of a clock step: %v (the lines held since its first marker go under the step's offset; one that ran before the step and is read after takes it too)", s.node.Name, err)
	}
	return nil
}

// markTries is how many times a step's second marker is sent before it
// is given up, each within sampleTimeout.
const markTries = 3

// A step is one step of a node's clock, as its markers show it.
type step struct {
	before, after string
	by            int64 // the step's size: the new fake offset less the old, ns
	done          bool  // the step was made, by by
	unsent        bool  // made, but its second marker was not sent
}

// steps are a node's clock steps under way, and its fake offset now.
type steps struct {
	mu      sync.Mutex
	fake    int64   // the offset the run gave the node's clock, ns
	pending []*step // the steps whose second marker the reader has not met
	under   int     // steps begun and not yet made or abandoned
	n       int
}

// now returns the offset the run has given the node's clock, and whether
// no step is under way; a nil steps has given none.
func (ss *steps) now() (fake int64, steady bool) {
	if ss == nil {
		return 0, true
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.fake, ss.under == 0
}

func (ss *steps) begin() *step {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.n++
	st := &step{before: marker(fmt.Sprintf("step%d", ss.n)), after: marker(fmt.Sprintf("stepped%d", ss.n))}
	ss.pending = append(ss.pending, st)
	ss.under++
	return st
}

func (ss *steps) stepped(st *step, offset time.Duration) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st.by, st.done, ss.fake = int64(offset)-ss.fake, true, int64(offset)
	ss.under--
}

func (ss *steps) abandon(st *step) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.under--
	for i, s := range ss.pending {
		if s == st {
			ss.pending = append(ss.pending[:i], ss.pending[i+1:]...)
		}
	}
}

// unsent says st's second marker will not come, though st was made.
func (ss *steps) unsent(st *step) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st.unsent = true
}

// marked returns the step whose marker is word, and whether word is its
// first marker.
func (ss *steps) marked(word string) (st *step, first bool, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for i, s := range ss.pending {
		switch word {
		case s.before:
			return s, true, true
		case s.after:
			ss.pending = append(ss.pending[:i], ss.pending[i+1:]...)
			return s, false, true
		}
	}
	return nil, false, false
}

// An item is what the stream brought, held while a step's markers frame
// it: a line, or a push (a notification).
type item struct {
	line monitorLine
	push *respValue
}

// maxHeld bounds the items held between a step's markers: past it they
// are taken as they come.
const maxHeld = 10_000

// gone reports whether st's second marker will not come: st was
// abandoned, or made with that marker unsent (then it is pending no
// more); by is what the step moved the node's clock by (0 for one
// abandoned). Only the reader holding st asks.
func (ss *steps) gone(st *step) (gone bool, by int64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for i, s := range ss.pending {
		if s == st {
			if !st.unsent {
				return false, 0
			}
			// Its marker, should it come late, is an echo like any other.
			ss.pending = append(ss.pending[:i], ss.pending[i+1:]...)
			return true, st.by
		}
	}
	return true, 0
}

// stepMarker reports whether l is a marker of a clock step, which ends
// the holding of the items between two.
func (s *redisSource) stepMarker(l monitorLine) bool {
	return len(l.args) == 2 && strings.EqualFold(l.args[0], "echo") && l.db == s.opt.DB &&
		(s.holding.after == l.args[1] || s.holding.before == l.args[1])
}

// stepMarked takes a clock step's marker: at the first, the items after it
// are held; at the second, the node's offset is moved by the step, and the
// items held are stamped between the two markers.
func (s *redisSource) stepMarked(ctx context.Context, st *step, first bool) bool {
	if first {
		s.holding, s.stepB, s.stepFake = st, s.lineH, s.clock.fake
		return false
	}
	if st.done {
		// The marker ran under the new offset: the steps before it and
		// this one.
		s.clock.fake = s.stepFake + st.by
		s.lineH = s.clock.at(s.lineUS * 1000)
	}
	return s.release(ctx, s.stepB, s.lineH)
}

// hold keeps an item the stream brought between a step's markers; a step
// abandoned, or too many items, lets them go as they come.
func (s *redisSource) hold(ctx context.Context, it item) bool {
	s.held = append(s.held, it)
	gone, by := s.steps.gone(s.holding)
	if gone {
		// What follows ran under the step's offset, as after its marker.
		s.clock.fake = s.stepFake + by
	}
	if gone || len(s.held) >= maxHeld {
		return s.release(ctx, s.stepB, s.rec.hist.now())
	}
	return false
}

// release takes the items held, each line stamped between from and to
// (history unix ns) by the offset before the step or after it; it reports
// true when one was the end marker's.
func (s *redisSource) release(ctx context.Context, from, to int64) bool {
	held := s.held
	s.held, s.holding = nil, nil
	end := false
	for _, it := range held {
		if it.push != nil {
			s.push(*it.push)
			continue
		}
		if it.line.db != s.opt.DB {
			continue
		}
		a, b := it.line.us*1000-s.clock.off-s.stepFake, it.line.us*1000-s.clock.off-s.clock.fake
		h := b
		if (b < from || b > to) && a >= from && a <= to {
			h = a
		}
		end = s.stamped(ctx, it.line, h) || end
	}
	return end
}
