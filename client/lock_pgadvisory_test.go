package client_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hiatus-dev/hiatus/client"
)

// TestPGAdvisoryAttemptOutlivesEnd: an attempt the server is answering when
// the acquire's context ends is not cut short. The acquire that the run's
// end interrupted reported a failure while the server had granted it, and
// its session held the lock until discarded: an orphan that refused
// another worker. The attempt is held in the server by a function that
// waits for a gate (a transaction-scoped advisory lock another session
// holds) before it calls pg_catalog's, as the lock server's record does
// with its log; the context ends while it waits, then the gate opens.
func TestPGAdvisoryAttemptOutlivesEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	schema := fmt.Sprintf("gate_%d", rand.Int63())
	gate := rand.Int63()
	for _, q := range []string{
		`CREATE SCHEMA ` + schema,
		fmt.Sprintf(`CREATE FUNCTION %s.pg_try_advisory_lock(k bigint) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_catalog.pg_advisory_xact_lock(%d);
			RETURN pg_catalog.pg_try_advisory_lock(k);
		END $$`, schema, gate),
	} {
		if _, err := r.db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { r.db.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`) })

	cfg, err := pgxpool.ParseConfig(postgresURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema + ", pg_catalog, public"
	gated, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gated.Close)
	l, err := client.NewLock(ctx, "pg-advisory", client.LockConfig{Postgres: gated, Key: "lock:" + r.name, Retry: time.Millisecond, OpTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.(interface{ Close() }).Close)

	holder, err := r.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, `SELECT pg_catalog.pg_advisory_lock($1)`, gate); err != nil {
		t.Fatal(err)
	}
	actx, end := context.WithCancel(ctx)
	type result struct {
		g   client.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := l.Acquire(actx)
		done <- result{g, err}
	}()
	waitGateWaiter(t, r.db, gate)
	end()
	if _, err := holder.Exec(ctx, `SELECT pg_catalog.pg_advisory_unlock($1)`, gate); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("acquire: %v; want the grant its attempt took", res.err)
	}
	var held bool
	if err := r.db.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock($1)`, client.AdvisoryKey("lock:"+r.name)).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held {
		t.Error("another session took the lock the acquire reported held")
	}
	if err := l.Release(ctx, res.g); err != nil {
		t.Errorf("release: %v", err)
	}
}

// waitGateWaiter returns once a session waits for the advisory lock gate.
func waitGateWaiter(t *testing.T, db *pgxpool.Pool, gate int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var n int
		err := db.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND ((classid::bigint << 32) | objid::bigint) = $1`, gate).Scan(&n)
		switch {
		case err != nil:
			t.Fatal(err)
		case n > 0:
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no session came to wait for the gate")
		case <-time.After(time.Millisecond):
		}
	}
}
