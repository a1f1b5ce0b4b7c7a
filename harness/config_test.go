package harness

import (
	"strings"
	"testing"
)

// TestRedact: no password of a server's address reaches a log or a message,
// whichever way the address gives it.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://:secret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"postgres://postgres:secret@127.0.0.1/postgres?sslmode=disable", "postgres://postgres:xxxxx@127.0.0.1/postgres?sslmode=disable"},
		{"postgres://postgres@127.0.0.1/postgres?password=secret", "postgres://postgres@127.0.0.1/postgres?password=xxxxx"},
		{"host=127.0.0.1 port=5432 user=postgres password=secret dbname=postgres", "host=127.0.0.1 port=5432 user=postgres password=xxxxx dbname=postgres"},
		{"host=127.0.0.1 password='se cret' user=postgres", "host=127.0.0.1 password=xxxxx user=postgres"},
	} {
		if got := Redact(tc.in); got != tc.want || strings.Contains(got, "secret") || strings.Contains(got, "cret") {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
