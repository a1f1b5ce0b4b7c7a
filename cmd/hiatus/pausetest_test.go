package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/joshdk/go-junit"
)

// TestPauseTestCommand: pause-test as a CI gate. Unguarded, the lease
// lock loses an update and the command exits 1; fenced, it exits 0. The
// JUnit report validates against the schema CI systems read (xmllint
// --schema) and says the same, as a JUnit reader takes it; each case's run
// directory is where the report says.
func TestPauseTestCommand(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Fatalf("the JUnit report is validated by xmllint (scripts/setup --tests installs libxml2-utils): %v", err)
	}
	for i, tc := range []struct {
		guards         string
		code, failures int
	}{
		{guards: "none,fence", code: exitInvalid, failures: 1},
		{guards: "fence", code: exitValid},
	} {
		t.Run(tc.guards, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			report := filepath.Join(dir, "pause-test.xml")
			code, out, errOut := hiatus(t, "pause-test", "--lock", "setnx", "--guard", tc.guards, "--pause-kind", "stop",
				"--store", dir, "--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
				"--name", fmt.Sprintf("pause-test-%d", i), "--counter-id", fmt.Sprint(770+i), "--junit", report)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			validate(t, report)
			suites, err := junit.IngestFile(report)
			if err != nil {
				t.Fatal(err)
			}
			if len(suites) != 1 {
				t.Fatalf("%d suites, want 1", len(suites))
			}
			s := suites[0]
			s.Aggregate()
			cases := len(strings.Split(tc.guards, ","))
			if s.Totals.Tests != cases || s.Totals.Failed != tc.failures || s.Totals.Passed != cases-tc.failures {
				t.Errorf("totals %+v, want %d tests, %d failed", s.Totals, cases, tc.failures)
			}
			for _, c := range s.Tests {
				failed := c.Status == junit.StatusFailed
				if failed != strings.HasPrefix(c.Name, "setnx/none/") {
					t.Errorf("case %s: status %s", c.Name, c.Status)
				}
				if failed && !strings.Contains(fmt.Sprint(c.Message, c.Error), "lost") {
					t.Errorf("case %s: failure %q says nothing of a lost update", c.Name, c.Error)
				}
				run, _, _ := strings.Cut(strings.TrimPrefix(c.SystemOut, "run "), "\n")
				if _, err := os.Stat(filepath.Join(run, "history.edn")); err != nil {
					t.Errorf("case %s: its run: %v", c.Name, err)
				}
			}
		})
	}
}

