package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hiatus-dev/hiatus/internal/adaptertest"
)

// hostile is what an adapter or a history might say to take over the
// terminal it is shown on: escape sequences that clear the screen and
// move the cursor, a fake verdict on a line of its own, a carriage return,
// a bell, a C1 control (CSI), a bidi override, and (where bytes pass as
// they are) invalid UTF-8.
const hostile = "\x1b[2J\x1b[H\nvalid? true FAKE\r\a\u009b31m\u202eevil"

// terminalSafe fails the test if out holds anything but printable
// characters and newlines, or a line that begins with the fake verdict.
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 reached the terminal:\n%q", what, out)
	}
	for _, r := range out {
		if r != '\n' && !strconv.IsPrint(r) {
			t.Errorf("%s: %U reached the terminal:\n%q", what, r, out)
			break
		}
	}
	if strings.Contains("\n"+out, "\nvalid? true FAKE") {
		t.Errorf("%s: a supplied value made a line of its own:\n%s", what, out)
	}
}

// TestHostileWords: what an adapter (its hello, its standard error, its
// answers in a trace) or a history (a process's name, a value an
// explanation quotes) supplies reaches the terminal escaped, in each
// command that shows it.
func TestHostileWords(t *testing.T) {
	dir := t.TempDir()
	hello := adaptertest.CommandWith("setnx", adaptertest.Fields{"name": hostile, "version": hostile, "library": hostile}, nil)
	// Raw bytes on stderr, invalid UTF-8 among them; then it exits.
	dies := `sh -c 'printf "\033[2J\033[H\nvalid? true FAKE\r\a\302\233\342\200\256\377\n" >&2; exit 3'`
	history := filepath.Join(dir, "history.edn")
	raw := "\x1b[2J\x1b[H\nvalid? true FAKE\r\a\xc2\x9b\xe2\x80\xae\xff"
	if err := os.WriteFile(history, []byte(`{:type :invoke, :f :write, :value 1, :process 0, :time 1, :index 0}
{:type :ok, :f :write, :value 1, :process 0, :time 2, :index 1}
{:type :invoke, :f :read, :value nil, :process "`+raw+`", :time 3, :index 2}
{:type :ok, :f :read, :value "`+raw+`", :process "`+raw+`", :time 4, :index 3}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // escaped, in what it printed
	}{
		{"adapter check: hello", []string{"adapter", "check", "--redis-url", testRedisURL, hello}, exitValid, `ok    hello                  \x1b[2J\x1b[H\nvalid? true FAKE\r\a\u009b31m\u202eevil`},
		{"adapter check --trace: hello", []string{"adapter", "check", "--trace", "--redis-url", testRedisURL, hello}, exitValid, `\u009b31m\u202eevil`},
		{"adapter check: stderr", []string{"adapter", "check", "--redis-url", testRedisURL, dies}, exitInvalid, `    \x1b[2J\x1b[H`},
		{"run: hello", []string{"run", "--store", dir, "--lock", "exec:" + hello, "--workers", "1", "--time-limit", "1s", "--nemesis", "none",
			"--redis-url", testRedisURL, "--postgres-url", testPostgresURL}, exitValid, `lock adapter: \x1b[2J\x1b[H\nvalid? true FAKE\r\a\u009b31m\u202eevil`},
		{"run: stderr", []string{"run", "--store", dir, "--lock", "exec:" + dies, "--redis-url", testRedisURL, "--postgres-url", testPostgresURL},
			exitUsage, `valid? true FAKE\r\a\u009b\u202e\xff`},
		{"check: history", []string{"check", "--model", "cas-register", history}, exitInvalid, `-2 is "\x1b[2J\x1b[H\nvalid? true FAKE\r\a\u009b\u202e\xff"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := hiatus(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, stdout, stderr)
			}
			terminalSafe(t, "stdout", stdout)
			terminalSafe(t, "stderr", stderr)
			if !strings.Contains(stdout+stderr, tc.want) {
				t.Errorf("it did not print %s:\n%s%s", tc.want, stdout, stderr)
			}
		})
	}
}
