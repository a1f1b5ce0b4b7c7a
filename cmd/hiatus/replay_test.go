package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/store"
	"golang.org/x/crypto/ssh"
)

// TestReplayShrinkAdapterWords: the new commands refuse what they cannot do
// with a word on what and where, and the exit status of bad input.
func TestReplayShrinkAdapterWords(t *testing.T) {
	root := t.TempDir()
	bad := filepath.Join(root, "bad-schedule.edn")
	if err := os.WriteFile(bad, []byte("{:faults [{:kind :sigstop}]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	notRun := filepath.Join(root, "not-a-run")
	if err := os.Mkdir(notRun, 0o755); err != nil {
		t.Fatal(err)
	}
	historyFile := writeFile(t, "history.edn", lockCounterInvalid)
	// A run killed with SIGKILL leaves its test.edn and journal, no more.
	killed := filepath.Join(root, "lock-counter", "20261201T000000.000Z")
	if err := os.MkdirAll(killed, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{store.Test: testEDN(3 * time.Second), store.Journal: lockCounterInvalid} {
		if err := os.WriteFile(filepath.Join(killed, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--store", root, "--schedule", filepath.Join(root, "none.edn")}, exitUsage, "--schedule"},
		{[]string{"run", "--store", root, "--schedule", bad}, exitUsage, "fault 1 of 1: :at-ms missing: want whole milliseconds"},
		{[]string{"run", "--store", root, "--lock", "exec:"}, exitUsage, "exec: needs the adapter's command"},
		{[]string{"run", "--store", root, "--lock", "exec:/nonexistent/adapter"}, exitUsage, "did not say hello"},
		{[]string{"replay", "--store", root}, exitUsage, "one run directory"},
		{[]string{"replay", "--store", root, notRun}, exitUsage, "replay wants a run directory"},
		// Flags after the run directory, as people type them.
		{[]string{"replay", notRun, "--store", root, "--runs", "2"}, exitUsage, "replay wants a run directory"},
		{[]string{"shrink", notRun, "--budget", "5m", "--store", root}, exitUsage, "shrink wants a run directory"},
		{[]string{"shrink", "--store", root, notRun}, exitUsage, "shrink wants a run directory"},
		{[]string{"replay", "--store", root, historyFile}, exitUsage, "replay wants a run directory (it holds test.edn and schedule.edn), not a history file: "},
		{[]string{"shrink", "--store", root, historyFile}, exitUsage, "not a history file"},
		{[]string{"replay", "--store", root, killed}, exitUsage, "no schedule.edn: the run ended before it wrote one (killed?)"},
		{[]string{"shrink", "--store", root, "--runs", "2", "--need", "3", notRun}, exitUsage, "--need must be 1 to --runs"},
		{[]string{"adapter", "check"}, exitUsage, "the adapter's command as one argument"},
		{[]string{"adapter", "check", "/nonexistent/adapter"}, exitInvalid, "FAIL  hello"},
		{[]string{"adapter", "check", "--adapter-store", "nowhere", "true"}, exitUsage, "want one of redis, redis-nodes, zookeeper"},
		// Three throwaway nodes, told as redis_urls: node-redlock takes a
		// majority of them.
		{[]string{"adapter", "check", "--adapter-store", "redis-nodes", "node ../../adapters/node/redlock.js"}, exitValid, "all 10 checks passed"},
		// A primary, its replica and three sentinels, told as sentinels:
		// node-redlock's client asks them for the primary.
		{[]string{"adapter", "check", "--adapter-store", "sentinel", "node ../../adapters/node/redlock.js"}, exitValid, "all 10 checks passed"},
		// An adapter whose hello does not say it follows them (it reads
		// redis_url alone) is refused: it would lock another Redis.
		{[]string{"adapter", "check", "--adapter-store", "sentinel", "node ../../adapters/node-redis-semaphore/main.js v5.3.1"}, exitInvalid, "did not say sentinel: true"},
		{[]string{"run", "--store", root, "--lock", "exec:true", "--adapter-store", "sentinel", "--nemesis", "restart"}, exitUsage, "only failover acts on them"},
		{[]string{"run", "--store", root, "--lock", "exec:true", "--nemesis", "failover", "--pause", "3s"}, exitUsage, "--adapter-store sentinel"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := hiatus(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			if !strings.Contains(out+errOut, tc.want) || strings.Contains(out+errOut, "<nil>") {
				t.Errorf("output %q does not say %q, or says <nil>", out+errOut, tc.want)
			}
		})
	}
}

// testEDN is the test.edn of a default run of the given length.
func testEDN(limit time.Duration) string {
	return fmt.Sprintf(`{:name "lock-counter", :lock :setnx, :workers 3, :time-limit-ms %d, :lease-ms 500, :work-ms 20,
 :retry-ms 5, :op-timeout-ms 5000, :nemesis "sigstop", :pause-ms 800, :interval-ms 700, :seed 1, :counter-id 1}`, limit.Milliseconds())
}

// TestShrinkBudget: a budget too short for one judgement of the run as it
// was ends the shrink within it, with a user's error, not after every
// replay of the judgement with an internal one.
func TestShrinkBudget(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "lock-counter", "20261201T000000.000Z")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		store.Test:     testEDN(4 * time.Second),
		store.Schedule: "{:faults [{:kind :sigstop, :at-ms 1000, :ms 800, :worker 1}]}\n",
		store.Results:  "{:valid? false, :lock-counter {:valid? false}}\n",
		store.History:  lockCounterInvalid,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(run, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// One replay lasts its 4 s time limit: a budget of 1 s ends inside the
	// first (or before it), where the judgement would go on to four.
	code, out, errOut := hiatus(t, "shrink", "--store", root, "--budget", "1s", run)
	if code != exitUsage || !strings.Contains(errOut, "the budget ran out after") || !strings.Contains(errOut, "while judging the run as it was") {
		t.Errorf("exit %d, want %d and words on the budget\n%s%s", code, exitUsage, out, errOut)
	}
	replays, _ := filepath.Glob(filepath.Join(root, "lock-counter-replay", "2*"))
	if len(replays) > 1 {
		t.Errorf("%d replays began in a budget shorter than one", len(replays))
	}
}

// failedRun makes the directory of a run that failed, under root, as a run
// leaves it, with test.edn and schedule.edn as given; it returns its path.
func failedRun(t *testing.T, root, test, schedule string) string {
	t.Helper()
	run := filepath.Join(root, "lock-counter", "20261201T000000.000Z")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{store.Test: test, store.Schedule: schedule,
		store.Results: "{:valid? false, :lock-counter {:valid? false}}\n", store.History: lockCounterInvalid} {
		if err := os.WriteFile(filepath.Join(run, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// oneSigstop is a schedule of one SIGSTOP of worker 1.
const oneSigstop = "{:faults [{:kind :sigstop, :at-ms 300, :ms 300, :worker 1}]}\n"

// TestReplayRunsNoCommandUnasked: a run directory whose test.edn names a
// lock adapter (here one edited to write a file, as `id > f` did) is
// refused by replay and shrink, before anything starts, with what it asks
// to run and the flag that allows it (exit 254); so is one named another
// way on the command line; and the command does not run. Named as it is,
// a real adapter (adapters/go-setnx) runs: the replay is made.
func TestReplayRunsNoCommandUnasked(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "ran")
	cfg := harness.DefaultConfig()
	cfg.Lock, cfg.TimeLimit = fmt.Sprintf(`exec:sh -c "id > %s"`, marker), time.Second
	run := failedRun(t, root, string(cfg.AppendEDN(nil)), oneSigstop)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"replay", "--runs", "1"}, []string{"test.edn asks to run the lock adapter command 'sh -c \"id > " + marker + "\"' (by /bin/sh -c",
			"add --lock 'exec:sh -c \"id > " + marker + "\"' to run it"}},
		{[]string{"shrink", "--runs", "1", "--need", "1", "--budget", "1m"}, []string{"asks to run the lock adapter command", "add --lock 'exec:sh -c"}},
		{[]string{"replay", "--runs", "1", "--lock", "exec:true"}, []string{"--lock exec:true is not", "must be it exactly"}},
		{[]string{"shrink", "--lock", "setnx"}, []string{"--lock setnx is not"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := hiatus(t, append(append(tc.args, "--store", root), run)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d\n%s%s", code, exitUsage, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not say %q", errOut, w)
				}
			}
			if _, err := os.Lstat(marker); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the run directory's command ran: %s is there (%v)", marker, err)
			}
		})
	}

	adapter := filepath.Join(t.TempDir(), "go-setnx")
	if b, err := exec.Command("go", "build", "-o", adapter, "../../adapters/go-setnx").CombinedOutput(); err != nil {
		t.Fatalf("build adapters/go-setnx: %v\n%s", err, b)
	}
	root = t.TempDir()
	cfg.Lock = "exec:" + adapter
	run = failedRun(t, root, string(cfg.AppendEDN(nil)), oneSigstop)
	code, out, errOut := hiatus(t, "replay", "--runs", "1", "--store", root, "--lock", cfg.Lock, run)
	if code != 0 && code != exitInvalid {
		t.Fatalf("allowed, exit %d, want 0 or 1\n%s%s", code, out, errOut)
	}
	tests, _ := filepath.Glob(filepath.Join(root, "lock-counter-replay", "2*", store.Test))
	if len(tests) != 1 {
		t.Fatalf("the replay left %d test.edn, want 1: %v", len(tests), tests)
	}
	if b, err := os.ReadFile(tests[0]); err != nil || !strings.Contains(string(b), adapter) {
		t.Errorf("the replay's test.edn %q (%v) does not name the adapter %s", b, err, adapter)
	}
}

// TestReplayReachesNoMachineUnasked: a run directory whose test.edn names an
// inventory of machines (--hosts ssh:FILE) is refused by replay and shrink
// unless --hosts names it too, with words on what it asks (exit 254), and
// no connection reaches the machine it names: a listener of the test's.
func TestReplayReachesNoMachineUnasked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var reached atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			reached.Add(1) // before the close that ends hiatus's handshake
			c.Close()
		}
	}()
	root := t.TempDir()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	inventory := filepath.Join(root, "lab.hosts")
	for name, text := range map[string]string{
		"id": string(pem.EncodeToMemory(block)), "known_hosts": "",
		"lab.hosts": "control 127.0.0.1\nkey id\nknown-hosts known_hosts\nnode w0 " + ln.Addr().String() + " worker,redis,postgres\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := harness.DefaultConfig()
	cfg.Hosts, cfg.TimeLimit, cfg.Workers = harness.Hosts("ssh:"+inventory), time.Second, 2
	run := failedRun(t, root, string(cfg.AppendEDN(nil)), oneSigstop)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--runs", "1"}, "test.edn asks to run on the machines that the inventory " + inventory + " names"},
		{[]string{"shrink", "--runs", "1", "--need", "1"}, "add --hosts ssh:" + inventory + " to run there"},
		{[]string{"replay", "--hosts", "ssh:other.hosts"}, "--hosts ssh:other.hosts is not"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := hiatus(t, append(append(tc.args, "--store", root), run)...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d and %q\n%s%s", code, exitUsage, tc.want, out, errOut)
			}
			if n := reached.Load(); n > 0 {
				t.Fatalf("%d connections reached the machine the run directory names", n)
			}
		})
	}
}

