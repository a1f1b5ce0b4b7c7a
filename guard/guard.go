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
//
// What it cannot honour it refuses (ErrInvalid), before anything is sent:
// a Kind it does not know is never taken for None, and a mistake in a
// Guard or its Metrics is an error or counts nothing, never a panic.
package guard

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

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

// ErrInvalid is returned, before anything is sent, for what the package
// cannot honour: a Kind that is not one of Kinds() (ErrUnknownKind too), a
// Lock that is not UTF-8 (no metric can be labelled with it), no database.
// The statement was not run: the write did not land.
var ErrInvalid = errors.New("guard: refused, nothing sent")

// ErrUnknownKind is returned for a Kind that is not one of Kinds(): a
// guard the package does not know is never taken for None. The zero Kind
// is one: a Guard that checks nothing must say None.
var ErrUnknownKind = errors.New("unknown guard kind")

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

// ParseKind returns the kind s names, exactly as Kinds() spells it
// ("fence", not "Fence" nor "fenced"), or an error wrapping ErrInvalid and
// ErrUnknownKind.
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	return k, k.check()
}

// check says whether k is one of Kinds().
func (k Kind) check() error {
	switch k {
	case None, Fence, FenceRMW, CAS:
		return nil
	}
	return fmt.Errorf("%w: %w %q (want one of none, fence, fence-rmw, cas)", ErrInvalid, ErrUnknownKind, string(k))
}

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
// see it. A k that is not one of Kinds() is an error (ErrUnknownKind),
// never a condition that lets every write land.
func (k Kind) Cond(fence, value string, n int, token, read any) (string, []any, error) {
	p := "$" + strconv.Itoa(n)
	switch k {
	case None:
		return "TRUE", nil, nil
	case Fence:
		return fence + " < " + p, []any{token}, nil
	case FenceRMW:
		return fence + " = " + p, []any{token}, nil
	case CAS:
		return value + " = " + p, []any{read}, nil
	}
	return "", nil, k.check()
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
	Kind Kind // one of Kinds(): the zero Kind is refused, not taken for None
	// Lock names the lock, as the metrics' lock label: a name per kind of
	// lock a service takes ("orders", "billing-run"), not one per key.
	// It must be UTF-8, as a label must, whether or not Metrics is set.
	Lock    string
	Metrics *Metrics // nil counts nothing
}

// check says whether g can be honoured with db: an error wrapping
// ErrInvalid if not, before anything is sent or counted.
func (g Guard) check(db any) error {
	if err := g.Kind.check(); err != nil {
		return err
	}
	if !utf8.ValidString(g.Lock) {
		return fmt.Errorf("%w: lock name %q is not UTF-8, which no metric's label can be", ErrInvalid, g.Lock)
	}
	if isNil(db) {
		return fmt.Errorf("%w: no database to run the statement on", ErrInvalid)
	}
	return nil
}

// isNil says whether v is nil, or an interface holding a nil pointer (a
// nil *pgxpool.Pool): either would panic when called.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return r.IsNil()
	}
	return false
}

// Write runs stmt, an UPDATE of one row (or a statement whose rows are
// those of such an UPDATE, as a data-modifying WITH) whose WHERE clause
// holds g.Kind.Cond, and says whether the guard let it land: nil when it
// changed a row, ErrStale (Fence, FenceRMW) or ErrChanged (CAS) when the
// guard refused it. Under None a write that changed nothing is an error
// wrapping pgx.ErrNoRows: the row is missing. (Under the others a missing
// row is taken for a refusal: the row must exist before the first write.)
// A Guard the package cannot honour (an unknown Kind, a Lock that is not
// UTF-8, a nil db) is an error wrapping ErrInvalid, the statement not run.
// Any other error is the statement's: the write may or may not have landed.
func (g Guard) Write(ctx context.Context, db Execer, stmt string, args ...any) error {
	if err := g.check(db); err != nil {
		return err
	}
	g.Metrics.attempt(g, opWrite)
	tag, err := db.Exec(ctx, stmt, args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	if g.Kind == None {
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
// caller's SELECT, not counted, and no row is pgx.ErrNoRows as usual. A
// Guard the package cannot honour is refused as by Write: ErrInvalid.
func (g Guard) Read(ctx context.Context, db Querier, stmt string, args []any, dest ...any) error {
	if err := g.check(db); err != nil {
		return err
	}
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
