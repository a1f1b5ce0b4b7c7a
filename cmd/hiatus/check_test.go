package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/gen"
	"github.com/hiatus-dev/hiatus/store"
)

// Histories written by hand, as Knossos and hiatus write them.
const (
	registerValid = `[{:process 0, :type :invoke, :f :write, :value 1}
 {:process 0, :type :ok, :f :write, :value 1}
 {:process 1, :type :invoke, :f :read, :value nil}
 {:process 1, :type :ok, :f :read, :value 1}]
`
	registerInvalid = `; a read of a value never written
[{:process 0, :type :invoke, :f :write, :value 1}
 {:process 0, :type :ok, :f :write, :value 1}
 {:process 1, :type :invoke, :f :read, :value nil}
 {:process 1, :type :ok, :f :read, :value 3}]
`
	registerMalformed = `[{:process 0, :type :invoke, :f :write, :value 1}
 {:process 0, :type :ok, :f :write, :value 1]
`
	registerTruncated = `{:process 0, :type :invoke, :f :write, :value 1}
{:process 0, :type :ok, :f :write, :value 1}
{:process 1, :type :invoke, :f :read, :value nil}
{:process 1, :type :ok, :f :read, :va`
	registerTruncatedInvalid = `{:process 0, :type :invoke, :f :write, :value 1}
{:process 0, :type :ok, :f :write, :value 1}
{:process 1, :type :invoke, :f :read, :value nil}
{:process 1, :type :ok, :f :read, :value 3}
{:process 1, :type :invoke, :f :read, :va`

	// Two sections that both read 0 and wrote 1: process 0 was paused
	// while it held the lock.
	lockCounterInvalid = `{:index 0, :time 1000000, :type :invoke, :process 0, :f :acquire, :value nil}
{:index 1, :time 2000000, :type :ok, :process 0, :f :acquire, :value nil, :lease-ms 500, :token "a"}
{:index 2, :time 3000000, :type :invoke, :process 0, :f :read, :value nil}
{:index 3, :time 4000000, :type :ok, :process 0, :f :read, :value 0}
{:index 4, :time 5000000, :type :info, :process :nemesis, :f :pause, :value {:process 0, :kind :sigstop}}
{:index 5, :time 600000000, :type :invoke, :process 1, :f :acquire, :value nil}
{:index 6, :time 601000000, :type :ok, :process 1, :f :acquire, :value nil, :lease-ms 500, :token "b"}
{:index 7, :time 602000000, :type :invoke, :process 1, :f :read, :value nil}
{:index 8, :time 603000000, :type :ok, :process 1, :f :read, :value 0}
{:index 9, :time 604000000, :type :invoke, :process 1, :f :write, :value 1}
{:index 10, :time 605000000, :type :ok, :process 1, :f :write, :value 1}
{:index 11, :time 606000000, :type :invoke, :process 1, :f :release, :value nil}
{:index 12, :time 607000000, :type :ok, :process 1, :f :release, :value nil}
{:index 13, :time 805000000, :type :info, :process :nemesis, :f :resume, :value {:process 0, :kind :sigstop}}
{:index 14, :time 806000000, :type :invoke, :process 0, :f :write, :value 1}
{:index 15, :time 807000000, :type :ok, :process 0, :f :write, :value 1}
{:index 16, :time 808000000, :type :invoke, :process 0, :f :release, :value nil}
{:index 17, :time 809000000, :type :fail, :process 0, :f :release, :value nil, :error :expired}
{:index 18, :time 900000000, :type :invoke, :process 2, :f :read, :value nil, :final? true}
{:index 19, :time 901000000, :type :ok, :process 2, :f :read, :value 1, :final? true}
`
)

