package printable_test

import (
	"testing"

	"github.com/hiatus-dev/hiatus/internal/printable"
)

// TestEscape: what a terminal would act on is written as an escape; the
// rest, accents and other scripts too, as it is.
func TestEscape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", `redis-py 4.3.4 "x" \ y`, `redis-py 4.3.4 "x" \ y`},
		{"other scripts", "café 锁 ✓", "café 锁 ✓"},
		{"clear screen", "\x1b[2J\x1b[Hvalid? true", `\x1b[2J\x1b[Hvalid? true`},
		{"title and colour", "\x1b]0;owned\a\x1b[31mred\x1b[0m", `\x1b]0;owned\a\x1b[31mred\x1b[0m`},
		{"carriage return", "valid? false\rvalid? true ", `valid? false\rvalid? true `},
		{"newline", "x\nvalid? true", `x\nvalid? true`},
		{"bell, backspace, tab, NUL, DEL", "\a\b\t\x00\x7f", `\a\b\t\x00\x7f`},
		{"C1 controls", "\u009b2J\u0085\u009d0;t\u009c", `\u009b2J\u0085\u009d0;t\u009c`},
		{"C1 as raw bytes (invalid UTF-8)", "\x9b2J", `\x9b2J`},
		{"invalid UTF-8", "a\xffb\xc3(", `a\xffb\xc3(`},
		{"bidi overrides", "\u202eeurt \u2066x\u2069\u200f", `\u202eeurt \u2066x\u2069\u200f`},
		{"line separator, zero width, BOM", "a\u2028b\u200bc\ufeff", `a\u2028b\u200bc\ufeff`},
		{"no-break space, private use, beyond the BMP", "\u00a0\ue000\U000e0001", `\u00a0\ue000\U000e0001`},
		{"replacement character itself", "\ufffd", "\ufffd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := printable.Escape(tc.in); got != tc.want {
				t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestLines: a block keeps its lines; each is escaped.
func TestLines(t *testing.T) {
	in := "Traceback:\n  \x1b[2Jboom\r\nvalid? true"
	want := "Traceback:\n  \\x1b[2Jboom\\r\nvalid? true"
	if got := printable.Lines(in); got != want {
		t.Errorf("Lines(%q) = %q, want %q", in, got, want)
	}
}
