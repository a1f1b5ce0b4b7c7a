package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/store"
)

// TestNemeses runs each fault against throwaway servers of the run's own
// (the kills restart them) and checks its effect in the history. A fault
// whose effect needs time after it ends (a restarted server, a replacement
// worker) is not given a time limit to show it in, which a loaded machine
// may not meet: its run goes on until the journal shows the effect, and is
// then interrupted.
func TestNemeses(t *testing.T) {
	for _, tc := range []struct {
		nemesis string
		check   func(t *testing.T, ops []history.Op)
		until   func(ops []history.Op) bool // when set, the run is interrupted once it holds
	}{
		{"pause-redis", func(t *testing.T, ops []history.Op) {
			// Requests wait for the paused server past --op-timeout.
			if n := count(ops, func(o history.Op) bool { return o.IsClient() && (o.Type == history.Info || o.Type == history.Fail) }); n == 0 {
				t.Errorf("no client op failed or timed out while Redis was paused")
			}
		}, nil},
		{"pause-postgres", func(t *testing.T, ops []history.Op) {
			if !pgTimedOut(ops) {
				t.Errorf("no read or write failed or timed out while Postgres was paused")
			}
			// Writes that timed out are settled from the audit table.
			if n := count(ops, func(o history.Op) bool { return o.F == "write" && o.Type == history.Info }); n > 0 {
				t.Errorf("%d :info writes left unresolved", n)
			}
			if n := count(ops, func(o history.Op) bool { return o.Get("resolved") != nil }); n == 0 {
				t.Logf("no write needed resolving this time")
			}
		}, pgTimedOut}, // a loaded machine's pauses may find no one in PostgreSQL for a while
		{"kill-redis", func(t *testing.T, ops []history.Op) {
			if !writeAfterRestart(ops) {
				t.Errorf("no write succeeded after Redis was restarted")
			}
		}, writeAfterRestart},
		{"kill-postgres", func(t *testing.T, ops []history.Op) {
			if !writeAfterRestart(ops) {
				t.Errorf("no write succeeded after Postgres was restarted")
			}
		}, writeAfterRestart},
		{"kill-worker", func(t *testing.T, ops []history.Op) {
			if !replacementWrote(ops) {
				t.Errorf("no replacement worker wrote")
			}
		}, replacementWrote},
	} {
		t.Run(tc.nemesis, func(t *testing.T) {
			t.Parallel()
			args := []string{"--nemesis", tc.nemesis, "--interval", "400ms",
				"--pause", "400ms", "--op-timeout", "200ms", "--lease", "300ms", "--work", "5ms", "--seed", "3"}
			var code int
			var dir, res string
			if tc.until != nil {
				code, dir, res = runUntil(t, tc.until, args...)
				if code != exitInterrupted {
					t.Fatalf("exit %d, want %d (interrupted once the effect showed)", code, exitInterrupted)
				}
			} else {
				code, dir, res = runIn(t, append(args, "--time-limit", "2500ms")...)
				if code > exitUnknown {
					t.Fatalf("exit %d, want a verdict", code)
				}
			}
			ops, err := history.ReadFile(filepath.Join(dir, store.History))
			if err != nil {
				t.Fatal(err)
			}
			begins := count(ops, func(o history.Op) bool { return !o.IsClient() && (o.F == "pause" || o.F == "kill") })
			ends := count(ops, func(o history.Op) bool { return !o.IsClient() && (o.F == "resume" || o.F == "restart") })
			if begins == 0 || begins != ends {
				t.Errorf("%d faults begun and %d ended, want as many and more than 0", begins, ends)
			}
			if figure(t, res, "faults") != int64(begins) {
				t.Errorf("results count %d faults, the history %d", figure(t, res, "faults"), begins)
			}
			// hiatus.log tells what the run did: the servers, each worker,
			// each fault; the throwaway servers' own logs are kept.
			log, err := os.ReadFile(filepath.Join(dir, store.Log))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"redis-server: throwaway, pid", "postgres: throwaway, pid", "worker 0: started as process 0",
				"worker 2 (pid "} {
				if !strings.Contains(string(log), want) {
					t.Errorf("hiatus.log lacks %q:\n%s", want, log)
				}
			}
			if n := strings.Count(string(log), "nemesis: pause {") + strings.Count(string(log), "nemesis: kill {"); n != begins {
				t.Errorf("hiatus.log names %d faults begun, the history %d:\n%s", n, begins, log)
			}
			for _, name := range []string{store.RedisLog, store.PostgresLog} {
				if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
					t.Errorf("the run kept no %s: %v", name, err)
				}
			}
			tc.check(t, ops)
		})
	}
}

