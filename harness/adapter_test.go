package harness_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/adapter"
	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/client"
	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
	"github.com/hiatus-dev/hiatus/nemesis"
	"github.com/hiatus-dev/hiatus/store"
)

// adapterRun runs a short experiment on the lock adapter command.
func adapterRun(t *testing.T, command string, edit func(*harness.Config)) (harness.Result, string, error) {
	t.Helper()
	cfg := harness.DefaultConfig()
	cfg.Lock, cfg.Store = "exec:"+command, t.TempDir()
	cfg.TimeLimit, cfg.Nemesis, cfg.Workers = 2*time.Second, "none", 2
	edit(&cfg)
	var out bytes.Buffer
	res, err := harness.RunWatched(context.Background(), cfg, harness.Watch{Out: &out})
	return res, out.String(), err
}

// TestRunAdapterFrozenWithWorker: redis-semaphore's Mutex refreshes its own
// lease from the adapter process. A pause of the worker's thread alone
// (sleep) leaves it refreshing, and nothing is lost; a pause of the
// application (stop: the worker and its adapter, one process group)
// freezes the refresh too, the lease lapses, and updates are lost. The
// difference is the adapter frozen with its worker.
func TestRunAdapterFrozenWithWorker(t *testing.T) {
	root, _ := filepath.Abs("..")
	if _, err := os.Stat(filepath.Join(root, "adapters/node/node_modules/redis-semaphore")); err != nil {
		t.Fatalf("the Node adapters need their npm packages (scripts/setup --tests installs them): %v", err)
	}
	for _, kind := range []history.Keyword{nemesis.KindSleep, nemesis.KindStop} {
		command, mark := adaptertest.Marked("node " + filepath.Join(root, "adapters/node/redis-semaphore.js"))
		res, out, err := adapterRun(t, command, func(c *harness.Config) {
			// A lease Node's refresh keeps on a loaded machine; a pause
			// twice as long, which a frozen refresh cannot survive.
			c.Lease, c.Pause, c.InjectEvery, c.PauseKind, c.Work = time.Second, 2*time.Second, 3, kind, 5*time.Millisecond
			c.TimeLimit = 5 * time.Second
		})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		f, _ := res.Results.LockFigures()
		switch {
		case kind == "sleep" && (res.Results.Valid != checker.Valid || f.Writes < 1):
			t.Errorf("sleep: valid? %v with %d writes, want valid: the adapter kept refreshing", res.Results.Valid, f.Writes)
		case kind == "stop" && f.LostMin < 1:
			t.Errorf("stop: %d lost, want some: the adapter was frozen with its worker and its lease lapsed", f.LostMin)
		}
		if !strings.Contains(out, "lock adapter: node-redis-semaphore 1 (redis-semaphore") {
			t.Errorf("the run's output does not say what the adapter is:\n%s", out)
		}
		if left := adaptertest.Leftovers(mark); len(left) > 0 {
			t.Errorf("%s: processes left behind: %v", kind, left)
		}
	}
}

// TestRunAdapterMisbehaves: an adapter that cannot start is a setup error
// with what it wrote; one that dies, breaks the protocol or stops answering
// mid-run ends its worker with a word on the terminal, its request in
// flight :info, and the run goes on to a history that checks; nothing it
// started is left behind.
func TestRunAdapterMisbehaves(t *testing.T) {
	t.Parallel() // it waits on adapters that die, hang and say nothing, as the other parallel tests sleep
	command, mark := adaptertest.Marked(adaptertest.Command("exit"))
	_, _, err := adapterRun(t, command, func(*harness.Config) {})
	var se *harness.SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "exiting at start, as asked") || !strings.Contains(err.Error(), "did not say hello") {
		t.Errorf("an adapter that exits at start: %v, want a SetupError with its words", err)
	}
	command, mark = adaptertest.Marked(adaptertest.Command("hang"))
	_, _, err = adapterRun(t, command, func(c *harness.Config) { c.AdapterHello = time.Second })
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "did not say hello: no answer in time (1s)") {
		t.Errorf("an adapter that never says hello, with --adapter-hello 1s: %v, want a SetupError that says so", err)
	}
	if left := adaptertest.Leftovers(mark); len(left) > 0 {
		t.Errorf("hang: processes left behind: %v", left)
	}
	for _, tc := range []struct{ mode, said string }{
		{"die-after=4", "exited (status 4)"},
		{"garbage-after=4", "which is no answer"},
		{"mute-after=4", ""},
	} {
		command, mark = adaptertest.Marked(adaptertest.Command(tc.mode))
		res, out, err := adapterRun(t, command, func(c *harness.Config) { c.OpTimeout = 300 * time.Millisecond })
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		if tc.said != "" && (!strings.Contains(out, "ended early") || !strings.Contains(out, tc.said)) {
			t.Errorf("%s: the run's output does not say why its workers ended:\n%s", tc.mode, out)
		}
		ops := readOps(t, res.Dir)
		infos := 0
		for _, o := range ops {
			if o.IsClient() && o.F == history.FAcquire && o.Type == history.Info {
				infos++
			}
		}
		if infos < 1 {
			t.Errorf("%s: no acquire completed :info, yet each worker's 4th went unanswered", tc.mode)
		}
		if res.Results.Valid == checker.Unknown && !strings.Contains(fmt.Sprint(res.Results.Checks), "final") {
			t.Errorf("%s: the history does not check: %+v", tc.mode, res.Results.Checks)
		}
		if left := adaptertest.Leftovers(mark); len(left) > 0 {
			t.Errorf("%s: processes left behind: %v", tc.mode, left)
		}
	}
}