// writeFile writes content to name in a fresh temporary directory and
// returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckCommand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history string // written to history.edn; "" for none
		args    []string
		code    int
		stdout  []string // phrases stdout must hold
		stderr  []string // phrases stderr must hold
	}{
		{name: "valid", history: registerValid, code: exitValid,
			stdout: []string{"model register (detected from :f), 4 ops, initial nil", "linear  true", "valid? true"}},
		{name: "invalid", history: registerInvalid, code: exitInvalid,
			stdout: []string{"linear: op 3 (process 1: read 3; invoked at op 2, completed at op 3) cannot be linearized", "valid? false"}},
		{name: "model and initial", history: registerValid, args: []string{"--model", "cas-register", "--initial", "0"}, code: exitValid,
			stdout: []string{"model cas-register, 4 ops, initial 0"}},
		{name: "ops of another model", history: registerValid, args: []string{"--model", "counter"}, code: exitUnknown,
			stdout: []string{"are not counter ops"}},
		{name: "malformed", history: registerMalformed, code: exitUsage,
			stderr: []string{"history.edn:2:"}},
		{name: "truncated", history: registerTruncated, code: exitUnknown,
			stdout: []string{"history  :unknown", "cut short after 3 ops"}, stderr: []string{"history is truncated"}},
		{name: "truncated, already invalid", history: registerTruncatedInvalid, code: exitInvalid,
			stdout: []string{"valid? false"}},
		{name: "missing file", args: []string{"no-such-history.edn"}, code: exitUsage,
			stderr: []string{"no-such-history.edn"}},
		{name: "no model fits", history: "{:process 0, :type :invoke, :f :enqueue, :value 1}\n", code: exitUsage,
			stderr: []string{"no model has exactly the ops :enqueue; pass --model"}},
		{name: "unknown model", history: registerValid, args: []string{"--model", "queue"}, code: exitUsage,
			stderr: []string{`unknown model "queue"`}},
		{name: "bad initial", history: registerValid, args: []string{"--initial", "{:x"}, code: exitUsage,
			stderr: []string{"--initial"}},
		{name: "initial of the wrong kind", history: registerValid, args: []string{"--model", "counter", "--initial", ":a"}, code: exitUsage,
			stderr: []string{"starts at an integer"}},
		{name: "bad timeout", history: registerValid, args: []string{"--timeout", "-1s"}, code: exitUsage,
			stderr: []string{"--timeout must be positive"}},
		{name: "bad memory", history: registerValid, args: []string{"--memory", "-1"}, code: exitUsage,
			stderr: []string{"--memory must be from 1 to"}},
		{name: "lock-counter", history: lockCounterInvalid, code: exitInvalid,
			stdout: []string{"model lock-counter (detected from :f), 20 ops, initial 0",
				"linear: op 10 and op 15 both wrote 1 after reading 0; process 0 (op 15) was stopped by nemesis op 4 (sigstop) for 800 ms while holding a 500 ms lease"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"check"}, tc.args...)
			if tc.history != "" {
				args = append(args, writeFile(t, "history.edn", tc.history))
			}
			code, stdout, stderr := hiatus(t, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

// TestCheckCommandArgs: flags may come after the history, as people type
// them; two histories are refused.
func TestCheckCommandArgs(t *testing.T) {
	path := writeFile(t, "history.edn", registerValid)
	out := filepath.Join(t.TempDir(), "results.edn")
	code, stdout, stderr := hiatus(t, "check", path, "--out", out, "--timeout", "5s")
	if b, _ := os.ReadFile(out); code != exitValid || !strings.Contains(string(b), ":valid? true") {
		t.Errorf("flags after the history: exit %d, results %q\n%s%s", code, b, stdout, stderr)
	}
	if code, _, stderr := hiatus(t, "check", path, path); code != exitUsage || !strings.Contains(stderr, "not 2 arguments") {
		t.Errorf("two histories: exit %d, stderr %q", code, stderr)
	}
}

// TestCheckCommandOutputs checks the files check writes: --html, --out, and
// nothing beside a lone history.
func TestCheckCommandOutputs(t *testing.T) {
	path := writeFile(t, "history.edn", registerInvalid)
	dir := filepath.Dir(path)
	html, out := filepath.Join(dir, "linear.html"), filepath.Join(dir, "results.edn")
	code, stdout, stderr := hiatus(t, "check", "--html", html, "--timeout", "30s", path)
	if code != exitInvalid {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<html") {
		t.Errorf("--html wrote no visualization: %v", err)
	}
	if !strings.Contains(stdout, "html: "+html+" (2 of 2 ops)") {
		t.Errorf("stdout does not say what was drawn:\n%s", stdout)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a lone history got a results.edn without --out")
	}

	code, _, _ = hiatus(t, "check", "--out", out, path)
	b, err := os.ReadFile(out)
	if code != exitInvalid || err != nil || !strings.HasPrefix(string(b), "{:valid? false") {
		t.Errorf("--out: exit %d, %v, %q", code, err, b)
	}

	// The counter model has nothing to draw: the check goes on without it.
	counter := writeFile(t, "counter.edn", "{:process 0, :type :invoke, :f :add, :value 1}\n{:process 0, :type :ok, :f :add, :value 1}\n")
	code, _, stderr = hiatus(t, "check", "--html", html+".2", counter)
	if code != exitValid || !strings.Contains(stderr, "no visualization written") {
		t.Errorf("counter --html: exit %d, stderr %q", code, stderr)
	}
}

// TestCheckCommandRunDir checks a run directory, by path and as
// store/latest: check rewrites results.edn there with exactly the results
// the run itself writes.
func TestCheckCommandRunDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	run, err := store.Create(root, "lock-counter", time.Date(2026, 11, 30, 17, 13, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(run.Path(store.History), []byte(lockCounterInvalid), 0o644); err != nil {
		t.Fatal(err)
	}
	ops, err := history.ReadFile(run.Path(store.History))
	if err != nil {
		t.Fatal(err)
	}
	want := string(lockCounter(t, ops).AppendEDN(nil))
	for _, args := range [][]string{
		{"check", run.Dir},
		{"check", "--store", root},
	} {
		os.Remove(run.Path(store.Results))
		code, stdout, stderr := hiatus(t, args...)
		if code != exitInvalid {
			t.Errorf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		got, err := os.ReadFile(run.Path(store.Results))
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if string(got) != want {
			t.Errorf("%v: results.edn differs from the run's:\n%s\nthe run's:\n%s", args, got, want)
		}
	}
}

// TestCheckStreamed checks that a lock-counter history checked as it is
// read — hiatus check's way — gets exactly the results the run's own
// check (all ops in memory) gives: whole or cut short, valid or not, in
// time order or not (a journal, which is read whole and sorted).
func TestCheckStreamed(t *testing.T) {
	generated := func(cfg gen.Config) []byte {
		var buf bytes.Buffer
		if _, err := gen.Write(&buf, cfg); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	valid := generated(gen.Config{Sections: 300, Workers: 8, Seed: 1})
	lost := generated(gen.Config{Sections: 300, Workers: 8, Lost: 2, Info: 5, Seed: 2})
	// 3,000 sections take 1.5 MB of records: past --memory 1, on disk.
	big := generated(gen.Config{Sections: 3000, Workers: 16, Lost: 3, Info: 30, Seed: 3})
	lines := bytes.SplitAfter(lost, []byte("\n"))
	swapped := slices.Clone(lines)
	swapped[100], swapped[101] = swapped[101], swapped[100]
	for _, tc := range []struct {
		name    string
		history []byte
		args    []string
		code    int
	}{
		{"valid", valid, nil, exitValid},
		{"lost and info", lost, nil, exitInvalid},
		{"model named", lost, []string{"--model", "lock-counter"}, exitInvalid},
		{"initial", valid, []string{"--initial", "5"}, exitInvalid},
		{"truncated", valid[:len(valid)/2], nil, exitUnknown},
		{"out of time order", bytes.Join(swapped, nil), nil, exitInvalid},
		// Only the verdict and figures: TestBudgetAndCores (checker) sees
		// the records go to disk.
		{"records in memory", big, nil, exitInvalid},
		{"a budget of 1 MB", big, []string{"--memory", "1"}, exitInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "history.edn", string(tc.history))
			ops, err := history.ReadFile(path)
			opts := checker.Options{Model: checker.ModelLockCounter, Truncated: errors.Is(err, history.ErrTruncated)}
			if err != nil && !opts.Truncated {
				t.Fatal(err)
			}
			if len(tc.args) == 2 && tc.args[0] == "--initial" {
				opts.Initial = int64(5)
			}
			want, err := checker.Check(context.Background(), ops, opts)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "results.edn")
			args := append(append([]string{"check", "--out", out}, tc.args...), path)
			code, stdout, stderr := hiatus(t, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s\n%s", code, tc.code, stdout, stderr)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want.AppendEDN(nil)) {
				t.Errorf("streamed results differ from Check's:\n%s\nCheck's:\n%s", got, want.AppendEDN(nil))
			}
			if !strings.Contains(stdout, fmt.Sprintf("%d ops", len(ops))) {
				t.Errorf("stdout does not count %d ops:\n%s", len(ops), stdout)
			}
		})
	}
}

// TestCheckAnalyzer checks --analyzer: porcupine, the reference, agrees with
// the counter walk on a history of every kind of op.
func TestCheckAnalyzer(t *testing.T) {
	var buf bytes.Buffer
	if _, err := gen.Write(&buf, gen.Config{Sections: 200, Workers: 6, Lost: 1, Info: 4, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "history.edn", buf.String())
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--analyzer", "counter-walk"}, exitInvalid, "analyzer :counter-walk", ""},
		{[]string{"--analyzer", "porcupine"}, exitInvalid, "analyzer :porcupine", ""},
		{[]string{"--analyzer", "guess"}, exitUsage, "", `unknown analyzer "guess"`},
		{[]string{"--analyzer", "counter-walk", "--model", "register"}, exitUsage, "", "checks only the lock-counter model"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := hiatus(t, append(append([]string{"check"}, tc.args...), path)...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, stdout, stderr)
			}
		})
	}
}

