package shellquote

import (
	"os/exec"
	"testing"
)

// TestQuote: the shell reads each quoted word back as it was.
func TestQuote(t *testing.T) {
	for _, w := range []string{"", "setnx", "exec:node adapters/node/redlock.js", `it's "quoted" $HOME; rm -rf /`, "a\nb", "--lease=500ms"} {
		out, err := exec.Command("/bin/sh", "-c", "printf %s "+Quote(w)).Output()
		if err != nil || string(out) != w {
			t.Errorf("Quote(%q) = %s, read back as %q (%v)", w, Quote(w), out, err)
		}
	}
}
