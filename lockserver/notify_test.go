package lockserver

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/redis/go-redis/v9"
)

// TestNotifyShared: two recorders of one server, one ending while the
// other records. The keyspace notifications stay on for the one still
// recording, whose record then has a grant for every SET NX the server
// granted (without them it reads the grants as refusals); the last to end
// puts back the server's own setting and leaves no key of its own.
func TestNotifyShared(t *testing.T) {
	s := startRedis(t, servers.RedisOptions{})
	ctx := context.Background()
	rdb := named(t, s.URL, "test")
	const own = "Ex" // the server's setting before any recorder
	if err := rdb.ConfigSet(ctx, "notify-keyspace-events", own).Err(); err != nil {
		t.Fatal(err)
	}
	start, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	begin := func(key string) (*Recorder, store.Run) {
		run := store.Run{Dir: t.TempDir()}
		rec, err := Start(ctx, run, Config{Mode: ModeFull, Start: start, ClockURL: s.URL, Key: key,
			Redis: []RedisNode{{Name: "redis-0", URL: s.URL}}, Log: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		return rec, run
	}
	a, _ := begin("hiatus:lock:a")
	b, bRun := begin("hiatus:lock:b")
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := notifySetting(t, rdb); !sameFlags(got, withRecordEvents(own)) {
		t.Errorf("with one recorder still recording, notify-keyspace-events is %q, want %q", got, withRecordEvents(own))
	}
	w := named(t, s.URL, history.WorkerName(0, 1))
	const grants = 5
	for i := range grants {
		if ok, err := w.SetNX(ctx, "hiatus:lock:b", i, time.Minute).Result(); err != nil || !ok {
			t.Fatalf("SET NX %d: %v %v", i, ok, err)
		}
		if err := w.Del(ctx, "hiatus:lock:b").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := history.ReadServerFile(bRun.Path(store.LockServer))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Act == history.SGrant {
			n++
		}
	}
	if n != grants {
		t.Errorf("the record of the recorder left has %d grants of the %d made after the other ended: %v", n, grants, evs)
	}
	if got := notifySetting(t, rdb); !sameFlags(got, own) {
		t.Errorf("after the last recorder, notify-keyspace-events is %q, want the server's own %q", got, own)
	}
	if live, err := liveRecorders(ctx, rdb); err != nil || len(live) > 0 {
		t.Errorf("the recorders left their registry's connections: %v %v", live, err)
	}
}

// notifySetting is the server's notify-keyspace-events.
func notifySetting(t *testing.T, c *redis.Client) string {
	t.Helper()
	cur, err := c.ConfigGet(context.Background(), "notify-keyspace-events").Result()
	if err != nil {
		t.Fatal(err)
	}
	return cur["notify-keyspace-events"]
}

// sameFlags says two notify-keyspace-events settings name the same
// classes: the server writes them in an order of its own.
func sameFlags(a, b string) bool {
	x, y := []rune(a), []rune(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestExpiryStampedAtDeadline: a key left to expire, with nothing on it
// after its SET but the stream's other commands (which the record does not
// parse), expires at its deadline in the record, not at its SET: the
// notification of the expiry was stamped by the last line parsed.
func TestExpiryStampedAtDeadline(t *testing.T) {
	s := startRedis(t, servers.RedisOptions{})
	const key, lease = "hiatus:lock:expiry", 200 * time.Millisecond
	w := named(t, s.URL, history.WorkerName(0, 1))
	other := named(t, s.URL, "other")
	ctx := context.Background()
	evs, _ := record(t, ModeFull, s.URL, []RedisNode{{Name: "redis-0", URL: s.URL}}, key, "", func() {
		if ok, err := w.SetNX(ctx, key, "a", lease).Result(); err != nil || !ok {
			t.Fatalf("SET NX: %v %v", ok, err)
		}
		// Other commands while the key lives and after: lines the
		// record reads past, and the server's expiry cycle finds the key.
		for deadline := time.Now().Add(3 * lease); time.Now().Before(deadline); {
			if err := other.Time(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if n, err := w.Exists(ctx, "hiatus:unrelated").Result(); err != nil || n != 0 {
				t.Fatal(n, err)
			}
		}
	})
	var grant, expire *history.ServerEvent
	for i, e := range evs {
		switch e.Act {
		case history.SGrant:
			grant = &evs[i]
		case history.SExpire:
			expire = &evs[i]
		}
	}
	if grant == nil || expire == nil {
		t.Fatalf("no grant and expiry in the record: %v", evs)
	}
	if d := time.Duration(expire.Time - grant.Time); d < lease-time.Millisecond {
		t.Errorf("the key expired %v after its grant in the record, want its lease, %v: %v", d, lease, evs)
	}
}

// TestExpiryBeforeItsTaker: the stream of a SET NX whose run straddled a
// millisecond — Redis counted its deadline from 1000998 ms, its MONITOR
// line says 1000999.990 — then the SET NX that found the key expired in
// the deadline's next millisecond, 1001099, its expiry's notification
// just before its line (Redis 7 feeds MONITOR after a command runs). The
// record's deadline, read from the line, is a millisecond late; the expiry
// is still in the record no later than the grant that took the key, not
// at 1001100 ms, after it: a grant while the key held the lock, as
// TestRunNetworkFaults/partition-postgres-fence-rmw once showed. No server
// can be made to straddle on demand: the stream is written as one sends it.
func TestExpiryBeforeItsTaker(t *testing.T) {
	const key = "hiatus:lock:taker"
	ops := make(chan history.Op, 16)
	r := &Recorder{cfg: Config{Mode: ModeFull, Key: key}, hist: &historyClock{startNS: 1000_000_000_000}, ops: ops}
	s := &redisSource{rec: r, names: map[string]string{"a:1": "worker-0", "b:1": "worker-1"},
		asked: map[string]bool{"a:1": true, "b:1": true}, synced: true}
	s.m = model{lock: key, notify: true, emit: s.emit}
	ctx := context.Background()
	notice := func(what string) {
		s.push(respValue{kind: '>', elems: []respValue{{str: "message"}, {str: "__keyspace@0__:" + key}, {str: what}}})
	}
	set := func(us int64, addr, token string) {
		notice("set")
		notice("expire")
		s.stamped(ctx, monitorLine{us: us, addr: addr, args: []string{"SET", key, token, "NX", "PX", "100"}}, us*1000)
	}
	set(1000_999_990, "a:1", "a")
	notice("expired")
	set(1001_099_500, "b:1", "b")
	close(ops)
	var got []history.Op
	for o := range ops {
		got = append(got, o)
	}
	slices.SortStableFunc(got, func(a, b history.Op) int { return cmp.Compare(a.Time, b.Time) })
	var acts []history.Keyword
	for _, o := range got {
		acts = append(acts, o.F)
	}
	if want := []history.Keyword{history.SGrant, history.SExpire, history.SGrant}; !slices.Equal(acts, want) {
		t.Errorf("the record, by time: %v, want %v: %v", acts, want, got)
	}
}