// TestCheckInterrupted checks that a check interrupted while it reads ends
// with the status of an interrupted command.
func TestCheckInterrupted(t *testing.T) {
	path := writeFile(t, "history.edn", lockCounterInvalid)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	err := runCheck(ctx, checkArgs{path: path, timeout: time.Minute}, &out, &errOut)
	if code := exitCode(err, &errOut); code != exitInterrupted {
		t.Errorf("exit %d, want %d (%v)", code, exitInterrupted, err)
	}
}

// TestCheckExamples checks the hand-made histories of docs/examples, whose
// explanations docs/checkers.md prints, with both analyzers: each must keep
// its verdict and its words.
func TestCheckExamples(t *testing.T) {
	for _, tc := range []struct {
		file   string
		code   int
		stdout []string
	}{
		{"read-proves-info.edn", exitInvalid, []string{"lost-min 1, lost-max 1",
			"op 21 (process 3) read 2 (completed at +24ms), which only op 17 (process 2), a write of unknown outcome (invoked at +17ms), could have produced; op 23 (process 1) then wrote 2 again (invoked at +39ms) after reading 1: an update was lost"}},
		{"not-an-increment.edn", exitInvalid, []string{"op 13 (process 1) wrote 2 after reading 7: a section writes what it read plus one"}},
		{"fence-after-info.edn", exitInvalid, []string{"op 21 (process 2) wrote 3 with fence 4, but in every order the history allows, a write with a fence of 5 or more took effect before it"}},
		{"unsettled.edn", exitValid, []string{"lost-min 0, lost-max 1", "valid? true"}},
	} {
		for _, analyzer := range []string{checker.AnalyzerCounterWalk, checker.AnalyzerPorcupine} {
			t.Run(tc.file+"/"+analyzer, func(t *testing.T) {
				code, stdout, stderr := hiatus(t, "check", "--analyzer", analyzer, filepath.Join("..", "..", "docs", "examples", tc.file))
				if code != tc.code {
					t.Errorf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
				}
				for _, want := range tc.stdout {
					if analyzer == checker.AnalyzerCounterWalk && !strings.Contains(stdout, want) {
						t.Errorf("stdout lacks %q:\n%s", want, stdout)
					}
				}
			})
		}
	}
}

