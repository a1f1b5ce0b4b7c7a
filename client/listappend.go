package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/hiatus-dev/hiatus/guard"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultListPerKey is how many appends a key of a ListAppend takes
// before the next key is begun, as Jepsen's list-append retires a key
// after so many writes: reads stay short however long the run.
const DefaultListPerKey = 32

// listVersionShift makes a list's version from its key and length (see
// ListAppend.Write): a key takes fewer appends than 1<<20.
const listVersionShift = 20

// A ListAppend is the list-append workload's resource, after Elle's: each
// section reads the current key's list and writes it back with one unique
// element appended — a read-modify-write of the whole list, as the
// Counter's is of its value, so that a write over a list it did not read
// drops what it did not see, and the checker can say which element was
// lost and to whom. The lists live in PostgreSQL: list_head(id, key,
// elems, fence) holds the current key and its list, list_keys(id, key,
// elems) every key's list, and list_audit each write that took effect, by
// its WriteID, for the :info settlement.
type ListAppend struct {
	DB    *pgxpool.Pool
	ID    int64
	Guard Guard // "" is GuardNone
	// Lock and Metrics, when Metrics is set, count the guarded writes
	// (and fence-rmw reads) under the lock label Lock: see guard.Metrics.
	Lock    string
	Metrics *guard.Metrics
	PerKey  int // appends a key takes; DefaultListPerKey when 0
}

var _ Resource = (*ListAppend)(nil)

func (l *ListAppend) guard() guard.Guard {
	return guard.Guard{Kind: cmp.Or(l.Guard, GuardNone), Lock: l.Lock, Metrics: l.Metrics}
}

func (l *ListAppend) perKey() int { return cmp.Or(l.PerKey, DefaultListPerKey) }

// A listRead is what a section read: the current key and its list. Its
// :value in the history is Jepsen's micro-op, [:r key [element …]], which
// is also what SectionRead returns.
type listRead struct {
	key   int64
	elems []int64
}

func (r listRead) value() any { return history.ListRead(r.key, r.elems) }

// readOf reads back a value SectionRead returned.
func readOf(v any) listRead {
	m := v.([]any)
	r := listRead{key: m[1].(int64)}
	for _, e := range m[2].([]any) {
		r.elems = append(r.elems, e.(int64))
	}
	return r
}

// version is the read's key and length in one number: what the cas guard
// compares, since under it every write that lands moves the list one
// append on (or to the next key).
func (r listRead) version() int64 { return r.key<<listVersionShift + int64(len(r.elems)) }

// Setup creates the tables when missing, empties the lists of ID and
// clears their audit rows.
func (l *ListAppend) Setup(ctx context.Context) error {
	return setupTables(ctx, l.DB, "list", l.ID, []string{`CREATE TABLE IF NOT EXISTS list_head (
			id bigint PRIMARY KEY, key bigint NOT NULL, elems bigint[] NOT NULL, fence bigint NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS list_keys (
			id bigint NOT NULL, key bigint NOT NULL, elems bigint[] NOT NULL, PRIMARY KEY (id, key))`,
		`CREATE TABLE IF NOT EXISTS list_audit (
			list_id bigint NOT NULL, process bigint NOT NULL, section bigint NOT NULL,
			key bigint NOT NULL, elem bigint NOT NULL, PRIMARY KEY (list_id, process, section))`},
		[]string{`INSERT INTO list_head (id, key, elems, fence) VALUES ($1, 0, '{}', 0)
			ON CONFLICT (id) DO UPDATE SET key = 0, elems = '{}', fence = 0`,
			`DELETE FROM list_keys WHERE id = $1`,
			`DELETE FROM list_audit WHERE list_id = $1`})
}

