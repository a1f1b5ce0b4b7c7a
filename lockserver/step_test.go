package lockserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/store"
)

// A stampedAttempt is a SET NX and the history's clock around it.
type stampedAttempt struct {
	token  string
	t0, t1 int64 // the run's Redis TIME before and after, unix ns
}

// TestStepsStamped: a node whose clock the run steps back and forth by
// 300 ms every 20 ms (StepClock, as the clock fault steps it) has every SET
// NX of three contenders stamped inside the window the history's clock
// puts around it: the steps move the node's offset by what they are, and
// the lines between a step's markers take the offset they ran under. The
// recorder reads late, 400 ms three times, longer than a step: the lines'
// arrival cannot tell which side of a step they ran on, the markers can.
func TestStepsStamped(t *testing.T) {
	run, start, attempts, steps := contendStepped(t, nil)
	checkStamps(t, run, start, attempts, steps)
}

// TestStepsUnmarked: a clock step whose second marker is never sent (the
// node did not answer it in time, as over SSH under load) lets the lines
// held since its first go: every attempt of the contenders has its
// verdict in the record. Held for a marker that did not come, a grant was
// missing from the record and its end marker never read.
func TestStepsUnmarked(t *testing.T) {
	dropped := 0
	run, _, attempts, steps := contendStepped(t, func(m string) bool {
		if strings.HasPrefix(m, "hiatus-record-stepped") {
			dropped++
			return true
		}
		return false
	})
	at, stepped := verdicts(t, run)
	if stepped == 0 {
		t.Error("no event stamped under a stepped clock: the offset did not move by the steps whose second marker was not sent")
	}
	for _, a := range attempts {
		if _, ok := at[a.token]; !ok {
			t.Errorf("attempt %s: no verdict in the record", a.token)
		}
	}
	t.Logf("%d attempts, %d steps, %d sends of a second marker dropped, %d events on the stepped clock", len(attempts), steps, dropped, stepped)
	if steps < 10 || dropped < markTries*steps {
		t.Errorf("%d steps, %d sends of a second marker dropped: too few to tell", steps, dropped)
	}
}

// contendStepped has three contenders take and release a lock on a node
// for a second, while the run steps its clock back and forth by 300 ms
// every 20 ms and the recorder reads late; dropMark, when set, is the
// recorder's. It returns the record's run, the history's start (unix ns),
// the attempts and the number of steps.
func contendStepped(t *testing.T, dropMark func(string) bool) (store.Run, int64, []stampedAttempt, int) {
	t.Helper()
	clockSrv := startRedis(t, servers.RedisOptions{})
	node := startRedis(t, servers.RedisOptions{FakeClock: true})
	ctx := context.Background()
	clock := named(t, clockSrv.URL, "test")
	start, err := clock.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	run := store.Run{Dir: t.TempDir()}
	const key = "hiatus:lock:steps"
	reads := 0
	late := func() { // the reader's own goroutine alone calls it
		if reads++; reads%2000 == 0 && reads <= 6000 {
			time.Sleep(400 * time.Millisecond)
		}
	}
	rec, err := Start(ctx, run, Config{Mode: ModeFull, Start: start, ClockURL: clockSrv.URL, Key: key,
		Redis: []RedisNode{{Name: "redis-0", URL: node.URL, OwnClock: true}}, Log: t.Logf, readHook: late, dropMark: dropMark})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []stampedAttempt
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for w := range 3 {
		c := named(t, node.URL, fmt.Sprintf("worker-%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(stop); n++ {
				tok := fmt.Sprintf("w%d-%d", w, n)
				t0, err := clock.Time(ctx).Result()
				if err != nil {
					t.Error(err)
					return
				}
				ok, err := c.SetNX(ctx, key, tok, 30*time.Millisecond).Result()
				t1, err2 := clock.Time(ctx).Result()
				if err != nil || err2 != nil {
					t.Error(err, err2)
					return
				}
				mu.Lock()
				attempts = append(attempts, stampedAttempt{tok, t0.UnixNano(), t1.UnixNano()})
				mu.Unlock()
				if ok {
					releaseScript.Run(ctx, c, []string{key}, tok)
				}
			}
		}()
	}
	steps := 0
	for i := 0; time.Now().Before(stop); i++ {
		off := time.Duration(i%2) * 300 * time.Millisecond
		if err := rec.StepClock(ctx, 0, 300*time.Millisecond-off, func() error { return node.JumpClock(300*time.Millisecond - off) }); err != nil {
			t.Fatal(err)
		}
		steps++
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	if err := rec.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return run, start.UnixNano(), attempts, steps
}

// checkStamps holds each attempt's verdict in the record to its window.
func checkStamps(t *testing.T, run store.Run, start int64, attempts []stampedAttempt, steps int) {
	t.Helper()
	at, stepped := verdicts(t, run)
	for _, a := range attempts {
		e, ok := at[a.token]
		if !ok {
			t.Errorf("attempt %s: no verdict in the record", a.token)
			continue
		}
		if e.Time < a.t0-start || e.Time > a.t1-start {
			t.Errorf("attempt %s, from %d to %d: stamped %d (node time %d)", a.token, a.t0-start, a.t1-start, e.Time, e.NodeTime)
		}
	}
	t.Logf("%d attempts, %d steps, %d events on the stepped clock", len(attempts), steps, stepped)
	if stepped == 0 || steps < 10 {
		t.Errorf("%d steps, %d events stamped on a stepped clock: the test stepped too little to tell", steps, stepped)
	}
}

// verdicts reads the record of run: each SET NX's verdict by its token,
// and how many events were stamped under a step of the node's clock (300
// ms: the offset moved by it).
func verdicts(t *testing.T, run store.Run) (map[string]history.ServerEvent, int) {
	t.Helper()
	evs, err := history.ReadServerFile(run.Path(store.LockServer))
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]history.ServerEvent{}
	stepped := 0
	for _, e := range evs {
		if e.Act == history.SGrant || e.Act == history.SRefuse {
			at[commandToken(e.Command)] = e
		}
		if e.NodeTime-e.Time > int64(250*time.Millisecond) {
			stepped++
		}
	}
	return at, stepped
}

// TestOpNeverBeforeStart: an event stamped before the run began (by a
// stamp's error) is written at the start, not at a negative :time, which
// would make the whole journal unreadable.
func TestOpNeverBeforeStart(t *testing.T) {
	r := &Recorder{hist: &historyClock{startNS: 1_000_000_000}}
	for _, tc := range []struct{ h, want int64 }{
		{h: 991_268_000, want: 0},
		{h: 1_000_000_000, want: 0},
		{h: 1_000_000_001, want: 1},
	} {
		if got := r.op(0, tc.h, event{act: history.SGrant}).Time; got != tc.want {
			t.Errorf("stamped %d ns: :time %d, want %d", tc.h, got, tc.want)
		}
	}
}