func count(ops []history.Op, f func(history.Op) bool) int {
	n := 0
	for _, o := range ops {
		if f(o) {
			n++
		}
	}
	return n
}

// writeAfterRestart reports whether a write succeeded after the first
// restart of a server.
func writeAfterRestart(ops []history.Op) bool {
	at := restartTime(ops)
	return count(ops, func(o history.Op) bool {
		return o.IsClient() && o.Type == history.Ok && o.F == "write" && o.Time > at
	}) > 0
}

// pgTimedOut reports whether a read or write failed or timed out after a
// pause began (a loaded machine's PostgreSQL can be slower than the op
// timeout unpaused): in a history, a timed-out write the audit table
// settled :ok carries :resolved.
func pgTimedOut(ops []history.Op) bool {
	i := slices.IndexFunc(ops, func(o history.Op) bool { return o.Process == history.Nemesis && o.F == history.FPause })
	if i < 0 {
		return false
	}
	return count(ops[i:], func(o history.Op) bool {
		return o.IsClient() && (o.F == "read" || o.F == "write") && o.Type != history.Invoke &&
			(o.Type != history.Ok || o.Get("resolved") != nil)
	}) > 0
}

// replacementWrote reports whether a worker started in place of a killed one
// wrote: it records under a process number past the first three workers'.
func replacementWrote(ops []history.Op) bool {
	return count(ops, func(o history.Op) bool { return o.IsClient() && o.Process >= 3 && o.F == "write" }) > 0
}

// runUntil runs hiatus as a real process with no time limit to speak of,
// interrupts it once its journal's ops satisfy until, and returns its exit
// status, run directory and results.edn. A run that ends by itself first
// fails the test with its exit status.
func runUntil(t *testing.T, until func([]history.Op) bool, args ...string) (code int, dir, results string) {
	t.Helper()
	cmd, root := startRun(t, append(args, "--time-limit", "10m")...)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	dir = waitJournalOps(t, root, until, exited)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := <-exited
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, store.Results))
	if err != nil {
		t.Fatal(err)
	}
	return code, dir, string(b)
}

// waitJournalOps waits until the ops of the newest run's journal satisfy
// until, and returns the run directory. It fails the test if the run exits
// first, or (so that a run that never shows it fails instead of hanging)
// after two minutes; the test's cleanup then interrupts the run.
func waitJournalOps(t *testing.T, root string, until func([]history.Op) bool, exited <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if dir, err := filepath.EvalSymlinks(filepath.Join(root, "latest")); err == nil {
			if f, err := os.Open(filepath.Join(dir, store.Journal)); err == nil {
				ops, _ := history.ReadAll(f, "journal") // it may end mid-line: the ops before count
				f.Close()
				if until(ops) {
					return dir
				}
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) before its journal showed the fault's effect", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("the journal never showed the fault's effect")
	return ""
}

// restartTime is the time of the first restart event, or the end.
func restartTime(ops []history.Op) int64 {
	for _, o := range ops {
		if o.F == "restart" {
			return o.Time
		}
	}
	return 1 << 62
}

// startRun starts `hiatus run` as a real process (this test binary, run as
// hiatus) and returns it with the store it writes to.
func startRun(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], append([]string{"run", "--store", root}, args...)...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// A group of its own, as a shell gives a command: a test can send it
	// a terminal's Ctrl-C, which reaches the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A run still going when its test ends is interrupted, so that it
		// removes its throwaway servers' directories, and killed only if it
		// does not end. A run already waited for refuses the signals.
		if cmd.Process.Signal(syscall.SIGINT) != nil {
			return
		}
		for range 600 {
			if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	return cmd, root
}

// waitJournal waits until the journal of the run cmd started holds a line
// containing s, and returns the run directory; it fails when the run ends
// first. It sets no deadline of its own: under two CPU burners and the
// suite, a run's throwaway servers took more than the 20 s it once allowed
// to start, and a run that hangs is the suite's timeout's to catch.
func waitJournal(t *testing.T, cmd *exec.Cmd, root, s string) string {
	t.Helper()
	for {
		dir, err := filepath.EvalSymlinks(filepath.Join(root, "latest"))
		if err == nil && journalHolds(filepath.Join(dir, store.Journal), s) {
			return dir
		}
		if st := procState(cmd.Process.Pid); st == "" || st == "Z" {
			t.Fatalf("the run ended, and its journal never showed %q", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// journalHolds says the journal at path has a line containing s.
func journalHolds(path, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}

// journalPIDs returns the worker PIDs the nemesis named in the journal.
func journalPIDs(t *testing.T, dir string) []int {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, store.Journal))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, _ := history.ReadAll(f, "journal") // it may end mid-line: the ops before count
	var pids []int
	for _, o := range ops {
		if v, ok := o.Value.(map[history.Keyword]any); ok {
			if pid, ok := history.Int(v["pid"]); ok {
				pids = append(pids, int(pid))
			}
		}
	}
	return pids
}

// gone waits until none of pids runs, and fails for any stopped or alive
// after a few seconds.
func gone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for procState(pid) != "" && procState(pid) != "Z" && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if st := procState(pid); st != "" && st != "Z" {
			t.Errorf("worker pid %d still there, state %s", pid, st)
		}
	}
}

// TestInterrupt: SIGINT while a worker is stopped by the nemesis. The run
// resumes it, stops the workers, writes the history and results, and exits
// with 130, long before its time limit would have ended it; no worker is
// left, stopped or not.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	const limit = time.Minute
	cmd, root := startRun(t, "--nemesis", "sigstop", "--pause", "5s", "--interval", "300ms", "--time-limit", limit.String())
	dir := waitJournal(t, cmd, root, ":f :pause")
	pids := journalPIDs(t, dir)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("exit %v, want %d", err, exitInterrupted)
	}
	if d := time.Since(start); d > limit/2 {
		t.Errorf("took %v to end after SIGINT: the interrupt did not end the %v run", d, limit)
	}
	gone(t, pids)
	if _, err := os.Stat(filepath.Join(dir, store.Results)); err != nil {
		t.Errorf("no results after an interrupt: %v", err)
	}
	ops, err := history.ReadFile(filepath.Join(dir, store.History))
	if err != nil {
		t.Fatal(err)
	}
	if count(ops, func(o history.Op) bool { return o.F == "resume" }) == 0 {
		t.Errorf("the stopped worker's resume is not in the history")
	}
}

