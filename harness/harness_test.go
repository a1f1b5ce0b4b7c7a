package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
)

// TestRunOwnLock: a run of a lock of the caller's own leaves the run
// directory `hiatus run` leaves, names the lock in test.edn, and its
// history, checked again, gives the verdict the run gave.
func TestRunOwnLock(t *testing.T) {
	res := runLock(t, "del-release")
	f, ok := res.Results.LockFigures()
	if !ok || !f.Counted || f.Writes < 1 || f.Sections < f.Writes { // any write: how many a second holds is the machine's
		t.Errorf("figures %+v: want a counted run with writes", f)
	}
	if res.Config.RedisURL == "" || res.Interrupted {
		t.Errorf("result config %+v, interrupted %v: want the throwaway server's URL, not interrupted", res.Config, res.Interrupted)
	}
	for _, name := range []string{store.History, store.Journal, store.Results, store.Test, store.Log, store.RedisLog, store.PostgresLog,
		report.LatencyRaw, report.LatencyQuantiles, report.Rate, report.TimelineFile} {
		if _, err := os.Stat(filepath.Join(res.Dir, name)); err != nil {
			t.Errorf("run directory lacks %s: %v", name, err)
		}
	}
	if page, err := os.ReadFile(filepath.Join(res.Dir, report.TimelineFile)); err != nil || !strings.Contains(string(page), "del-release, 3 workers") {
		t.Errorf("the timeline's header does not name the run's lock: %v", err)
	}
	test, err := os.ReadFile(filepath.Join(res.Dir, store.Test))
	if err != nil || !strings.Contains(string(test), ":lock :del-release") {
		t.Errorf("test.edn %q (%v) does not name the lock", test, err)
	}
	ops := readOps(t, res.Dir)
	if n := countWrites(ops); int64(n) != f.Writes {
		t.Errorf("history has %d ok writes, results say %d", n, f.Writes)
	}
}

// runLock runs the lock of this test binary called lock for a second,
// without faults, on throwaway servers.
func runLock(t *testing.T, lock string) harness.Result {
	t.Helper()
	cfg := harness.DefaultConfig()
	cfg.Lock, cfg.Store = lock, t.TempDir()
	// A lease no loaded machine's section outlives: beside two CPU
	// burners a section of the default 500 ms lease took 583 ms, and
	// TestRunChattyLock's run was rightly invalid.
	cfg.TimeLimit, cfg.Nemesis, cfg.Lease = time.Second, "none", 5*time.Second
	res, err := lab.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func countWrites(ops []history.Op) int {
	n := 0
	for _, o := range ops {
		if o.IsClient() && o.F == history.FWrite && o.Type == history.Ok {
			n++
		}
	}
	return n
}

// TestRunRefusesBadConfig: a lock nobody registered, or a bad setting, is a
// SetupError before anything starts; nothing is written.
func TestRunRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		edit func(*harness.Config)
		want string
	}{
		{func(c *harness.Config) { c.Lock = "del-release" }, "--lock"}, // the lab's, not the zero Lab's
		{func(c *harness.Config) { c.Workers = 0 }, "--workers"},
		{func(c *harness.Config) { c.Lease = 1500 * time.Microsecond }, "whole milliseconds"},
		{func(c *harness.Config) { c.Workload = "queue" }, `--workload "queue": want one of counter, list-append`},
	} {
		cfg := harness.DefaultConfig()
		cfg.Store = t.TempDir()
		tc.edit(&cfg)
		_, err := harness.Run(context.Background(), cfg)
		var se *harness.SetupError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want a SetupError naming %q", err, tc.want)
		}
		if left, _ := os.ReadDir(cfg.Store); len(left) != 0 {
			t.Errorf("a refused run wrote %d entries into the store", len(left))
		}
	}
}

// chatty is the reference lock that prints a line to standard output at
// each acquire, as a lock being debugged would.
type chatty struct{ client.SetNX }

func newChatty(_ context.Context, c client.LockConfig) (client.Lock, error) {
	return &chatty{client.SetNX{Redis: c.Redis, Key: c.Key, Lease: c.Lease, Retry: c.Retry}}, nil
}

func (l *chatty) Acquire(ctx context.Context) (client.Grant, error) {
	g, err := l.SetNX.Acquire(ctx)
	if err == nil {
		fmt.Println("chatty: acquired", g.Token)
	}
	return g, err
}

// TestRunChattyLock: what a lock prints on standard output goes to the
// run's log and leaves the ops whole: the run is counted and nothing is
// missing.
func TestRunChattyLock(t *testing.T) {
	res := runLock(t, "chatty")
	f, _ := res.Results.LockFigures()
	if res.Results.Valid != checker.Valid || f.Writes == 0 {
		t.Errorf("valid? %v with %d writes, want a valid run with writes: %s", res.Results.Valid, f.Writes, res.Results.AppendEDN(nil))
	}
	log, err := os.ReadFile(filepath.Join(res.Dir, store.Log))
	if err != nil || !strings.Contains(string(log), "chatty: acquired") {
		t.Errorf("hiatus.log (%v) lacks what the lock printed", err)
	}
}