// validate validates file against the JUnit schema, and checks that the
// schema refuses what it should: a suite with no name.
func validate(t *testing.T, file string) {
	t.Helper()
	const schema = "testdata/junit.xsd"
	if out, err := exec.Command("xmllint", "--noout", "--schema", schema, file).CombinedOutput(); err != nil {
		t.Errorf("%s does not validate: %v\n%s", file, err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.xml")
	if err := os.WriteFile(bad, []byte(`<testsuites><testsuite tests="1" failures="0" errors="0"><testcase name="x"/></testsuite></testsuites>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("xmllint", "--noout", "--schema", schema, bad).Run(); err == nil {
		t.Errorf("the schema takes a suite with no name: it checks nothing")
	}
}

// TestPauseTestBadFlags: what pause-test refuses, before starting a
// server, with exit 254.
func TestPauseTestBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--pause-kind", "freeze"},
		{"--runs", "0"},
		{"--guard", "hope"},
		{"--lock", "chubby"},
		{"extra"},
	} {
		code, _, errOut := hiatus(t, append([]string{"pause-test", "--store", t.TempDir()}, args...)...)
		if code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d (%q), want %d with a message", args, code, errOut, exitUsage)
		}
	}
}

// wrongReplyAdapter is a lock adapter, a real process, that says hello as
// it should and answers each acquire with an in_reply_to one thousand past
// the request's id: an answer to a request hiatus never sent.
const wrongReplyAdapter = `import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "init":
        out = {"type": "hello", "in_reply_to": req["id"], "name": "wrong-reply", "version": "1", "fencing": False, "renewal": False, "library": "none"}
    elif req["type"] == "acquire":
        out = {"type": "ok", "in_reply_to": req["id"] + 1000, "token": "t%d" % req["id"]}
    else:
        out = {"type": "ok", "in_reply_to": req["id"]}
    print(json.dumps(out), flush=True)
`

// TestPauseTestNoVerdict: a case that never ran is no lost update. Holder
// A's acquire is answered under another request's id, so A never holds
// the lock and nothing is written: the case is unknown, on the terminal
// and in the exit status (2), and the JUnit report has an error, not a
// failure, that names what the adapter did wrong.
func TestPauseTestNoVerdict(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	adapter := filepath.Join(dir, "wrong-reply.py")
	if err := os.WriteFile(adapter, []byte(wrongReplyAdapter), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "pause-test.xml")
	code, out, errOut := hiatus(t, "pause-test", "--lock", "exec:/usr/bin/python3 "+adapter, "--guard", "fence", "--pause-kind", "sleep",
		"--op-timeout", "1s", "--store", dir, "--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
		"--name", "pause-test-no-verdict", "--counter-id", "780", "--junit", report)
	if code != exitUnknown {
		t.Errorf("exit %d, want %d (unknown)\n%s%s", code, exitUnknown, out, errOut)
	}
	const why = "answered request 1001 (ok), which hiatus never sent"
	if strings.Contains(out, "FAIL") || !strings.Contains(out, "unknown") || !strings.Contains(out, why) {
		t.Errorf("the terminal does not say the case is unknown because %s:\n%s", why, out)
	}
	validate(t, report)
	suites, err := junit.IngestFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if len(suites) != 1 || len(suites[0].Tests) != 1 {
		t.Fatalf("suites %+v, want one of one case", suites)
	}
	c := suites[0].Tests[0]
	if c.Status != junit.StatusError || !strings.Contains(c.Message, why) {
		t.Errorf("case %s: status %s, message %q; want an error that says %q", c.Name, c.Status, c.Message, why)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `failures="0" errors="1"`) {
		t.Errorf("the report's suite does not count one error and no failure:\n%s", data)
	}
}

// TestPauseTestJUnitRefused: a --junit path that cannot take the report
// is refused before any case runs, with exit 254 naming it: a directory
// that is not there, a named pipe (a reader waits on it, which would take
// the report and lose it), a link (not written through). No case's run is
// made, and what the link names is left as it was.
func TestPauseTestJUnitRefused(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name  string
		make  func(t *testing.T, path string)
		words string
	}{
		{name: "missing-dir", make: func(t *testing.T, path string) {}, words: "no such file or directory"},
		{name: "fifo", make: func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
		}, words: "named pipe"},
		{name: "link", make: func(t *testing.T, path string) {
			if err := os.WriteFile(path+".target", []byte("kept"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(path+".target", path); err != nil {
				t.Fatal(err)
			}
		}, words: "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, store := t.TempDir(), t.TempDir()
			report := filepath.Join(dir, "pause-test.xml")
			if tc.name == "missing-dir" {
				report = filepath.Join(dir, "none", "pause-test.xml")
			}
			tc.make(t, report)
			code, out, errOut := hiatus(t, "pause-test", "--lock", "setnx", "--guard", "fence", "--pause-kind", "sleep",
				"--store", store, "--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
				"--name", fmt.Sprintf("pause-test-refused-%d", i), "--counter-id", fmt.Sprint(790+i), "--junit", report)
			if code != exitUsage || !strings.Contains(errOut, "--junit") || !strings.Contains(errOut, report) || !strings.Contains(errOut, tc.words) {
				t.Errorf("exit %d, stderr %q; want %d naming --junit %s: %s\n%s", code, errOut, exitUsage, report, tc.words, out)
			}
			if runs, err := os.ReadDir(store); err != nil || len(runs) > 0 {
				t.Errorf("the store holds %v (%v): a case ran", runs, err)
			}
			if tc.name == "link" {
				if b, err := os.ReadFile(report + ".target"); err != nil || string(b) != "kept" {
					t.Errorf("the link's target: %q, %v; want it as it was", b, err)
				}
			}
		})
	}
}

// TestPauseTestJUnitLost: a report that cannot be written at the end,
// though its path could be at the start, loses neither the verdict nor
// the report's loss. The path is the test's own latest run (STORE/NAME/
// latest: nothing there at the start; a link to the case's run at the
// end, which is not written through). A lost update is exit 1 still, the
// loss said on stderr; a pass without its report is exit 254, naming it.
func TestPauseTestJUnitLost(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		guard string
		code  int
	}{
		{guard: "none", code: exitInvalid},
		{guard: "fence", code: exitUsage},
	} {
		t.Run(tc.guard, func(t *testing.T) {
			t.Parallel()
			store, name := t.TempDir(), fmt.Sprintf("pause-test-lost-%d", i)
			if err := os.Mkdir(filepath.Join(store, name), 0o755); err != nil {
				t.Fatal(err)
			}
			report := filepath.Join(store, name, "latest")
			code, out, errOut := hiatus(t, "pause-test", "--lock", "setnx", "--guard", tc.guard, "--pause-kind", "sleep",
				"--store", store, "--redis-url", testRedisURL, "--postgres-url", testPostgresURL,
				"--name", name, "--counter-id", fmt.Sprint(795+i), "--junit", report)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			if !strings.Contains(out, "cases passed") {
				t.Errorf("no verdict printed:\n%s", out)
			}
			if !strings.Contains(errOut, "--junit") || !strings.Contains(errOut, report) || !strings.Contains(errOut, "not written") {
				t.Errorf("stderr %q does not say the report %s is not written", errOut, report)
			}
		})
	}
}
