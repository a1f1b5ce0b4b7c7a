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
// counter(id, value, fence) in Postgres.
type Counter struct {
	DB     *pgxpool.Pool
	ID     int64
	Fenced bool // write with the fence check: UPDATE … WHERE fence < $n
}

// Setup creates the counter table when missing and sets row ID to (0, 0).
func (c *Counter) Setup(ctx context.Context) error {
	// CREATE TABLE IF NOT EXISTS is not safe against itself in another
	// session; an advisory lock serialises runs that share a server.
	err := pgx.BeginFunc(ctx, c.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7467486912)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS counter (
			id    bigint PRIMARY KEY,
			value bigint NOT NULL,
			fence bigint NOT NULL)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("create table counter: %w", err)
	}
	if _, err := c.DB.Exec(ctx, `INSERT INTO counter (id, value, fence) VALUES ($1, 0, 0)
		ON CONFLICT (id) DO UPDATE SET value = 0, fence = 0`, c.ID); err != nil {
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

// Write sets the counter to value. Fenced, it succeeds only when fence is
// larger than every fence accepted before, and returns ErrStale otherwise.
func (c *Counter) Write(ctx context.Context, value, fence int64) error {
	var (
		tag interface{ RowsAffected() int64 }
		err error
	)
	if c.Fenced {
		tag, err = c.DB.Exec(ctx, `UPDATE counter SET value = $1, fence = $2 WHERE id = $3 AND fence < $2`,
			value, fence, c.ID)
	} else {
		tag, err = c.DB.Exec(ctx, `UPDATE counter SET value = $1 WHERE id = $2`, value, c.ID)
	}
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