// TestKill9: SIGKILL of `hiatus run` itself. The workers die with it (none
// left stopped), and the journal it leaves is checkable: never valid, since
// the run has no final read.
func TestKill9(t *testing.T) {
	t.Parallel()
	cmd, root := startRun(t, "--nemesis", "sigstop", "--pause", "2s", "--interval", "200ms", "--time-limit", "30s")
	dir := waitJournal(t, cmd, root, ":f :pause")
	time.Sleep(300 * time.Millisecond)
	pids := journalPIDs(t, dir)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	gone(t, pids)

	code, out, errOut := hiatus(t, "check", dir)
	if code != exitUnknown && code != exitInvalid {
		t.Errorf("check of a killed run: exit %d, want %d or %d\n%s%s", code, exitUnknown, exitInvalid, out, errOut)
	}
}

// TestKill9Netns: SIGKILL of `hiatus run --hosts netns` while a worker's
// host is cut off. Every process on the run's hosts — workers, the lock's
// Redis node, PostgreSQL — dies with it; the namespaces it leaves, named
// with its PID, hold no process, and the next run, even a plain one
// without namespaces, removes them.
func TestKill9Netns(t *testing.T) {
	cmd, prefix, spaces := startIsolating(t)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for in := inNamespaces(t, spaces); len(in) > 0; in = inNamespaces(t, spaces) {
		if time.Now().After(deadline) {
			t.Fatalf("processes still on the killed run's hosts: %v", in)
		}
		time.Sleep(20 * time.Millisecond) // a poll for their deaths, bounded by the deadline
	}
	if left := namespaces(t, prefix); len(left) == 0 {
		t.Fatal("the killed run left no namespace: nothing for the next run to clean") // the test would prove nothing
	}
	// The next run is a plain one, on this machine: it cleans all the same.
	if code, out, errOut := hiatus(t, "run", "--store", t.TempDir(), "--time-limit", "1s", "--nemesis", "none", "--lease", "10s"); code != exitValid {
		t.Fatalf("the next run: exit %d\n%s%s", code, out, errOut)
	}
	if left := namespaces(t, prefix); len(left) > 0 {
		t.Errorf("namespaces left after the next run's clean-up: %v", left)
	}
	out, err := exec.Command("ip", "-o", "link").CombinedOutput()
	if err != nil || strings.Contains(string(out), prefix) {
		t.Errorf("links left after the next run's clean-up (%v):\n%s", err, out)
	}
}

