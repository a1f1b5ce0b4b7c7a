package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/store"
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
		{[]string{"run", "--store", root, "--schedule", bad}, exitUsage, "fault 0: want :kind, :at-ms"},
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
