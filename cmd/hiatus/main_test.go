package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/hiatus-dev/hiatus/internal/servers"
)

// asMainEnv makes the test binary run as hiatus itself, so that tests can
// start a real `hiatus run` process and signal it.
const asMainEnv = "HIATUS_TEST_AS_MAIN"

// Servers shared by the tests of this package that do not test the
// throwaway default itself.
var testRedisURL, testPostgresURL string

// TestMain serves two roles. `hiatus run` starts its workers as
// `<own binary> worker`; under `go test` the own binary is this test binary,
// so when called that way it is a worker, not a test run. Otherwise it
// starts the servers the tests share.
func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" || (len(os.Args) > 1 && os.Args[1] == "worker") {
		os.Exit(exitCode(newApp(os.Stdout, os.Stderr).Run(os.Args), os.Stderr))
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
	err := newApp(&out, &errOut).Run(append([]string{"hiatus"}, args...))
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
