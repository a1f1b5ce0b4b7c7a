package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrStale is returned by a fenced write that Postgres refused because a
// write with a larger fence had already been accepted.
var ErrStale = errors.New("counter: stale fence, write rejected")

// A Counter is the resource the lock protects: one row of the table
// counter(id, value, fence) in Postgres. Every write that takes effect also
// leaves a row in counter_audit, in the same statement, naming who wrote it:
// after the run, an :info write is looked up there to learn whether it
// happened.
type Counter struct {
	DB     *pgxpool.Pool
	ID     int64
	Fenced bool // write with the fence check: UPDATE … WHERE fence < $n
}

// A WriteID names one write in the audit table: the process that sent it
// and its section number.
type WriteID struct {
	Process, Section int64
}

// Setup creates the tables when missing, sets row ID to (0, 0) and clears
// its audit rows.
func (c *Counter) Setup(ctx context.Context) error {
	// CREATE TABLE IF NOT EXISTS is not safe against itself in another
	// session; an advisory lock serialises runs that share a server.
	err := pgx.BeginFunc(ctx, c.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7467486912)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS counter (
			id    bigint PRIMARY KEY,
			value bigint NOT NULL,
			fence bigint NOT NULL)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS counter_audit (
			counter_id bigint NOT NULL,
			process    bigint NOT NULL,
			section    bigint NOT NULL,
			value      bigint NOT NULL,
			fence      bigint NOT NULL,
			PRIMARY KEY (counter_id, process, section))`)
		return err
	})
	if err != nil {
		return fmt.Errorf("create tables counter, counter_audit: %w", err)
	}
	err = pgx.BeginFunc(ctx, c.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO counter (id, value, fence) VALUES ($1, 0, 0)
			ON CONFLICT (id) DO UPDATE SET value = 0, fence = 0`, c.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM counter_audit WHERE counter_id = $1`, c.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("reset counter %d: %w", c.ID, err)
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

// Write sets the counter to value, and records id in the audit table in the
// same statement. Fenced, it succeeds only when fence is larger than every
// fence accepted before, and returns ErrStale otherwise.
func (c *Counter) Write(ctx context.Context, value, fence int64, id WriteID) error {
	where := `id = $2`
	if c.Fenced {
		where = `id = $2 AND fence < $3`
	}
	tag, err := c.DB.Exec(ctx, `WITH w AS (
		UPDATE counter SET value = $1, fence = GREATEST(fence, $3) WHERE `+where+` RETURNING id)
		INSERT INTO counter_audit (counter_id, process, section, value, fence)
		SELECT id, $4, $5, $1, $3 FROM w`, value, c.ID, fence, id.Process, id.Section)
	if err != nil {
		return fmt.Errorf("write counter %d: %w", c.ID, err)
	}
	if tag.RowsAffected() == 0 {
		if c.Fenced {
			return ErrStale
		}
		return fmt.Errorf("write counter %d: %w", c.ID, pgx.ErrNoRows)
	}
	return nil
}

// Audited returns which of ids the audit table holds for the counter: the
// writes that took effect.
func (c *Counter) Audited(ctx context.Context, ids []WriteID) (map[WriteID]bool, error) {
	procs, secs := make([]int64, len(ids)), make([]int64, len(ids))
	for i, id := range ids {
		procs[i], secs[i] = id.Process, id.Section
	}
	rows, err := c.DB.Query(ctx, `SELECT process, section FROM counter_audit
		WHERE counter_id = $1 AND (process, section) IN (SELECT * FROM unnest($2::bigint[], $3::bigint[]))`,
		c.ID, procs, secs)
	if err != nil {
		return nil, fmt.Errorf("read counter_audit: %w", err)
	}
	defer rows.Close()
	out := map[WriteID]bool{}
	for rows.Next() {
		var id WriteID
		if err := rows.Scan(&id.Process, &id.Section); err != nil {
			return nil, fmt.Errorf("read counter_audit: %w", err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read counter_audit: %w", err)
	}
	return out, nil
}