// TestRunAdapterPausedInFlight: a SIGSTOP of a worker and its adapter
// (1 s) far longer than --op-timeout (300 ms) lands, most times, while an
// acquire is in flight. The time both were stopped does not count against
// the request: the answer that comes as they wake is taken, not dropped
// as late with the op made :info.
func TestRunAdapterPausedInFlight(t *testing.T) {
	command, mark := adaptertest.Marked(adaptertest.Command("setnx"))
	res, _, err := adapterRun(t, command, func(c *harness.Config) {
		c.Nemesis, c.Pause, c.Interval, c.OpTimeout, c.TimeLimit = "sigstop", time.Second, 200*time.Millisecond, 300*time.Millisecond, 4*time.Second
		c.Workers = 3
	})
	if err != nil {
		t.Fatal(err)
	}
	ops := readOps(t, res.Dir)
	pauses := 0
	for _, o := range ops {
		switch {
		case o.Process == history.Nemesis && o.F == history.FPause:
			pauses++
		case o.IsClient() && o.Type == history.Info:
			t.Errorf("op %d (%s) is :info: %v", o.Index, o.F, o.Error)
		}
	}
	log, _ := os.ReadFile(filepath.Join(res.Dir, store.Log))
	if strings.Contains(string(log), "after hiatus had given up") {
		t.Errorf("answers dropped as late:\n%s", log)
	}
	if pauses < 2 {
		t.Errorf("%d pauses in %v: want several", pauses, 4*time.Second)
	}
	if left := adaptertest.Leftovers(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// TestRunAdapterLeavesNothing: an adapter that floods its standard error
// and leaves a daemon behind (setsid, as a library's helper might) fills
// hiatus.log with no more than its budget a process, and what it left —
// its probe's, each worker's — is killed at the run's end and said.
func TestRunAdapterLeavesNothing(t *testing.T) {
	const flood = 4 << 20
	command, mark := adaptertest.Marked(fmt.Sprintf(`sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & yes flooding the log | head -c %d >&2; exec %s'`,
		flood, adaptertest.Command("setnx")))
	t.Cleanup(func() {
		for pid := range adaptertest.Leftovers(mark) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	res, out, err := adapterRun(t, command, func(*harness.Config) {})
	if err != nil {
		t.Fatal(err)
	}
	if left := adaptertest.Leftovers(mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	for _, want := range []string{"lock adapter: started for its hello, it left 1 process (pid ",
		"lock adapters left 2 processes (pid ", "sleep 300) running after their workers ended: killed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the run's output lacks %q:\n%s", want, out)
		}
	}
	log, err := os.ReadFile(filepath.Join(res.Dir, store.Log))
	if err != nil {
		t.Fatal(err)
	}
	if len(log) > 1<<20 {
		t.Errorf("hiatus.log has %d bytes: its 2 workers' adapters wrote %d each on stderr, and the log takes %d of each", len(log), flood, adapter.StderrBudget)
	}
	if n := strings.Count(string(log), "past the 65536 the log takes of one adapter; dropped"); n != 2 {
		t.Errorf("hiatus.log says %d times what was dropped, want once for each worker's adapter", n)
	}
}

// TestRunAdapterOutsideProtocol: a grant out of the protocol — a fence of
// 0 from an adapter whose hello says fencing, a lease of -1000 ms — is
// recorded as the adapter's fault, an acquire of unknown outcome (:info)
// that says what was wrong, never as a grant without its fence or lease.
func TestRunAdapterOutsideProtocol(t *testing.T) {
	for _, tc := range []struct {
		name         string
		hello, grant adaptertest.Fields
		want         string
	}{
		{"fence 0", adaptertest.Fields{"fencing": true}, adaptertest.Fields{"fence": 0}, "an answer outside the protocol: fence 0"},
		{"negative lease", nil, adaptertest.Fields{"lease_ms": -1000}, "an answer outside the protocol: lease_ms -1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			command, mark := adaptertest.Marked(adaptertest.CommandWith("setnx", tc.hello, tc.grant))
			res, _, err := adapterRun(t, command, func(c *harness.Config) { c.Guard = client.GuardFence })
			if err != nil {
				t.Fatal(err)
			}
			ops := readOps(t, res.Dir)
			infos := 0
			for _, o := range ops {
				switch {
				case !o.IsClient() || o.F != history.FAcquire:
				case o.Type == history.Ok:
					t.Errorf("op %d: an acquire recorded :ok (fence %v, lease %v), yet every grant was out of the protocol", o.Index, o.Extra[history.KeyFence], o.Extra[history.KeyLeaseMS])
				case o.Type == history.Info && strings.Contains(fmt.Sprint(o.Error), tc.want):
					infos++
				}
			}
			if infos == 0 {
				t.Errorf("no acquire recorded :info with %q", tc.want)
			}
			if left := adaptertest.Leftovers(mark); len(left) > 0 {
				t.Errorf("processes left behind: %v", left)
			}
		})
	}
}
