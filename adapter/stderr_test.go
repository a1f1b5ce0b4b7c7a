package adapter

import (
	"bytes"
	"strings"
	"testing"
)

// TestStderrLog: what an adapter writes on stderr reaches the log escaped
// line by line, a character split between two writes whole; past the
// budget it is dropped, counted and its end shown when the adapter is gone.
func TestStderrLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		budget int64
		want   string
	}{
		{"plain lines", []string{"starting\n", "ready\n"}, 100, "starting\nready\n"},
		{"escapes", []string{"\x1b[2J\x1b[Hvalid? true\r\a\u009b\u202e\xff\n"}, 100, `\x1b[2J\x1b[Hvalid? true\r\a\u009b\u202e\xff` + "\n"},
		{"a character split between writes", []string{"caf\xc3", "\xa9 \xe2\x9c", "\x93\n"}, 100, "café ✓\n"},
		{"a character cut off by the exit", []string{"caf\xc3"}, 100, `caf\xc3`},
		{"past the budget", []string{"0123456789\nabc\n", "def\nlast\n"}, 11, "0123456789\n" +
			`hiatus: adapter "cmd" has written 11 bytes on its standard error, all one adapter may add to the log; what it writes past them is dropped, and counted when it exits` + "\n" +
			`hiatus: adapter "cmd" (pid 7) wrote 13 bytes on its standard error past the 11 the log takes of one adapter; dropped. Its last 13 bytes:` + "\nabc\ndef\nlast\n"},
		{"cut mid-line", []string{"0123456789abc\n"}, 5, "01234\n" +
			`hiatus: adapter "cmd" has written 5 bytes on its standard error, all one adapter may add to the log; what it writes past them is dropped, and counted when it exits` + "\n" +
			`hiatus: adapter "cmd" (pid 7) wrote 9 bytes on its standard error past the 5 the log takes of one adapter; dropped. Its last 9 bytes:` + "\n56789abc\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			s := newStderrLog(&out, "cmd", tc.budget)
			for _, w := range tc.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			s.close(7)
			if got := out.String(); got != tc.want {
				t.Errorf("the log:\n%s\nwant:\n%s", got, tc.want)
			}
			if strings.ContainsAny(out.String(), "\x1b\r\a") {
				t.Errorf("a control character reached the log: %q", out.String())
			}
		})
	}
}