// TestCheckProcessValues: a process may be written as any EDN value, as
// Jepsen's histories allow. Each is a client whose ops are checked: a
// history with one process renamed keeps its verdict and figures (dropping
// the renamed process's writes once made a valid history look as if the
// counter rose by more than the writes that may have happened).
func TestCheckProcessValues(t *testing.T) {
	for _, lost := range []int{0, 1} {
		var buf bytes.Buffer
		if _, err := gen.Write(&buf, gen.Config{Sections: 12, Workers: 3, Lost: lost, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		original := buf.String()
		want := checkFigures(t, writeFile(t, "history.edn", original), checker.AnalyzerCounterWalk)
		for _, name := range []string{`"工人"`, ":wörker", "-7", "[1 2]", "nil", `"nemesis"`} {
			renamed := strings.ReplaceAll(original, ":process 1,", ":process "+name+",")
			if renamed == original {
				t.Fatal("the generated history has no process 1")
			}
			path := writeFile(t, "history.edn", renamed)
			for _, analyzer := range []string{checker.AnalyzerCounterWalk, checker.AnalyzerPorcupine} {
				t.Run(fmt.Sprintf("lost %d/%s/%s", lost, name, analyzer), func(t *testing.T) {
					if got := checkFigures(t, path, analyzer); got != want {
						t.Errorf("process 1 written as %s: %s; as 1: %s", name, got, want)
					}
					out := filepath.Join(t.TempDir(), "results.edn")
					_, stdout, _ := hiatus(t, "check", "--analyzer", analyzer, "--out", out, path)
					if !strings.Contains(stdout, "-2 is "+name) {
						t.Errorf("stdout does not say how process -2 is written:\n%s", stdout)
					}
					if b, _ := os.ReadFile(out); !strings.Contains(string(b), ":processes {-2 "+string(history.AppendValue(nil, name))+"}") {
						t.Errorf("results.edn does not say how process -2 is written:\n%s", b)
					}
				})
			}
		}
	}
}

// checkFigures is the verdict and lock-counter figures of a check of the
// history at path.
func checkFigures(t *testing.T, path, analyzer string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.edn")
	code, stdout, stderr := hiatus(t, "check", "--analyzer", analyzer, "--out", out, path)
	if code != exitValid && code != exitInvalid {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	var lines []string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "  lock-counter") || strings.HasPrefix(l, "valid?") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	return fmt.Sprintf("exit %d: %s", code, strings.Join(lines, "; "))
}

// TestCheckDuplicateIndex: ops that share an :index keep the verdict (the
// checks go by position), and the check says which they are.
func TestCheckDuplicateIndex(t *testing.T) {
	dup := strings.Replace(lockCounterInvalid, "{:index 7,", "{:index 5,", 1)
	renamed := strings.Replace(lockCounterInvalid, "{:index 3,", "{:index 12,", 1)
	for _, tc := range []struct {
		name, history string
		code          int
		stdout        string
	}{
		{"a later op", dup, exitInvalid, "op 5, the 8th op map, as the 6th"},
		{"an earlier op", renamed, exitInvalid, "op 12, the 13th op map, as the 4th"},
		{"none", lockCounterInvalid, exitInvalid, ""},
		{"valid", strings.Replace(registerValid, ":process 1, :type :invoke", ":index 0, :process 1, :type :invoke", 1), exitValid,
			"op 0, the 3rd op map, as the 1st"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := hiatus(t, "check", writeFile(t, "history.edn", tc.history))
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
			}
			says := strings.Contains(stdout, "have an :index an earlier op has too")
			if tc.stdout == "" && says || tc.stdout != "" && !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout, want %q:\n%s", tc.stdout, stdout)
			}
		})
	}
}

