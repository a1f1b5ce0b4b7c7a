package guard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hiatus-dev/hiatus/guard"
	"github.com/hiatus-dev/hiatus/internal/servers"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

var db *pgxpool.Pool

// TestMain starts a throwaway PostgreSQL: the guard is what PostgreSQL
// does with its statements, so the tests run them on a real one.
func TestMain(m *testing.M) {
	ctx := context.Background()
	p, err := servers.StartPostgres(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guard tests need PostgreSQL:", err)
		os.Exit(1)
	}
	code := 1
	if db, err = pgxpool.New(ctx, p.URL); err == nil {
		_, err = db.Exec(ctx, `CREATE TABLE account (id bigint PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL)`)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "guard tests: set up PostgreSQL:", err)
	} else {
		code = m.Run()
		db.Close()
	}
	p.Stop()
	os.Exit(code)
}

var nextID atomic.Int64

// account is a new row of its own, balance 0, fence 0.
func account(t *testing.T) int64 {
	t.Helper()
	id := nextID.Add(1)
	if _, err := db.Exec(context.Background(), `INSERT INTO account VALUES ($1, 0, 0)`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// holder is one holder's read-modify-write of an account, under g.
type holder struct {
	g     guard.Guard
	id    int64
	token int64
	read  int64
}

func (h *holder) readBalance(ctx context.Context) error {
	if h.g.Kind == guard.FenceRMW {
		return h.g.Read(ctx, db, `UPDATE account SET fence = $2 WHERE id = $1 AND `+guard.ReadCond("fence", "$2")+` RETURNING balance`,
			[]any{h.id, h.token}, &h.read)
	}
	return h.g.Read(ctx, db, `SELECT balance FROM account WHERE id = $1`, []any{h.id}, &h.read)
}

func (h *holder) deposit(ctx context.Context, amount int64) error {
	cond, args, err := h.g.Kind.Cond("fence", "balance", 4, h.token, h.read)
	if err != nil {
		return err
	}
	return h.g.Write(ctx, db, `UPDATE account SET balance = $1, fence = GREATEST(fence, $3) WHERE id = $2 AND `+cond,
		append([]any{h.read + amount, h.id, h.token}, args...)...)
}

// TestGuards is the interleaving that tells the guards apart: A (token 1)
// reads; its lease lapses; B (token 2) reads and writes; A writes. A's
// write is the stale one: every guard but none refuses it, and counts it.
func TestGuards(t *testing.T) {
	for _, tc := range []struct {
		kind     guard.Kind
		err      error
		balance  int64 // after both deposits of 10
		reason   string
		attempts float64
	}{
		{kind: guard.None, balance: 10, attempts: 2},
		{kind: guard.Fence, err: guard.ErrStale, balance: 10, reason: guard.ReasonStale, attempts: 2},
		{kind: guard.FenceRMW, err: guard.ErrStale, balance: 10, reason: guard.ReasonStale, attempts: 4},
		{kind: guard.CAS, err: guard.ErrChanged, balance: 10, reason: guard.ReasonChanged, attempts: 2},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			ctx := context.Background()
			reg := prometheus.NewRegistry()
			m, err := guard.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			g := guard.Guard{Kind: tc.kind, Lock: "accounts", Metrics: m}
			id := account(t)
			a, b := &holder{g: g, id: id, token: 1}, &holder{g: g, id: id, token: 2}
			for _, step := range []func(context.Context) error{
				a.readBalance, b.readBalance, func(ctx context.Context) error { return b.deposit(ctx, 10) },
			} {
				if err := step(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.deposit(ctx, 10); err != tc.err {
				t.Errorf("A's stale write: %v, want %v", err, tc.err)
			}
			var balance int64
			if err := db.QueryRow(ctx, `SELECT balance FROM account WHERE id = $1`, id).Scan(&balance); err != nil {
				t.Fatal(err)
			}
			if balance != tc.balance {
				t.Errorf("balance %d, want %d", balance, tc.balance)
			}
			var want float64
			if tc.err != nil {
				want = 1
			}
			if n := sum(t, reg, guard.RejectionsName, tc.reason); n != want {
				t.Errorf("rejections %v, want %v", n, want)
			}
			if n := sum(t, reg, guard.AttemptsName, ""); n != tc.attempts {
				t.Errorf("attempts %v, want %v", n, tc.attempts)
			}
		})
	}
}

// sum adds up the series of name in reg, those with the reason label
// reason when it is not "".
func sum(t *testing.T, reg prometheus.Gatherer, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := reason == ""
			for _, l := range m.GetLabel() {
				ok = ok || (l.GetName() == "reason" && l.GetValue() == reason)
			}
			if ok {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestNoneMissingRow: under None a write that changes nothing is no
// silent no-op: the row is missing, and the error says so.
func TestNoneMissingRow(t *testing.T) {
	g := guard.Guard{Kind: guard.None}
	cond, args, err := guard.None.Cond("fence", "balance", 2, int64(1), int64(0))
	if err != nil {
		t.Fatal(err)
	}
	err = g.Write(context.Background(), db, `UPDATE account SET balance = 1 WHERE id = $1 AND `+cond, append([]any{int64(-1)}, args...)...)
	if !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("write of a missing row: %v, want pgx.ErrNoRows", err)
	}
}

// TestMetricsShared: NewMetrics twice on one registry counts on the same
// counters, and Expvar shows them.
func TestMetricsShared(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m1, err := guard.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := guard.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	id := account(t)
	for i, m := range []*guard.Metrics{m1, m2} {
		g := guard.Guard{Kind: guard.Fence, Lock: "shared", Metrics: m}
		// A token of 0 is never above the row's fence: refused.
		cond, args, err := g.Kind.Cond("fence", "balance", 3, int64(0), nil)
		if err != nil {
			t.Fatal(err)
		}
		err = g.Write(ctx, db, `UPDATE account SET fence = GREATEST(fence, $2) WHERE id = $1 AND `+cond, append([]any{id, int64(0)}, args...)...)
		if err != guard.ErrStale {
			t.Fatalf("write %d with token 0: %v, want ErrStale", i, err)
		}
	}
	if n := sum(t, reg, guard.RejectionsName, guard.ReasonStale); n != 2 {
		t.Errorf("rejections %v, want 2: both Metrics on the registry's counters", n)
	}
	want := `"guard_rejections_total{guard=\"fence\",lock=\"shared\",op=\"write\",reason=\"stale-fence\"}":2`
	if s := m1.Expvar().String(); !strings.Contains(s, want) {
		t.Errorf("expvar %s lacks %s", s, want)
	}
	if _, err := guard.NewMetrics(nil); err == nil {
		t.Error("NewMetrics(nil): no error")
	}
}

// balanceOf is account id's balance.
func balanceOf(t *testing.T, id int64) int64 {
	t.Helper()
	var b int64
	if err := db.QueryRow(context.Background(), `SELECT balance FROM account WHERE id = $1`, id).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUnknownKind: a Kind the package does not know is refused, never
// taken for None: ParseKind and Cond say so, and Write and Read send
// nothing and count nothing, though the statement would land unguarded.
func TestUnknownKind(t *testing.T) {
	for _, k := range []guard.Kind{"fenced", "Fence", "", "fence ", "none\x00"} {
		t.Run(fmt.Sprintf("%q", k), func(t *testing.T) {
			ctx := context.Background()
			if _, err := guard.ParseKind(string(k)); !errors.Is(err, guard.ErrUnknownKind) || !errors.Is(err, guard.ErrInvalid) {
				t.Errorf("ParseKind: %v, want ErrUnknownKind and ErrInvalid", err)
			}
			if cond, args, err := k.Cond("fence", "balance", 2, int64(1), int64(0)); !errors.Is(err, guard.ErrUnknownKind) || cond != "" || args != nil {
				t.Errorf("Cond: %q %v %v, want no condition and ErrUnknownKind", cond, args, err)
			}
			reg := prometheus.NewRegistry()
			m, err := guard.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			g := guard.Guard{Kind: k, Lock: "accounts", Metrics: m}
			id := account(t)
			if err := g.Write(ctx, db, `UPDATE account SET balance = 99 WHERE id = $1`, id); !errors.Is(err, guard.ErrUnknownKind) {
				t.Errorf("Write: %v, want ErrUnknownKind", err)
			}
			var read int64
			err = g.Read(ctx, db, `UPDATE account SET balance = 98 WHERE id = $1 RETURNING balance`, []any{id}, &read)
			if !errors.Is(err, guard.ErrUnknownKind) {
				t.Errorf("Read: %v, want ErrUnknownKind", err)
			}
			if b := balanceOf(t, id); b != 0 {
				t.Errorf("balance %d: a statement ran unguarded", b)
			}
			if n := sum(t, reg, guard.AttemptsName, ""); n != 0 {
				t.Errorf("%v attempts counted, labelled guard=%q", n, k)
			}
		})
	}
	for _, k := range guard.Kinds() {
		if got, err := guard.ParseKind(string(k)); got != k || err != nil {
			t.Errorf("ParseKind(%q): %q, %v", k, got, err)
		}
	}
}

// TestNoPanic: what a service may hand the package by mistake is refused
// or counts nothing, and never panics: a lock name that is not UTF-8 (no
// label can hold it), no database, a nil or zero Metrics, a nil registry
// of a concrete type.
func TestNoPanic(t *testing.T) {
	ctx := context.Background()
	var nilPool *pgxpool.Pool
	for _, tc := range []struct {
		name string
		// do returns the account it wrote to (0 for none) and the error it got.
		do      func(t *testing.T) (int64, error)
		err     error // nil: the write lands
		balance int64 // the account's balance after
	}{
		{name: "lock-not-utf8", err: guard.ErrInvalid, do: func(t *testing.T) (int64, error) {
			m, err := guard.NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			id := account(t)
			return id, guard.Guard{Kind: guard.Fence, Lock: "accounts\xff", Metrics: m}.Write(ctx, db,
				`UPDATE account SET balance = 1, fence = 1 WHERE id = $1 AND fence < 1`, id)
		}},
		{name: "nil-db", err: guard.ErrInvalid, do: func(t *testing.T) (int64, error) {
			return 0, guard.Guard{Kind: guard.Fence}.Write(ctx, nil, `SELECT 1`)
		}},
		{name: "nil-pool", err: guard.ErrInvalid, do: func(t *testing.T) (int64, error) {
			return 0, guard.Guard{Kind: guard.Fence}.Write(ctx, nilPool, `SELECT 1`)
		}},
		{name: "nil-pool-read", err: guard.ErrInvalid, do: func(t *testing.T) (int64, error) {
			var v int64
			return 0, guard.Guard{Kind: guard.FenceRMW}.Read(ctx, nilPool, `SELECT 1`, nil, &v)
		}},
		{name: "zero-metrics", balance: 1, do: func(t *testing.T) (int64, error) {
			id := account(t)
			m := &guard.Metrics{}
			if s := m.Expvar().String(); s != "{}" {
				t.Errorf("a zero Metrics' expvar %s, want {}", s)
			}
			return id, guard.Guard{Kind: guard.Fence, Lock: "accounts", Metrics: m}.Write(ctx, db,
				`UPDATE account SET balance = 1, fence = 1 WHERE id = $1 AND fence < 1`, id)
		}},
		{name: "nil-metrics-expvar", do: func(t *testing.T) (int64, error) {
			if s := (*guard.Metrics)(nil).Expvar().String(); s != "{}" {
				t.Errorf("a nil Metrics' expvar %s, want {}", s)
			}
			return 0, nil
		}},
		{name: "nil-registry", err: errAny, do: func(t *testing.T) (int64, error) {
			m, err := guard.NewMetrics((*prometheus.Registry)(nil))
			if m != nil {
				t.Errorf("NewMetrics of a nil *Registry: %v", m)
			}
			return 0, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panic: %v", p)
				}
			}()
			id, err := tc.do(t)
			switch {
			case tc.err == errAny && err == nil:
				t.Error("no error")
			case tc.err != errAny && !errors.Is(err, tc.err):
				t.Errorf("%v, want %v", err, tc.err)
			}
			if id != 0 {
				if b := balanceOf(t, id); b != tc.balance {
					t.Errorf("balance %d, want %d", b, tc.balance)
				}
			}
		})
	}
}

// errAny stands for an error of any kind in a table.
var errAny = errors.New("any error")
