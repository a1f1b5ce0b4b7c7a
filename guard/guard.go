// Package guard is the check a resource makes before it lets a lock
// holder's write land: the last line of defence when a lock has granted
// twice (a holder paused past its lease, a partition, a failover). It runs
// the guarded reads and writes of a PostgreSQL row over pgx, turns a write
// the guard refused into a sentinel error — ErrStale, ErrChanged — never a
// silent no-op, and counts attempts and refusals per lock for Prometheus.
//
// The statements are the caller's: Cond gives the condition to put in a
// write's WHERE clause, Write runs the statement and says whether the
// guard let it land. hiatus's own workers write through this package, so
// what a hiatus run measures is what a service that imports it ships.
package guard

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrStale is returned by a fenced write (or, under FenceRMW, a read) that
// PostgreSQL refused because a larger fencing token had been seen: the
// lock has been granted to someone else since this holder's grant.
var ErrStale = errors.New("guard: stale fence, rejected")

// ErrChanged is returned by a write under CAS that PostgreSQL refused
// because the row no longer held the value the writer had read.
var ErrChanged = errors.New("guard: value changed since the read, write rejected")

// A Kind is what the resource checks before it lets a write land.
type Kind string

// The kinds of guard.
const (
	// None checks nothing: the lock alone keeps writers apart.
	None Kind = "none"
	// Fence lands a write only when its fencing token is larger than every
	// token landed before (… WHERE fence < $token). It orders writes, not
	// read-modify-writes: a stale holder's write that lands before the
	// newer holder's still overwrites what that one had read.
	Fence Kind = "fence"
	// FenceRMW checks the token at the read too: the read records its
	// token in the row and is refused when a larger one is there; the
	// write lands only when the row still holds the writer's token, so no
	// holder with a larger one has read or written since. The whole
	// read-modify-write is fenced.
	FenceRMW Kind = "fence-rmw"
	// CAS lands a write only when the row still holds the value the writer
	// read (… WHERE value = $read): no token needed.
	CAS Kind = "cas"
)

// Kinds lists the kinds, for flags and tables.
func Kinds() []Kind { return []Kind{None, Fence, FenceRMW, CAS} }

// Fenced reports whether k needs a fencing token with each grant.
func (k Kind) Fenced() bool { return k == Fence || k == FenceRMW }

// reason is why k refuses: the value of the metrics' reason label.
func (k Kind) reason() string {
	if k == CAS {
		return ReasonChanged
	}
	return ReasonStale
}

// The reasons a guard refuses, as the metrics' reason label says them (the
// words hiatus's histories use for the same refusals).
const (
	ReasonStale   = "stale-fence"
	ReasonChanged = "value-changed"
)

// Cond returns k's condition on a row, for the WHERE clause of a write,
// and the arguments it takes, numbered from $n: append them to the
// statement's. fence and value are the row's columns (SQL expressions),
// token the holder's fencing token and read the value it read. Under None
// it is TRUE, with no arguments. The write must also carry the token into
// the row, SET fence = GREATEST(fence, token), for Fence and FenceRMW to
// see it.
func (k Kind) Cond(fence, value string, n int, token, read any) (string, []any) {
	p := "$" + strconv.Itoa(n)
	switch k {
	case Fence:
		return fence + " < " + p, []any{token}
	case FenceRMW:
		return fence + " = " + p, []any{token}
	case CAS:
		return value + " = " + p, []any{read}
	}
	return "TRUE", nil
}

// ReadCond returns the condition of a FenceRMW read, which records token
// in the row (UPDATE … SET fence = token WHERE … AND ReadCond RETURNING …):
// fence <= token. Under other kinds a read is a plain SELECT.
func ReadCond(fence, token string) string { return fence + " <= " + token }

// An Execer runs a statement: a *pgxpool.Pool, a *pgx.Conn, a pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// A Querier runs a statement that returns one row.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// A Guard runs the guarded statements of the holders of one lock.
type Guard struct {
	Kind Kind
	// Lock names the lock, as the metrics' lock label: a name per kind of
	// lock a service takes ("orders", "billing-run"), not one per key.
	Lock    string
	Metrics *Metrics // nil counts nothing
}

// Write runs stmt, an UPDATE of one row (or a statement whose rows are
// those of such an UPDATE, as a data-modifying WITH) whose WHERE clause
// holds g.Kind.Cond, and says whether the guard let it land: nil when it
// changed a row, ErrStale (Fence, FenceRMW) or ErrChanged (CAS) when the
// guard refused it. Under None a write that changed nothing is an error
// wrapping pgx.ErrNoRows: the row is missing. (Under the others a missing
// row is taken for a refusal: the row must exist before the first write.)
// Any other error is the statement's: the write may or may not have landed.
func (g Guard) Write(ctx context.Context, db Execer, stmt string, args ...any) error {
	g.Metrics.attempt(g, opWrite)
	tag, err := db.Exec(ctx, stmt, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	if g.Kind == None || g.Kind == "" {
		return fmt.Errorf("guard: write changed no row: %w", pgx.ErrNoRows)
	}
	g.Metrics.reject(g, opWrite)
	if g.Kind == CAS {
		return ErrChanged
	}
	return ErrStale
}

// Read runs stmt, a read of one row, scanning it into dest. Under FenceRMW
// stmt is an UPDATE … WHERE … AND ReadCond(…) RETURNING …, and a read that
// finds no row is refused: ErrStale. Under the other kinds it is the
// caller's SELECT, not counted, and no row is pgx.ErrNoRows as usual.
func (g Guard) Read(ctx context.Context, db Querier, stmt string, args []any, dest ...any) error {
	if g.Kind != FenceRMW {
		return db.QueryRow(ctx, stmt, args...).Scan(dest...)
	}
	g.Metrics.attempt(g, opRead)
	err := db.QueryRow(ctx, stmt, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		g.Metrics.reject(g, opRead)
		return ErrStale
	}
	return err
}