// TestCheckRefusesSpecialFiles: a named pipe with no writer, a device or a
// socket is refused at once, given by name or as a run's history.edn: a
// reader that opened one would wait past any signal.
func TestCheckRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.edn")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "store", "lock-counter", "20261201T000000.000Z")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(run, store.History), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, says string }{
		{"named pipe", fifo, "is a named pipe"},
		{"run's history a named pipe", run, "is a named pipe"},
		{"device", "/dev/zero", "is a device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"check", "timeline", "plot"} {
				code, stdout, stderr := hiatus(t, cmd, "--store", filepath.Join(dir, "store"), tc.path)
				if code != exitUsage || !strings.Contains(stderr, tc.says) {
					t.Errorf("%s: exit %d, want %d and %q\n%s%s", cmd, code, exitUsage, tc.says, stdout, stderr)
				}
			}
		})
	}
}

// TestCheckStdin checks a history piped to `hiatus check -`, which cannot
// be read twice: it is read whole, whatever its model.
func TestCheckStdin(t *testing.T) {
	for _, tc := range []struct {
		name, history string
		code          int
	}{
		{"register", registerValid, exitValid},
		{"lock-counter", lockCounterInvalid, exitInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			app := newApp(&out, &errOut)
			app.Reader = strings.NewReader(tc.history)
			code := exitCode(app.Run([]string{"hiatus", "check", "-"}), &errOut)
			if code != tc.code || !strings.Contains(out.String(), "checking standard input") {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errOut.String())
			}
		})
	}
}

