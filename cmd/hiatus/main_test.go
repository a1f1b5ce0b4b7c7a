package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/adaptertest"
	"github.com/hiatus-dev/hiatus/internal/servers"
)

// asMainEnv makes the test binary run as hiatus itself, so that tests can
// start a real `hiatus run` process and signal it.
const asMainEnv = "HIATUS_TEST_AS_MAIN"

// Servers shared by the tests of this package that do not test the
// throwaway default itself.
var testRedisURL, testPostgresURL string

// TestMain serves four roles. `hiatus run` starts its workers as its own
// binary; under `go test` that is this test binary, which then serves as a
// worker (harness.ServeWorker), as main does. Started as an adapter
// (adaptertest.Command), it is one. Started with asMainEnv, it is hiatus
// itself. Otherwise it starts the servers the tests share.
func TestMain(m *testing.M) {
	adaptertest.Serve()
	harness.ServeWorker()
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(hiatusMain(os.Args, os.Stdout, os.Stderr))
	}
	ctx := context.Background()
	r, err := servers.StartRedis(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cmd/hiatus tests need redis-server:", err)
		os.Exit(1)
	}
	p, err := servers.StartPostgres(ctx)
	if err != nil {
		r.Stop()
		fmt.Fprintln(os.Stderr, "cmd/hiatus tests need PostgreSQL:", err)
		os.Exit(1)
	}
	testRedisURL, testPostgresURL = r.URL, p.URL
	code := m.Run()
	r.Stop()
	p.Stop()
	os.Exit(code)
}

// hiatus runs the CLI with args and returns its exit status and output.
func hiatus(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runApp(newApp(&out, &errOut), append([]string{"hiatus"}, args...))
	code = exitCode(err, &errOut)
	return code, out.String(), errOut.String()
}

func TestUnknownCommand(t *testing.T) {
	code, _, errOut := hiatus(t, "bogus")
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if want := `unknown command "bogus"`; !bytes.Contains([]byte(errOut), []byte(want)) {
		t.Errorf("stderr %q lacks %q", errOut, want)
	}
}

// TestCLIWords: what a new user typing the wrong thing is told, and that
// nothing starts: each exits 254 with words that name the fix.
func TestCLIWords(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"run", "extra-arg"}, `run takes flags only, not ["extra-arg"]`},
		{[]string{"compare", "extra-arg"}, `compare takes flags only, not ["extra-arg"]`},
		{[]string{"run", "--lease", "500"}, `--lease takes a duration with its unit, such as 500ms, 2s or 1m30s, not "500"`},
		{[]string{"run", "--workers", "three"}, `--workers takes a whole number, not "three"`},
		{[]string{"run", "--time-limit", "99999999999h"}, `--time-limit: "99999999999h" is not a duration such as 500ms`},
		{[]string{"check", "--model", "foo", "../../docs/examples/unsettled.edn"}, `--model: unknown model "foo"`},
		{[]string{"adapter", "check", "--store", "x", "true"}, "adapter check: flag provided but not defined: -store (see hiatus adapter check --help)"},
		// A store that cannot be written is refused before any server is
		// asked for: the unreachable Redis is never reached.
		{[]string{"run", "--store", "/proc/nope", "--redis-url", "redis://127.0.0.1:1"}, "store /proc/nope: mkdir /proc/nope"},
		// A bad inventory is refused before any server starts.
		{[]string{"run", "--store", "STORE", "--hosts", "ssh:/nonexistent/lab.hosts"}, "--hosts ssh:/nonexistent/lab.hosts: inventory: stat /nonexistent/lab.hosts: no such file or directory"},
		{[]string{"run", "--store", "STORE", "--hosts", "sh:lab"}, `--hosts "sh:lab": want local, netns or ssh:FILE`},
		{[]string{"run", "--store", "/etc/passwd/runs", "--redis-url", "redis://127.0.0.1:1"}, "not a directory"},
		{[]string{"compare", "--store", "/proc/nope", "--redis-url", "redis://127.0.0.1:1"}, "store /proc/nope: mkdir /proc/nope"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := slices.Clone(tc.args)
			if i := slices.Index(args, "STORE"); i >= 0 {
				args[i] = t.TempDir() // a store that can be written
			}
			code, _, stderr := hiatus(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.stderr)
			}
		})
	}
}

// TestUnreachableRedisWords runs hiatus as its own process against a Redis
// that is not there: one line that says so, and none of go-redis's own.
func TestUnreachableRedisWords(t *testing.T) {
	cmd := exec.Command(os.Args[0], "run", "--store", t.TempDir(), "--redis-url", "redis://127.0.0.1:1", "--time-limit", "1s")
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
		t.Fatalf("exit %v, want %d\n%s", err, exitUsage, stderr.String())
	}
	if got := stderr.String(); !strings.Contains(got, "cannot reach Redis at redis://127.0.0.1:1") || strings.Contains(got, "pool.go") {
		t.Errorf("stderr %q: want the unreachable Redis named, and no go-redis log line", got)
	}
}

// TestHelp: help is there however it is asked for, from each app of its
// own (the tests run apps side by side; -race watches them).
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"help", "run"}, {"run", "--help"}, {"check", "-h"},
		{"h"}, {"h", "run"}, {"help", "-h"}, {"help", "run", "-h"}, {"help", "help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := hiatus(t, args...)
			if code != exitValid || !strings.Contains(stdout, "USAGE:") {
				t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"help", "bogus"}, `unknown command "help bogus"`},
		{[]string{"--help", "nosuch"}, "No help topic for 'nosuch' (see hiatus --help)"},
		{[]string{"run", "-h", "extra"}, "No help topic for 'extra'"},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus (see hiatus --help)"},
	} {
		if code, _, stderr := hiatus(t, tc.args...); code != exitUsage || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.stderr)
		}
	}
}
