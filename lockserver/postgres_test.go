package lockserver

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/jackc/pgx/v5"
)

// TestPostgresRecord: on a real PostgreSQL, the advisory lock's calls as
// the lock makes them (SELECT pg_try_advisory_lock($1), unchanged), in
// sessions whose search_path the record's functions come first in, read as
// the server's acts, by backend PID and worker: a grant, a refusal naming
// the holder's backend, the holder's unlock, a re-entered lock that takes
// two unlocks, an unlock of a lock not held (nothing), and a session's end
// that freed the lock for the next grant.
func TestPostgresRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := servers.StartPostgres(ctx)
	if err != nil {
		t.Fatalf("PostgreSQL: %v", err)
	}
	t.Cleanup(func() { pg.Stop() })
	rs := startRedis(t, servers.RedisOptions{})
	const key = int64(4242)
	session := func(worker string) (*pgx.Conn, int32) {
		cfg, err := pgx.ParseConfig(pg.URL)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range SessionParams(worker) {
			cfg.RuntimeParams[k] = v
		}
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c, int32(c.PgConn().PID())
	}
	call := func(c *pgx.Conn, sql string, want bool) {
		t.Helper()
		var ok bool
		if err := c.QueryRow(ctx, sql, key).Scan(&ok); err != nil || ok != want {
			t.Fatalf("%s: %v, %v; want %v", sql, ok, err, want)
		}
	}
	const lock, unlock = `SELECT pg_try_advisory_lock($1)`, `SELECT pg_advisory_unlock($1)`
	var a, b int32
	var between time.Time // after B's first unlock of two, before its second
	clock := named(t, rs.URL, "test")
	evs, start := recordPostgres(t, rs.URL, PostgresNode{Name: "postgres", URL: pg.URL, Key: key}, func() {
		var ca, cb *pgx.Conn
		ca, a = session("worker-0")
		cb, b = session("worker-1")
		call(ca, lock, true)
		call(cb, lock, false)
		call(ca, unlock, true)
		call(cb, lock, true)
		call(cb, lock, true) // re-entered
		call(cb, unlock, true)
		call(ca, unlock, false) // not held: nothing
		if between, err = clock.Time(ctx).Result(); err != nil {
			t.Fatal(err)
		}
		call(cb, unlock, true)
		call(ca, lock, true)
		ca.Close(ctx) // its session's end frees it, once its backend has gone
		for {
			var n int
			if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, a).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		call(cb, lock, true)
	})
	type act struct {
		act           history.Keyword
		token, client string
	}
	var got []act
	for _, e := range evs {
		got = append(got, act{e.Act, e.Token, e.Client})
	}
	pa, pb := fmt.Sprintf("pid %d", a), fmt.Sprintf("pid %d", b)
	want := []act{
		{history.SGrant, pa, "worker-0"}, {history.SRefuse, pa, "worker-1"}, {history.SDelete, pa, "worker-0"},
		{history.SGrant, pb, "worker-1"}, {history.SDelete, pb, "worker-1"},
		{history.SGrant, pa, "worker-0"}, {history.SGrant, pb, "worker-1"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the record:\n%+v\nwant\n%+v", got, want)
	}
	if at := evs[4].Time; at < between.UnixNano()-start {
		t.Errorf("B's lock, taken twice, freed at %d, before its second unlock (after %d)", at, between.UnixNano()-start)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Time < evs[i-1].Time {
			t.Errorf("event %d at %d before event %d at %d", i, evs[i].Time, i-1, evs[i-1].Time)
		}
	}
}

// recordPostgres runs fn under a Recorder of the PostgreSQL node n, the
// history's clock the Redis at clockURL, and returns the record and its
// start (unix ns).
func recordPostgres(t *testing.T, clockURL string, n PostgresNode, fn func()) ([]history.ServerEvent, int64) {
	t.Helper()
	return recordWith(t, clockURL, Config{Mode: ModeFull, Postgres: &n}, fn)
}

// TestAdvisoryModelOutOfOrder: a holder's unlock stamped after the grant
// to the next session (its backend stamped its log late) is its delete
// just before that grant; a holder displaced that never unlocks (its
// session ended) has none.
func TestAdvisoryModelOutOfOrder(t *testing.T) {
	var got []event
	m := advisoryModel{emit: func(e event) { got = append(got, e) }}
	for _, c := range []advisoryCall{
		{us: 10, pid: 1, client: "worker-0", act: "lock", ok: true},
		{us: 30, pid: 2, client: "worker-1", act: "lock", ok: true}, // 1's unlock ran before it
		{us: 31, pid: 1, client: "worker-0", act: "unlock", ok: true},
		{us: 50, pid: 3, client: "worker-2", act: "lock", ok: true}, // 2's session ended
		{us: 60, pid: 2, client: "worker-1", act: "unlock", ok: false},
	} {
		m.call(c)
	}
	type act struct {
		act   history.Keyword
		token string
		us    int64
	}
	var acts []act
	for _, e := range got {
		acts = append(acts, act{e.act, e.token, e.us})
	}
	want := []act{{history.SGrant, "pid 1", 10}, {history.SGrant, "pid 2", 30}, {history.SDelete, "pid 1", 29}, {history.SGrant, "pid 3", 50}}
	if !slices.Equal(acts, want) {
		t.Errorf("events %+v, want %+v", acts, want)
	}
}