// TestCheckSignals: SIGINT or SIGTERM ends `hiatus check -` with 130 while
// it waits on a pipe that says nothing, as a user who typed it by mistake
// at a terminal would see.
func TestCheckSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "check", "-")
			cmd.Env = append(os.Environ(), asMainEnv+"=1")
			stdin, err := cmd.StdinPipe() // never written: the read waits
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Once it reads its standard input, it listens for signals.
			waitReading(t, cmd.Process.Pid, 0)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
				t.Errorf("exit %v, want %d\n%s", err, exitInterrupted, errOut.String())
			}
		})
	}
}

// waitReading waits until a thread of process pid is blocked in a read of
// its file descriptor fd, as /proc says.
func waitReading(t *testing.T, pid, fd int) {
	t.Helper()
	want := fmt.Sprintf("%d 0x%x ", syscall.SYS_READ, fd)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("process %d: %v", pid, err)
		}
		for _, task := range tasks {
			if b, err := os.ReadFile(task); err == nil && strings.HasPrefix(string(b), want) {
				return
			}
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // a poll of /proc, not a guess at timing
	}
}

// TestCheckUnsaved: a verdict reached is the exit status even when
// results.edn cannot be written (a directory holds its name here, which
// no rename replaces, as root too), and stderr says it is not saved.
func TestCheckUnsaved(t *testing.T) {
	run := filepath.Join(t.TempDir(), "lock-counter", "20261201T000000.000Z")
	if err := os.MkdirAll(filepath.Join(run, store.Results, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, store.History), []byte(lockCounterInvalid), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := hiatus(t, "check", run)
	if code != exitInvalid || !strings.Contains(stdout, "valid? false") || !strings.Contains(stderr, "the verdict above is not saved") {
		t.Errorf("exit %d, want %d, the verdict and that it is not saved\n%s%s", code, exitInvalid, stdout, stderr)
	}
}

// TestCollectForStream: a streamed check's collector waits for its budget
// plus collectorRoom (and, past the default budget, runs at every doubling
// of the heap too), and is put back as it was (twice is once); the
// environment's GOGC or GOMEMLIMIT, when set, is left alone.
func TestCollectForStream(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("the environment sets the collector")
	}
	gogc := func() int { p := debug.SetGCPercent(0); debug.SetGCPercent(p); return p }
	limit, percent := debug.SetMemoryLimit(-1), gogc()
	restore := collectForStream(5 << 20)
	if got, p := debug.SetMemoryLimit(-1), gogc(); got != 5<<20+collectorRoom || p != -1 {
		t.Errorf("limit %d, GOGC %d; want %d, off", got, p, 5<<20+collectorRoom)
	}
	restore()
	restore()
	if got, p := debug.SetMemoryLimit(-1), gogc(); got != limit || p != percent {
		t.Errorf("after restore: limit %d, GOGC %d; want %d, %d", got, p, limit, percent)
	}
	big := int64(2 * checker.DefaultMemory)
	restore = collectForStream(big)
	if got, p := debug.SetMemoryLimit(-1), gogc(); got != big+collectorRoom || p != 100 {
		t.Errorf("a budget above the default: limit %d, GOGC %d; want %d, 100", got, p, big+collectorRoom)
	}
	restore()
	t.Setenv("GOGC", "50")
	collectForStream(5 << 20)()
	if got, p := debug.SetMemoryLimit(-1), gogc(); got != limit || p != percent {
		t.Errorf("with GOGC set: limit %d, GOGC %d; want them untouched", got, p)
	}
}

