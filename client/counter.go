package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/hiatus-dev/hiatus/guard"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrStale is returned by a fenced write (or, under GuardFenceRMW, a read)
// that Postgres refused because a larger fence had already been seen.
var ErrStale = guard.ErrStale

// ErrChanged is returned by a write under GuardCAS that Postgres refused
// because the counter no longer held the value the writer had read.
var ErrChanged = guard.ErrChanged

// A Guard is what the resource itself checks before it lets a write land:
// the last line of defence when the lock has granted twice. The guards are
// package guard's, which a service imports; the Counter writes through it.
type Guard = guard.Kind

// The guards a Counter can enforce: see package guard.
const (
	GuardNone     = guard.None
	GuardFence    = guard.Fence
	GuardFenceRMW = guard.FenceRMW
	GuardCAS      = guard.CAS
)

// Guards lists the guards, for flags and tables.
func Guards() []Guard { return guard.Kinds() }

// GuardOf returns GuardFence when fenced and GuardNone when not: the guard
// of --fenced, the flag that came before --guard.
func GuardOf(fenced bool) Guard {
	if fenced {
		return GuardFence
	}
	return GuardNone
}

// A Counter is the resource the lock protects: one row of the table
// counter(id, value, fence) in Postgres. Every write that takes effect also
// leaves a row in counter_audit, in the same statement, naming who wrote it:
// after the run, an :info write is looked up there to learn whether it
// happened.
type Counter struct {
	DB    *pgxpool.Pool
	ID    int64
	Guard Guard // "" is GuardNone
	// Lock and Metrics, when Metrics is set, count the guarded writes (and
	// fence-rmw reads) under the lock label Lock: see guard.Metrics.
	Lock    string
	Metrics *guard.Metrics
}

// guard is the guard the counter's writes go through: GuardNone when
// Guard is "" (package guard refuses the zero Kind).
func (c *Counter) guard() guard.Guard {
	return guard.Guard{Kind: cmp.Or(c.Guard, GuardNone), Lock: c.Lock, Metrics: c.Metrics}
}

// A WriteID names one write in the audit table: the process that sent it
// and its section number.
type WriteID struct {
	Process, Section int64
}

// Setup creates the tables when missing, sets row ID to (0, 0) and clears
// its audit rows.
func (c *Counter) Setup(ctx context.Context) error {
	return setupTables(ctx, c.DB, "counter", c.ID, []string{`CREATE TABLE IF NOT EXISTS counter (
			id    bigint PRIMARY KEY,
			value bigint NOT NULL,
			fence bigint NOT NULL)`, `CREATE TABLE IF NOT EXISTS counter_audit (
			counter_id bigint NOT NULL,
			process    bigint NOT NULL,
			section    bigint NOT NULL,
			value      bigint NOT NULL,
			fence      bigint NOT NULL,
			PRIMARY KEY (counter_id, process, section))`},
		[]string{`INSERT INTO counter (id, value, fence) VALUES ($1, 0, 0)
			ON CONFLICT (id) DO UPDATE SET value = 0, fence = 0`,
			`DELETE FROM counter_audit WHERE counter_id = $1`})
}

// setupTables makes a resource's tables, running create (each CREATE
// TABLE IF NOT EXISTS) in one transaction, then reset, each statement
// given id as $1, in another. CREATE TABLE IF NOT EXISTS is not safe
// against itself in another session: an advisory lock, one for every
// resource, serialises runs that share a server.
func setupTables(ctx context.Context, db *pgxpool.Pool, what string, id int64, create, reset []string) error {
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7467486912)`); err != nil {
			return err
		}
		for _, stmt := range create {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create the tables of %s %d: %w", what, id, err)
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, stmt := range reset {
			if _, err := tx.Exec(ctx, stmt, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reset %s %d: %w", what, id, err)
	}
	return nil
}

// Read returns the counter's value and the largest fence written so far.
func (c *Counter) Read(ctx context.Context) (value, fence int64, err error) {
	err = c.DB.QueryRow(ctx, `SELECT value, fence FROM counter WHERE id = $1`, c.ID).Scan(&value, &fence)
	if err != nil {
		return 0, 0, fmt.Errorf("read counter %d: %w", c.ID, err)
	}
	return value, fence, nil
}

// ReadAs is the read of a critical section whose grant carries fence: a
// plain Read, but under GuardFenceRMW it records fence in the row, in the
// same statement, and returns ErrStale when a larger one is there.
func (c *Counter) ReadAs(ctx context.Context, fence int64) (int64, error) {
	if c.Guard != GuardFenceRMW {
		v, _, err := c.Read(ctx)
		return v, err
	}
	var v int64
	err := c.guard().Read(ctx, c.DB, `UPDATE counter SET fence = $2 WHERE id = $1 AND `+guard.ReadCond("fence", "$2")+` RETURNING value`,
		[]any{c.ID, fence}, &v)
	if errors.Is(err, ErrStale) {
		return 0, ErrStale
	}
	if err != nil {
		return 0, fmt.Errorf("read counter %d with fence %d: %w", c.ID, fence, err)
	}
	return v, nil
}

// Write sets the counter to value, and records id in the audit table in the
// same statement, when the guard lets it: under GuardFence when fence is
// larger than every fence landed before, under GuardFenceRMW when the row
// still holds fence (see ReadAs), under GuardCAS when the counter still
// holds read. A refused write returns ErrStale or ErrChanged.
func (c *Counter) Write(ctx context.Context, value, read, fence int64, id WriteID) error {
	g := c.guard()
	cond, cargs, err := g.Kind.Cond("fence", "value", 6, fence, read)
	if err != nil {
		return fmt.Errorf("write counter %d: %w", c.ID, err)
	}
	err = g.Write(ctx, c.DB, `WITH w AS (
		UPDATE counter SET value = $1, fence = GREATEST(fence, $3) WHERE id = $2 AND `+cond+` RETURNING id)
		INSERT INTO counter_audit (counter_id, process, section, value, fence)
		SELECT id, $4, $5, $1, $3 FROM w`, append([]any{value, c.ID, fence, id.Process, id.Section}, cargs...)...)
	if err != nil && !errors.Is(err, ErrStale) && !errors.Is(err, ErrChanged) {
		return fmt.Errorf("write counter %d: %w", c.ID, err)
	}
	return err
}

// Audited returns which of ids the audit table holds for the counter: the
// writes that took effect.
func (c *Counter) Audited(ctx context.Context, ids []WriteID) (map[WriteID]bool, error) {
	return audited(ctx, c.DB, `SELECT process, section FROM counter_audit
		WHERE counter_id = $1 AND (process, section) IN (SELECT * FROM unnest($2::bigint[], $3::bigint[]))`, c.ID, ids)
}

// audited runs query, which selects the (process, section) of the audit
// rows of resource id among those of ids ($2, $3), and returns them.
func audited(ctx context.Context, db *pgxpool.Pool, query string, id int64, ids []WriteID) (map[WriteID]bool, error) {
	procs, secs := make([]int64, len(ids)), make([]int64, len(ids))
	for i, w := range ids {
		procs[i], secs[i] = w.Process, w.Section
	}
	rows, err := db.Query(ctx, query, id, procs, secs)
	if err != nil {
		return nil, fmt.Errorf("read the audit table: %w", err)
	}
	defer rows.Close()
	out := map[WriteID]bool{}
	for rows.Next() {
		var w WriteID
		if err := rows.Scan(&w.Process, &w.Section); err != nil {
			return nil, fmt.Errorf("read the audit table: %w", err)
		}
		out[w] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the audit table: %w", err)
	}
	return out, nil
}