// SectionRead reads the current key's list; under GuardFenceRMW it records
// fence in the head, in the same statement, and returns ErrStale when a
// larger one is there.
func (l *ListAppend) SectionRead(ctx context.Context, fence int64) (any, error) {
	var r listRead
	var err error
	if l.Guard == GuardFenceRMW {
		err = l.guard().Read(ctx, l.DB, `UPDATE list_head SET fence = $2 WHERE id = $1 AND `+guard.ReadCond("fence", "$2")+` RETURNING key, elems`,
			[]any{l.ID, fence}, &r.key, &r.elems)
	} else {
		err = l.DB.QueryRow(ctx, `SELECT key, elems FROM list_head WHERE id = $1`, l.ID).Scan(&r.key, &r.elems)
	}
	switch {
	case errors.Is(err, ErrStale):
		return nil, ErrStale
	case err != nil:
		return nil, fmt.Errorf("read list %d: %w", l.ID, err)
	}
	return r.value(), nil
}

// WriteGuard is l.Guard.
func (l *ListAppend) WriteGuard() Guard { return l.Guard }

// WriteOp is :append.
func (l *ListAppend) WriteOp() history.Keyword { return history.FAppend }

// Next appends an element no other write of the run has: id's process and
// section, as process*10^9 + section. Its :value is [:append key element].
func (l *ListAppend) Next(read any, id WriteID) any {
	return history.ListAppend(readOf(read).key, history.ListElement(history.Process(id.Process), id.Section))
}

// SectionWrite writes the list read, with value's element appended, to the
// read's key, and records id in the audit table in the same statement,
// when the guard lets it: under GuardCAS when the head still holds the
// list read. A write that fills its key moves the head on to the next key,
// empty. A refused write returns ErrStale or ErrChanged.
func (l *ListAppend) SectionWrite(ctx context.Context, value, read any, fence int64, id WriteID) error {
	r, elem := readOf(read), value.([]any)[2].(int64)
	list := append(append([]int64(nil), r.elems...), elem)
	headKey, headElems := r.key, list
	if len(list) >= l.perKey() {
		headKey, headElems = r.key+1, []int64{}
	}
	g := l.guard()
	cond, cargs, err := g.Kind.Cond("fence", fmt.Sprintf("(key << %d) + cardinality(elems)", listVersionShift), 10, fence, r.version())
	if err != nil {
		return fmt.Errorf("write list %d: %w", l.ID, err)
	}
	err = g.Write(ctx, l.DB, `WITH h AS (
			UPDATE list_head SET key = $2, elems = $3, fence = GREATEST(fence, $4) WHERE id = $1 AND `+cond+` RETURNING id),
		k AS (
			INSERT INTO list_keys (id, key, elems) SELECT id, $5, $6 FROM h
			ON CONFLICT (id, key) DO UPDATE SET elems = EXCLUDED.elems RETURNING id)
		INSERT INTO list_audit (list_id, process, section, key, elem) SELECT id, $7, $8, $5, $9 FROM k`,
		append([]any{l.ID, headKey, headElems, fence, r.key, list, id.Process, id.Section, elem}, cargs...)...)
	if err != nil && !errors.Is(err, ErrStale) && !errors.Is(err, ErrChanged) {
		return fmt.Errorf("write list %d: %w", l.ID, err)
	}
	return err
}

// FinalRead reads every key's list: [[:r key [element …]] …], in key order.
func (l *ListAppend) FinalRead(ctx context.Context) (any, error) {
	rows, err := l.DB.Query(ctx, `SELECT key, elems FROM list_keys WHERE id = $1 ORDER BY key`, l.ID)
	if err != nil {
		return nil, fmt.Errorf("read list %d: %w", l.ID, err)
	}
	reads, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (listRead, error) {
		var r listRead
		return r, row.Scan(&r.key, &r.elems)
	})
	if err != nil {
		return nil, fmt.Errorf("read list %d: %w", l.ID, err)
	}
	txn := make([]any, len(reads))
	for i, r := range reads {
		txn[i] = r.value()
	}
	return txn, nil
}

// Audited returns which of ids the audit table holds for the list: the
// writes that took effect.
func (l *ListAppend) Audited(ctx context.Context, ids []WriteID) (map[WriteID]bool, error) {
	return audited(ctx, l.DB, `SELECT process, section FROM list_audit
		WHERE list_id = $1 AND (process, section) IN (SELECT * FROM unnest($2::bigint[], $3::bigint[]))`, l.ID, ids)
}