// TestCheckOutputsRefuseLinks: --out and --html are written whole, beside
// their path and renamed into place, never through a link planted there:
// its target is left as it was, and check says why (exit 254).
func TestCheckOutputsRefuseLinks(t *testing.T) {
	path := writeFile(t, "history.edn", registerInvalid)
	for _, flag := range []string{"--out", "--html"} {
		t.Run(flag, func(t *testing.T) {
			dir := t.TempDir()
			target, link := filepath.Join(dir, "target"), filepath.Join(dir, "planted")
			if err := os.WriteFile(target, []byte("keep me"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := hiatus(t, "check", flag, link, path)
			if code != exitUsage || !strings.Contains(stderr, "symbolic link") {
				t.Errorf("check %s LINK: exit %d, stderr %q; want %d, saying it is a link", flag, code, stderr, exitUsage)
			}
			if b, _ := os.ReadFile(target); string(b) != "keep me" {
				t.Errorf("check %s LINK wrote through the link: its target holds %.40q", flag, b)
			}
		})
	}
}

// TestCheckServerRecord: a run directory's lockserver.edn is read with its
// history and said; a run without one is checked as before; a malformed
// record, or a link where it should be, is refused (254) by its name.
func TestCheckServerRecord(t *testing.T) {
	record := `{:index 0, :time 1500000, :type :info, :process "redis-0", :f :grant, :key "k", :token "a", :client "worker-0", :deadline 501500000}
{:index 1, :time 601500000, :type :info, :process "redis-0", :f :grant, :key "k", :token "b", :client "worker-1"}
`
	for _, tc := range []struct {
		name, record string
		link         bool
		code         int
		want         string
	}{
		{"none", "", false, exitInvalid, ""},
		{"record", record, false, exitInvalid, "lock server's record: 2 events of redis-0"},
		{"malformed", `{:index 0, :time 1, :type :info, :process "redis-0", :f :acquire}`, false, exitUsage, "lockserver.edn: op 0: :f :acquire is no act"},
		{"unsorted", record[strings.Index(record, "\n")+1:] + record[:strings.Index(record, "\n")+1], false, exitUsage, "sorted by :time"},
		{"link", record, true, exitUsage, "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := store.Create(t.TempDir(), "lock-counter", time.Date(2026, 11, 30, 17, 13, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(run.Path(store.History), []byte(lockCounterInvalid), 0o644); err != nil {
				t.Fatal(err)
			}
			path := run.Path(store.LockServer)
			if tc.link {
				path = filepath.Join(t.TempDir(), "elsewhere.edn")
				if err := os.Symlink(path, run.Path(store.LockServer)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.record != "" {
				if err := os.WriteFile(path, []byte(tc.record), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := hiatus(t, "check", run.Dir)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
				t.Errorf("exit %d, want %d saying %q:\n%s\n%s", code, tc.code, tc.want, stdout, stderr)
			}
			if tc.record == "" && strings.Contains(stdout, "lock server's record") {
				t.Errorf("a run without a record says it has one:\n%s", stdout)
			}
		})
	}
}

// TestCheckRunDirModel: a run directory is checked against the model its
// test.edn names — a list-append run's lists, not a counter — and one
// whose test.edn names none (a run made before workloads) as lock-counter.
func TestCheckRunDirModel(t *testing.T) {
	for _, tc := range []struct {
		name, test string
		want       string // a check results.edn must have
	}{
		{"list-append", `{:model :list-append}`, ":list-append {:valid? false"},
		{"none", `{:name "old"}`, ":lock-counter {:valid? "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run, err := store.Create(filepath.Join(t.TempDir(), "store"), "lists", time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Create(run.Path(store.History))
			if err != nil {
				t.Fatal(err)
			}
			_, err = gen.Write(f, gen.Config{Sections: 50, Workers: 3, Lost: 1, Seed: 3, Lists: true})
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.WriteFile(run.Path(store.Test), []byte(tc.test), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := hiatus(t, "check", run.Dir)
			res, _ := os.ReadFile(run.Path(store.Results))
			if !strings.Contains(string(res), tc.want) {
				t.Errorf("exit %d; results.edn lacks %q:\n%s\n%s\n%s", code, tc.want, res, stdout, stderr)
			}
		})
	}
}
