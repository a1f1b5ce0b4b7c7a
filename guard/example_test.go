package guard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hiatus-dev/hiatus/guard"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// locker is a service's lock client: one that hands out a fencing token,
// larger with each grant, as etcd's revision or a Redis INCR.
type locker interface {
	Acquire(ctx context.Context, key string) (token int64, release func(), err error)
}

// deposit adds amount to an account under the lock "accounts", in
// account(id, balance, fence). A refused write is not retried: the holder
// acquires again, reads again and computes again.
func deposit(ctx context.Context, db *pgxpool.Pool, locks locker, g guard.Guard, id, amount int64) error {
	for attempt := 0; attempt < 3; attempt++ {
		token, release, err := locks.Acquire(ctx, fmt.Sprintf("account/%d", id))
		if err != nil {
			return err
		}
		err = func() error {
			defer release()
			var balance int64
			err := g.Read(ctx, db, `SELECT balance FROM account WHERE id = $1`, []any{id}, &balance)
			if err != nil {
				return err
			}
			cond, args, err := g.Kind.Cond("fence", "balance", 4, token, balance)
			if err != nil {
				return err // a Kind the package does not know: nothing is written
			}
			return g.Write(ctx, db, `UPDATE account SET balance = $1, fence = GREATEST(fence, $3) WHERE id = $2 AND `+cond,
				append([]any{balance + amount, id, token}, args...)...)
		}()
		if !errors.Is(err, guard.ErrStale) && !errors.Is(err, guard.ErrChanged) {
			return err // nil, or an error the guard did not decide: the write may have landed
		}
		// Refused: the lock was granted to another meanwhile. Start over.
	}
	return errors.New("deposit: refused three times: the lock's leases are too short for this service's pauses")
}

// A service registers the guard's metrics on its own registry, serves them,
// and writes through a Guard named for the lock.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := guard.NewMetrics(reg)
	if err != nil {
		panic(err)
	}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	g := guard.Guard{Kind: guard.Fence, Lock: "accounts", Metrics: m}
	serve := func(ctx context.Context, db *pgxpool.Pool, locks locker) error {
		return deposit(ctx, db, locks, g, 42, 100)
	}
	_ = serve
}
