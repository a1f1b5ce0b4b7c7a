package harness_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
	"github.com/redis/go-redis/v9"
)

// delLock is a lock of a user's own, with a classic bug: it releases with a
// plain DEL, so a holder whose lease expired deletes its successor's lock.
type delLock struct {
	rdb   *redis.Client
	key   string
	lease time.Duration
}

func (l *delLock) Acquire(ctx context.Context) (client.Grant, error) {
	for {
		ok, err := l.rdb.SetNX(context.WithoutCancel(ctx), l.key, "held", l.lease).Result()
		if err != nil {
			return client.Grant{}, err
		}
		if ok {
			return client.Grant{Token: "held", Lease: l.lease}, nil
		}
		select {
		case <-ctx.Done():
			return client.Grant{}, client.ErrGaveUp
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (l *delLock) Release(ctx context.Context, _ client.Grant) error {
	return l.rdb.Del(ctx, l.key).Err()
}

// lab runs this test binary's own locks beside hiatus's: declared once,
// for the runs and for their workers.
var lab = harness.Lab{Locks: []client.LockKind{
	{Name: "del-release", Store: client.OnRedis, New: func(_ context.Context, c client.LockConfig) (client.Lock, error) {
		return &delLock{rdb: c.Redis, key: c.Key, lease: c.Lease}, nil
	}},
	{Name: "chatty", Store: client.OnRedis, New: newChatty}, // harness_test.go
}}

// TestMain lets the test binary serve as the workers of the runs its tests
// start: Run starts them as this same binary. When the tests have passed,
// it fails the package if their runs left anything behind (leftBehind):
// the tests that run beside others cannot tell which left what, so it is
// checked once they have all ended.
func TestMain(m *testing.M) {
	adaptertest.Serve() // the runs' misbehaving lock adapters, too
	lab.ServeWorker()
	before, err := listeners()
	if err != nil {
		fmt.Fprintln(os.Stderr, "count this process's listeners:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if left := leftBehind(before); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: the package's runs left behind:\n%s\n", strings.Join(left, "\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// A lock of your own, under the in-section pause of `hiatus run
// --inject-every 3 --pause 300ms --lease 100ms`: a holder that stalls past
// its lease loses an update, and hiatus proves it from the history.
func Example() {
	store, err := os.MkdirTemp("", "hiatus-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(store)

	cfg := harness.DefaultConfig() // throwaway redis-server and PostgreSQL
	cfg.Lock = "del-release"
	cfg.Store = store
	cfg.TimeLimit, cfg.Lease, cfg.Work = 2*time.Second, 100*time.Millisecond, 5*time.Millisecond
	cfg.Nemesis, cfg.InjectEvery, cfg.Pause = "none", 3, 300*time.Millisecond
	res, err := lab.Run(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	f, _ := res.Results.LockFigures()
	fmt.Println("valid?", res.Results.Valid)
	fmt.Println("updates lost:", f.LostMin > 0)
	// Output:
	// valid? false
	// updates lost: true
}
