package history

import (
	"strings"
	"testing"
)

// TestParseValueDepth: a value nested past maxDepth is refused before the
// EDN library decodes it (4 MiB of "[" overflowed its recursion, a fatal
// error no recover catches); brackets in strings, characters and comments
// are not nesting.
func TestParseValueDepth(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		name, edn string
		ok        bool
	}{
		{"at the limit", deep(maxDepth), true},
		{"past the limit", deep(maxDepth + 1), false},
		{"4 MiB", deep(4 << 20), false},
		{"brackets in a string", `["` + strings.Repeat("[", 2*maxDepth) + `"]`, true},
		{"escaped quote in a string", `["\"` + strings.Repeat("[", 2*maxDepth) + `"]`, true},
		{"bracket characters", "[" + strings.Repeat(`\[ `, 2*maxDepth) + "]", true},
		{"brackets in a comment", "[ ;" + strings.Repeat("[", 2*maxDepth) + "\n]", true},
		{"a chain of tags", strings.Repeat("#t ", 100*maxDepth+1) + "1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseValue(c.edn)
			if (err == nil) != c.ok {
				t.Fatalf("ParseValue: %v, want ok %v", err, c.ok)
			}
		})
	}
}
