package client

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A fakeServer answers TIME with the bubble's clock, as a server on this
// machine would, each answer as its step says: the time the request takes
// to reach it and the answer to come back, or a stall (the server paused:
// the call waits out its deadline), or a freeze of the asking process
// past the call's deadline (the call then fails, long after it began).
type fakeServer struct {
	steps []step
	calls int
}

type step struct {
	there, back time.Duration // the request's way to the server, the answer's back
	stall       bool          // the server does not answer
	frozen      time.Duration // the asking process is stopped this long mid-call
}

func (f *fakeServer) read(ctx context.Context) (time.Time, error) {
	s := f.steps[f.calls]
	f.calls++
	switch {
	case s.stall:
		<-ctx.Done()
		return time.Time{}, ctx.Err()
	case s.frozen > 0:
		time.Sleep(s.frozen)
		return time.Time{}, context.DeadlineExceeded
	}
	time.Sleep(s.there)
	t := time.Now()
	time.Sleep(s.back)
	return t, nil
}

// TestRedisClockStamps: a reading frozen with its process past its wait is
// made again, not taken for a server that stopped answering; a server that
// stops answering is not asked again for timeWait, its stamps carried
// forward from the last reading's answer: early by its way back, never
// late.
func TestRedisClockStamps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
		// after each Now, the wait before the next; the stamps' errors
		// from the server's clock at their call's end, and the readings
		// made, are checked.
		waits  []time.Duration
		errors []time.Duration
		calls  int
	}{
		// Taken for a stalled server, the frozen reading would leave the
		// third stamp unread (3 readings, not 4).
		{"frozen mid-reading, read again", []step{{}, {frozen: 300 * time.Millisecond}, {}, {}},
			[]time.Duration{0, 0, 0}, []time.Duration{0, 0, 0}, 4},
		{"a stalled server carried forward", []step{{there: 10 * time.Millisecond, back: 10 * time.Millisecond}, {stall: true}, {}},
			[]time.Duration{0, 50 * time.Millisecond, timeWait, 0}, []time.Duration{-10 * time.Millisecond, -10 * time.Millisecond, -10 * time.Millisecond, 0}, 3},
		// An answer across a pause stamps its op (the server's clock when
		// it read it), and is no basis: the stall after it is carried from
		// the reading before.
		{"a slow answer is no basis", []step{{}, {there: 5 * time.Millisecond, back: 300 * time.Millisecond}, {stall: true}},
			[]time.Duration{0, 0, 0}, []time.Duration{0, -300 * time.Millisecond, 0}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeServer{steps: tc.steps}
				c := &RedisClock{read: f.read, start: time.Now()}
				for i, wait := range tc.waits {
					got := c.Now(context.Background())
					if want := time.Since(c.start) + tc.errors[i]; time.Duration(got) != want {
						t.Errorf("stamp %d: %v, want %v (%v from the server's clock)", i, time.Duration(got), want, tc.errors[i])
					}
					time.Sleep(wait)
				}
				if f.calls != tc.calls {
					t.Errorf("%d readings, want %d", f.calls, tc.calls)
				}
			})
		})
	}
}