// TestReplayRefusesNonsense: a test.edn or schedule.edn that no run could
// have written (a worker -1 or "1", times past what a duration holds, a
// fault of an unknown kind, a key that is none of a fault's) is refused by
// replay and shrink, and a schedule by run --schedule, before anything
// starts: with no redis-server on the PATH, a server started first would
// fail first. Each error names the file, the fault and the key (exit 254).
func TestReplayRefusesNonsense(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no server can start
	test := testEDN(3 * time.Second)
	const sched = "{:faults [{:kind :sigstop, :at-ms 1000, :ms 800, :worker 1}]}"
	for _, tc := range []struct {
		file, old, new string
		want           []string
	}{
		{store.Schedule, ":worker 1", ":worker -1", []string{"schedule.edn: fault 1 of 1: :worker -1: want a worker's index, a whole number from 0"}},
		{store.Schedule, ":worker 1", `:worker "1"`, []string{`schedule.edn: fault 1 of 1: :worker "1": want a worker's index`}},
		{store.Schedule, ":worker 1", ":worker 7", []string{"schedule.edn: the fault of :kind :sigstop at :at-ms 1000: :worker 7, but test.edn's :workers is 3"}},
		{store.Schedule, ":worker 1", ":wroker 1", []string{"fault 1 of 1: unknown key :wroker: a fault has :kind, :at-ms"}},
		{store.Schedule, ":at-ms 1000", ":at-ms 9000000000000000000", []string{"fault 1 of 1: :at-ms 9000000000000000000: want 0 to 9223372036854 milliseconds"}},
		{store.Schedule, ":at-ms 1000", ":at-ms 9e18", []string{"fault 1 of 1: :at-ms 9", "want whole milliseconds"}},
		{store.Schedule, ":ms 800", ":ms 9000000000000000000", []string{"fault 1 of 1: :ms 9000000000000000000: want 1 to"}},
		{store.Schedule, ":at-ms 1000", ":at-ms 9223372036500", []string{"fault 1 of 1: :at-ms 9223372036500 and :ms 800: the fault would end past what a time.Duration holds"}},
		{store.Schedule, ":kind :sigstop", ":kind :frobnicate", []string{"fault 1 of 1: :kind :frobnicate: an unknown kind of fault; hiatus knows sigstop, "}},
		{store.Schedule, ":kind :sigstop", ":kind :clock", []string{`schedule.edn: the fault of :kind :clock at :at-ms 1000: test.edn's :nemesis "sigstop" does not name :clock`}},
		{store.Test, ":time-limit-ms 3000", ":time-limit-ms 978285600000000", []string{"test.edn: :time-limit-ms: 978285600000000 milliseconds is more than a time.Duration holds"}},
		{store.Test, ":workers 3", ":workers -1", []string{"test.edn, read as hiatus run's flags: --workers must be from 1 to 10000, not -1"}},
		{store.Test, ":workers 3", ":workers 1000000", []string{"test.edn, read as hiatus run's flags: --workers must be from 1 to 10000, not 1000000"}},
		{store.Test, ":lock :setnx", ":lock :redlock, :lock-nodes 100000", []string{"test.edn, read as hiatus run's flags: --nodes must be at most 15, not 100000"}},
		{store.Test, `:name "lock-counter"`, `:name "zz\u001b[2J\u001b[1;1Hvalid? true\nrecurred"`, []string{"test.edn, read as hiatus run's flags: --name", "want a plain name"}},
		{store.Test, ":workers 3", `:workers "1"`, []string{`test.edn: :workers: want an integer, not "1"`}},
		{store.Test, ":lease-ms 500", ":lease-ms 0", []string{"test.edn, read as hiatus run's flags: --lease must be positive"}},
	} {
		t.Run(tc.new, func(t *testing.T) {
			files := map[string]string{store.Test: test, store.Schedule: sched}
			if !strings.Contains(files[tc.file], tc.old) {
				t.Fatalf("%s holds no %q", tc.file, tc.old)
			}
			files[tc.file] = strings.Replace(files[tc.file], tc.old, tc.new, 1)
			root := t.TempDir()
			run := failedRun(t, root, files[store.Test], files[store.Schedule])
			commands := [][]string{{"replay", "--store", root, run}, {"shrink", "--store", root, run}}
			if tc.file == store.Schedule && !strings.Contains(tc.want[0], "test.edn") {
				commands = append(commands, []string{"run", "--store", root, "--schedule", filepath.Join(run, store.Schedule)})
			}
			for _, args := range commands {
				code, out, errOut := hiatus(t, args...)
				if code != exitUsage {
					t.Errorf("%s: exit %d, want %d\n%s%s", args[0], code, exitUsage, out, errOut)
				}
				for _, w := range tc.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("%s: stderr %q does not say %q", args[0], errOut, w)
					}
				}
			}
		})
	}
}

