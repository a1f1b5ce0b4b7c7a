package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/store"
)

// figure returns an integer field of the lock-counter check in results.edn.
func figure(t *testing.T, results, key string) int64 {
	t.Helper()
	for _, line := range strings.Split(results, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, ":"+key+" "); ok {
			n, err := strconv.ParseInt(strings.TrimRight(rest, ",}"), 10, 64)
			if err != nil {
				t.Fatalf("%s in results.edn: %v", key, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in results.edn:\n%s", key, results)
	return 0
}

// lockCounter is the lock-counter verdict of ops, as a run reaches it.
func lockCounter(t *testing.T, ops []history.Op) checker.Results {
	t.Helper()
	rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// lockCounterWith checks ops as lockCounter does, held to the lock
// server's record that the run directory dir keeps (its 3 workers'), as
// the run checked them.
func lockCounterWith(t *testing.T, ops []history.Op, dir string) checker.Results {
	t.Helper()
	rec, err := checker.ReadRecord(filepath.Join(dir, store.LockServer), 3)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := checker.Check(context.Background(), ops, checker.Options{Model: checker.ModelLockCounter, Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// runIn runs `hiatus run` with args into a store of its own and returns its
// exit status, the run directory and results.edn.
func runIn(t *testing.T, args ...string) (code int, dir, results string) {
	t.Helper()
	root := t.TempDir()
	code, out, errOut := hiatus(t, append([]string{"run", "--store", root}, args...)...)
	t.Logf("hiatus run %s\n%s%s", strings.Join(args, " "), out, errOut)
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "latest"))
	if err != nil {
		t.Fatalf("no store/latest after the run: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, store.Results))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{store.History, store.Test, store.Log, store.Journal} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("run directory lacks %s: %v", name, err)
		}
	}
	return code, dir, string(b)
}

// TestRunEmbedded is the default a new user gets: no URLs, throwaway
// servers, a fault-free run that must be valid, with dense indexes and no
// overlapping section.
func TestRunEmbedded(t *testing.T) {
	t.Parallel()
	// A lease no stall of a loaded machine outlasts: beside two CPU burners
	// and the other tests, a 500 ms lease lost an update with no fault.
	code, dir, res := runIn(t, "--nemesis", "none", "--time-limit", "1s", "--work", "5ms", "--lease", "10s")
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	// Any write makes the verdict mean something; how many a second holds
	// is the machine's (8 under the race detector beside a soak run).
	if w := figure(t, res, "writes"); w < 1 {
		t.Errorf("no write in 1 s: nothing was checked")
	}
	for _, k := range []string{"lost-min", "lost-max", "overlapping-sections", "lock-overlapping-sections", "pauses"} {
		if n := figure(t, res, k); n != 0 {
			t.Errorf("%s = %d, want 0", k, n)
		}
	}
	ops, err := history.ReadFile(filepath.Join(dir, store.History))
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range ops {
		if o.Index != int64(i) {
			t.Fatalf("op %d has :index %d", i, o.Index)
		}
		if i > 0 && o.Time < ops[i-1].Time {
			t.Fatalf("op %d at %d before op %d at %d", i, o.Time, i-1, ops[i-1].Time)
		}
	}
}

// TestRunPauses runs real worker processes under each fault, against shared
// servers: an in-section pause longer than the lease loses updates unless
// the writes are fenced; SIGSTOP pauses are recorded and undone.
func TestRunPauses(t *testing.T) {
	for i, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, code int, res string)
	}{
		{"in-section unfenced", []string{"--nemesis", "none", "--inject-every", "3"},
			func(t *testing.T, code int, res string) {
				if code != 1 {
					t.Errorf("exit %d, want 1 (invalid)", code)
				}
				if n := figure(t, res, "lost-min"); n == 0 {
					t.Errorf("no update lost to pauses longer than the lease")
				}
				if n := figure(t, res, "overlapping-sections"); n == 0 {
					t.Errorf("no overlapping sections")
				}
			}},
		// Fencing guards the write, not the read of a read-modify-write: a
		// paused holder can still lose an update when it wakes just as the
		// next holder has read (docs/comparisons.md). What it guarantees is
		// that no write is accepted with a fence below one accepted before.
		{"in-section fenced", []string{"--nemesis", "none", "--inject-every", "3", "--fenced"},
			func(t *testing.T, code int, res string) {
				if code != 0 && code != 1 {
					t.Errorf("exit %d, want a verdict", code)
				}
				if n := figure(t, res, "fence-violations"); n != 0 {
					t.Errorf("%d writes accepted with a stale fence", n)
				}
				if n := figure(t, res, "stale-rejected"); n == 0 {
					t.Errorf("no stale write rejected")
				}
			}},
		{"sigstop", []string{"--nemesis", "sigstop", "--interval", "100ms"},
			func(t *testing.T, code int, res string) {
				if code != 0 && code != 1 {
					t.Errorf("exit %d, want a verdict", code)
				}
				if n := figure(t, res, "pauses"); n < 2 {
					t.Errorf("%d SIGSTOP pauses in 2 s, want at least 2", n)
				}
			}},
		{"sigstop past the time limit", []string{"--nemesis", "sigstop", "--interval", "1700ms", "--pause", "1s"},
			func(t *testing.T, code int, res string) {
				// The one pause begins at 1.7 s and is cut short when the run
				// ends at 2 s: the worker must have been resumed.
				if n := figure(t, res, "pauses"); n != 1 {
					t.Errorf("%d pauses, want 1", n)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
				"--name", fmt.Sprintf("t%d", i), "--counter-id", strconv.Itoa(100 + i),
				"--time-limit", "2s", "--lease", "100ms", "--pause", "300ms", "--work", "5ms", "--seed", "1"},
				tc.args...)
			code, dir, res := runIn(t, args...)
			tc.check(t, code, res)
			for _, pid := range pausedPIDs(t, dir) {
				if st := procState(pid); st == "T" || st == "t" {
					t.Errorf("worker pid %d left stopped after the run", pid)
				}
			}
			// run and check give the same verdict from the same history.
			ops, err := history.ReadFile(filepath.Join(dir, store.History))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(lockCounterWith(t, ops, dir).AppendEDN(nil)); got != res {
				t.Errorf("re-checking the history gives\n%s\nbut the run wrote\n%s", got, res)
			}
		})
	}
}

// TestRunBadFlags: bad configuration is refused before anything starts,
// with exit 254 and a message naming the flag.
func TestRunBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lease", "0s"}, "--lease"},
		{[]string{"--workers", "0"}, "--workers"},
		{[]string{"--nemesis", "chaos"}, "--nemesis"},
		{[]string{"--pause", "20s", "--time-limit", "1s"}, "--pause"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--redis-url", "redis://127.0.0.1:1/0", "--postgres-url", "postgres://u:secret@127.0.0.1:1/x"}, "cannot reach Redis"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := t.TempDir()
			code, out, errOut := hiatus(t, append([]string{"run", "--store", root}, tc.args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\n%s%s", code, exitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q does not name %q", errOut, tc.want)
			}
			if strings.Contains(out+errOut, "secret") {
				t.Errorf("a password was printed: %s%s", out, errOut)
			}
		})
	}
}

// pausedPIDs returns the PIDs the nemesis paused in a run.
func pausedPIDs(t *testing.T, dir string) []int {
	t.Helper()
	ops, err := history.ReadFile(filepath.Join(dir, store.History))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, o := range ops {
		v, _ := o.Value.(map[history.Keyword]any)
		if pid, ok := history.Int(v["pid"]); ok && o.F == "pause" {
			pids = append(pids, int(pid))
		}
	}
	return pids
}

// procState returns the state letter of a process from /proc, or "" when
// it is gone.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The state follows the command name, which is in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// TestRunRefusesWorkersItCannotSeat: more workers than PostgreSQL has
// sessions for is refused before anything starts, not run with fewer.
func TestRunRefusesWorkersItCannotSeat(t *testing.T) {
	code, _, stderr := hiatus(t, "run", "--store", t.TempDir(), "--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
		"--workers", "10000", "--time-limit", "1s", "--name", "seats", "--counter-id", "300")
	if code != exitUsage || !strings.Contains(stderr, "--workers 10000 needs about 10004 sessions") {
		t.Errorf("exit %d, stderr %q; want %d and the sessions it needs", code, stderr, exitUsage)
	}
}
