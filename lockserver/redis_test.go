package lockserver

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/redis/go-redis/v9"
)

// startRedis starts a throwaway redis-server for the test.
func startRedis(t *testing.T, opt servers.RedisOptions) *servers.Server {
	t.Helper()
	s, err := servers.StartRedisWith(context.Background(), opt)
	if err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

// named returns a client of url whose connections say name.
func named(t *testing.T, url, name string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries, opt.ClientName = -1, name
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// An attempt is one SET NX of a contender, and what the server told it;
// rtt is how long the client waited for the answer, which bounds how far
// the server's run of the command lies from MONITOR's stamp of it.
type attempt struct {
	token   string
	granted bool
	rtt     time.Duration
}

// release is the reference lock's compare-and-delete.
var releaseScript = redis.NewScript(`
local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then
  redis.call("DEL", KEYS[1])
  return 1
end
return 0`)

// contend has workers race for key on url until the time is up: each
// SET NX PX lease with a token of its own an attempt, and once granted
// holds the key for a random while — past its lease, now and then — and
// releases it by compare-and-delete, or leaves it to expire. It returns
// every attempt and what the server answered it.
func contend(t *testing.T, url, key string, workers int, lease, d time.Duration) []attempt {
	t.Helper()
	var mu sync.Mutex
	var out []attempt
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for w := range workers {
		c := named(t, url, history.WorkerName(history.Process(w), workers))
		r := rand.New(rand.NewSource(int64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for n := 0; time.Now().Before(stop); n++ {
				tok := fmt.Sprintf("w%d-%d", w, n)
				sent := time.Now()
				ok, err := c.SetNX(ctx, key, tok, lease).Result()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				out = append(out, attempt{tok, ok, time.Since(sent)})
				mu.Unlock()
				if !ok {
					time.Sleep(time.Duration(r.Intn(3000)) * time.Microsecond)
					continue
				}
				time.Sleep(time.Duration(r.Int63n(int64(lease) * 3 / 2)))
				if r.Intn(4) > 0 {
					releaseScript.Run(ctx, c, []string{key}, tok)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// record runs fn under a Recorder of the lock key on the nodes, in mode,
// and returns the record it wrote and its start (unix ns).
func record(t *testing.T, mode Mode, clockURL string, nodes []RedisNode, key, fence string, fn func()) ([]history.ServerEvent, int64) {
	t.Helper()
	run := store.Run{Dir: t.TempDir()}
	ctx := context.Background()
	rdb := named(t, clockURL, "test")
	start, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Start(ctx, run, Config{Mode: mode, Start: start, ClockURL: clockURL, Key: key, FenceKey: fence, Redis: nodes,
		Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	fn()
	if err := rec.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := history.ReadServerFile(run.Path(store.LockServer))
	if err != nil {
		t.Fatal(err)
	}
	return evs, start.UnixNano()
}

// commandToken is the token a SET names in its :command.
func commandToken(cmd string) string {
	f := strings.Fields(cmd)
	if len(f) >= 3 && f[0] == "SET" {
		return f[2]
	}
	return ""
}

// TestVerdictsAgree: across a contended run on a real redis-server —
// releases, lapsed leases, SET NX attempts on the heels of expiries — the
// record's verdict on every SET NX (:grant or :refuse, found by the
// attempt's own token in its :command) is what the server told the client.
// With the server's notifications (full) they agree every time. From the
// commands alone they agree but where the line's stamp cannot tell: Redis
// counts a deadline from a command's start and MONITOR stamps the line
// after it ran, so a command whose run straddles the key's expiry, or a
// grant whose run straddles a millisecond, may be read either way; within
// the command's time from start to stamp of those instants, and nowhere
// else: feedDelay on a quiet machine, and under load no more than the
// attempt's own round trip (the server runs the command and stamps its
// line between reading the request and answering it).
func TestVerdictsAgree(t *testing.T) {
	for _, mode := range []Mode{ModeFull, ModeCommands} {
		t.Run(string(mode), func(t *testing.T) {
			s := startRedis(t, servers.RedisOptions{})
			const key, lease = "hiatus:lock:verdicts", 20 * time.Millisecond
			var attempts []attempt
			evs, start := record(t, mode, s.URL, []RedisNode{{Name: "redis-0", URL: s.URL}}, key, "", func() {
				attempts = contend(t, s.URL, key, 4, lease, 1500*time.Millisecond)
			})
			checkVerdicts(t, mode, start, lease, attempts, evs)
		})
	}
}

// feedDelay is the time from a command's start, when Redis reads its
// clock for the command's expiries, to MONITOR's stamp of its line, on a
// quiet machine; an attempt's round trip bounds it on any.
const feedDelay = 300 * time.Microsecond

// A grantSpan is a grant's time and deadline, on the history's clock,
// and its attempt's round trip: how late its line may be stamped after
// the instant its deadline counts from.
type grantSpan struct {
	at, deadline int64
	feed         time.Duration
}

// checkVerdicts compares each attempt's answer with the record's verdict;
// start is the record's start, unix ns. With notifications, the record
// also holds one key at a time: each grant after the first comes after
// the end of the key before it, as the server's own SET NX made it. From
// the commands alone, a verdict the stamps cannot tell is a guess, and so
// is the key the record then holds, for as long as that key's lease: a
// guessed grant the server refused holds the key in the record while the
// server grants it to another.
func checkVerdicts(t *testing.T, mode Mode, start int64, lease time.Duration, attempts []attempt, evs []history.ServerEvent) {
	t.Helper()
	byToken := map[string]attempt{}
	for _, a := range attempts {
		byToken[a.token] = a
	}
	verdict := map[string]history.ServerEvent{}
	var grants []grantSpan
	expired, live := 0, false
	for _, e := range evs {
		switch e.Act {
		case history.SGrant:
			if live && mode == ModeFull {
				t.Errorf("the record's grant at %d (%s) comes while the key before it still held: %v", e.Time, e.Command, evs)
			}
			live = true
			verdict[commandToken(e.Command)] = e
			grants = append(grants, grantSpan{e.Time, e.Deadline, max(feedDelay, byToken[commandToken(e.Command)].rtt)})
		case history.SRefuse:
			verdict[commandToken(e.Command)] = e
		case history.SExpire:
			expired++
			live = false
		case history.SDelete:
			live = false
		}
	}
	type disagreement struct {
		a attempt
		e history.ServerEvent
	}
	var differ []disagreement
	granted := 0
	for _, a := range attempts {
		e, ok := verdict[a.token]
		if !ok {
			t.Errorf("attempt %s (granted %v): no verdict in the record", a.token, a.granted)
			continue
		}
		if a.granted {
			granted++
		}
		if (e.Act == history.SGrant) != a.granted {
			differ = append(differ, disagreement{a, e})
		}
	}
	slices.SortFunc(differ, func(x, y disagreement) int { return cmp.Compare(x.e.Time, y.e.Time) })
	unreadable, guessUntil := 0, int64(-1)
	for _, d := range differ {
		a, e := d.a, d.e
		if mode != ModeCommands || e.Time > guessUntil && !unreadableAt(e.Time, start, grants, max(feedDelay, a.rtt)) {
			t.Errorf("attempt %s: the server told the client granted=%v, the record says %s at %d", a.token, a.granted, e.Act, e.Time)
			continue
		}
		// The key one side holds from here and the other does not is a
		// guess until its deadline: the record's grant's, or the
		// server's for this attempt.
		unreadable++
		until := e.Time + int64(lease)
		if e.Act == history.SGrant {
			until = e.Deadline
		}
		guessUntil = max(guessUntil, until+int64(time.Millisecond))
	}
	if unreadable*2 > granted {
		t.Errorf("%d verdicts read the other way beside %d grants: more than the stamps' doubt explains", unreadable, granted)
	}
	t.Logf("%d attempts, %d granted, %d expiries; %d disagreements where the stamps cannot tell", len(attempts), granted, expired, unreadable)
	if granted < 10 || expired < 3 || granted == len(attempts) {
		t.Errorf("a run of %d attempts, %d granted, %d expiries contends too little to tell", len(attempts), granted, expired)
	}
}

// unreadableAt reports whether a command stamped at (history ns; start
// the history's 0, unix ns) lies where MONITOR's stamps cannot tell its
// verdict: within feed after a key's expiry, or in the millisecond before
// it when the grant's own run may have straddled one (its stamp less its
// feed): the record counts the deadline from the line's millisecond, Redis
// from the command's.
func unreadableAt(at, start int64, grants []grantSpan, feed time.Duration) bool {
	ms, fd := int64(time.Millisecond), int64(feed)
	for _, g := range grants {
		d := at - g.deadline
		stamp := start + g.at
		// The server runs a SET in microseconds: its round trip bounds
		// how far, and a millisecond the deadline.
		straddled := min(stamp/ms-(stamp-int64(g.feed))/ms, 1)
		if d >= 0 && d < fd || d < 0 && d >= -straddled*ms {
			return true
		}
	}
	return false
}