// TestReplayReadsBounded: a run directory's files are read as a shared
// directory's: a schedule.edn past harness.MaxRunFile (here a valid one
// padded with spaces) is refused, not read whole; a test.edn that is a
// link (to a valid one) is refused, not followed. Both before anything
// starts (no redis-server on the PATH), exit 254.
func TestReplayReadsBounded(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no server can start
	sched := "{:faults [{:kind :sigstop, :at-ms 1000, :ms 800, :worker 1}]}"
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, run string)
		want string
	}{
		{"large schedule", func(t *testing.T, run string) {
			big := sched + strings.Repeat(" ", harness.MaxRunFile)
			if err := os.WriteFile(filepath.Join(run, store.Schedule), []byte(big), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "larger than hiatus reads (more than 1048576 bytes)"},
		{"linked test.edn", func(t *testing.T, run string) {
			target := filepath.Join(t.TempDir(), "test.edn")
			if err := os.WriteFile(target, []byte(testEDN(3*time.Second)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(run, store.Test)); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(run, store.Test)); err != nil {
				t.Fatal(err)
			}
		}, "test.edn: a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			run := failedRun(t, root, testEDN(3*time.Second), sched)
			tc.edit(t, run)
			for _, cmd := range []string{"replay", "shrink"} {
				code, out, errOut := hiatus(t, cmd, "--store", root, run)
				if code != exitUsage || !strings.Contains(errOut, tc.want) {
					t.Errorf("%s: exit %d, want %d and %q\n%s%s", cmd, code, exitUsage, tc.want, out, errOut)
				}
			}
		})
	}
}
