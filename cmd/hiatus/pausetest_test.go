package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