// TestCtrlCNetns: an impatient user's Ctrl-C, again and again, to the
// terminal's whole process group, while `hiatus run --hosts netns` cuts a
// worker off and while it undoes its network. The run ends interrupted
// (130) and leaves no namespace and no process on its hosts: the commands
// that make and undo the network are in groups of their own, as the
// servers and workers are.
func TestCtrlCNetns(t *testing.T) {
	cmd, prefix, spaces := startIsolating(t)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			select {
			case err = <-exited:
				return
			case <-tick.C:
			}
		}
	}()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("exit %v, want %d", err, exitInterrupted)
	}
	if left := namespaces(t, prefix); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
	if in := inNamespaces(t, spaces); len(in) > 0 {
		t.Errorf("processes left on the run's hosts: %v", in)
	}
}

// startIsolating starts `hiatus run --hosts netns --nemesis isolate` and
// waits for its first cut; it returns the run, the prefix of its
// namespaces' names and the namespaces.
func startIsolating(t *testing.T) (*exec.Cmd, string, map[string]uint64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("NOT RUN: --hosts netns needs root (CI runs as root)")
	}
	cmd, root := startRun(t, "--hosts", "netns", "--nemesis", "isolate", "--pause", "2s", "--interval", "200ms", "--time-limit", "30s")
	waitJournal(t, cmd, root, ":f :start")
	prefix := fmt.Sprintf("hz%d-", cmd.Process.Pid)
	spaces := namespaces(t, prefix)
	if len(spaces) != 6 {
		t.Fatalf("the run's namespaces: %v, want the switch's, PostgreSQL's, the lock node's and three workers'", spaces)
	}
	return cmd, prefix, spaces
}

// namespaces maps the named network namespaces whose names begin with
// prefix to their inodes.
func namespaces(t *testing.T, prefix string) map[string]uint64 {
	t.Helper()
	entries, err := os.ReadDir("/var/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/var/run/netns", e.Name()), &st); err == nil {
			out[e.Name()] = st.Ino
		}
	}
	return out
}

// inNamespaces lists the processes in any of spaces, by PID and name.
func inNamespaces(t *testing.T, spaces map[string]uint64) map[int]string {
	t.Helper()
	want := map[string]string{}
	for name, ino := range spaces {
		want[fmt.Sprintf("net:[%d]", ino)] = name
	}
	out := map[int]string{}
	links, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, l := range links {
		target, err := os.Readlink(l)
		if err != nil {
			continue // gone meanwhile
		}
		if ns, ok := want[target]; ok {
			pid, _ := strconv.Atoi(strings.Split(l, "/")[2])
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			out[pid] = strings.TrimSpace(string(comm)) + " in " + ns
		}
	}
	return out
}

// TestCtrlCStartUp: a terminal's Ctrl-C, to the whole process group, while
// `hiatus run` starts its throwaway PostgreSQL (initdb, then the server).
// The run ends interrupted (130), not as a server that cannot start (254),
// and leaves no server, process or temporary directory behind: initdb and
// the servers are in groups of their own, and hiatus ends them.
func TestCtrlCStartUp(t *testing.T) {
	// A TMPDIR of its own, which PostgreSQL's user (as root, postgres) can
	// enter, as it can /tmp.
	tmp, err := os.MkdirTemp("", "hiatus-startup-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "run", "--store", root, "--time-limit", "1s")
	cmd.Env = append(os.Environ(), asMainEnv+"=1", "TMPDIR="+tmp)
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errOut, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The throwaway Redis starts first, then PostgreSQL: once a child of
	// hiatus is initdb or postgres, it is starting PostgreSQL.
	var starting string
	for starting == "" {
		for _, pid := range childrenOf(cmd.Process.Pid) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if c := strings.TrimSpace(string(comm)); c == "initdb" || c == "postgres" {
				starting = c
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) before it was seen starting PostgreSQL\n%s", err, errOut.String())
		default:
			time.Sleep(time.Millisecond) // a poll of /proc, not a guess at timing
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = <-exited
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("interrupted in %s: exit %v, want %d\n%s", starting, err, exitInterrupted, errOut.String())
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("interrupted in %s: left in TMPDIR: %v", starting, left)
	}
	if runs, _ := filepath.Glob(filepath.Join(root, "*", "2*")); len(runs) > 0 {
		t.Errorf("a run interrupted before it began made a run directory: %v", runs)
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(strings.Split(st, "/")[2])
			out = append(out, child)
		}
	}
	return out
}
