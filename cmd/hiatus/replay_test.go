package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayShrinkAdapterWords: the new commands refuse what they cannot do
// with a word on what and where, and the exit status of bad input.
func TestReplayShrinkAdapterWords(t *testing.T) {
	root := t.TempDir()
	bad := filepath.Join(root, "bad-schedule.edn")
	if err := os.WriteFile(bad, []byte("{:faults [{:kind :sigstop}]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	notRun := filepath.Join(root, "not-a-run")
	if err := os.Mkdir(notRun, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--store", root, "--schedule", filepath.Join(root, "none.edn")}, exitUsage, "--schedule"},
		{[]string{"run", "--store", root, "--schedule", bad}, exitUsage, "fault 0: want :kind, :at-ms"},
		{[]string{"run", "--store", root, "--lock", "exec:"}, exitUsage, "exec: needs the adapter's command"},
		{[]string{"run", "--store", root, "--lock", "exec:/nonexistent/adapter"}, exitUsage, "did not say hello"},
		{[]string{"replay", "--store", root}, exitUsage, "one run directory"},
		{[]string{"replay", "--store", root, notRun}, exitUsage, "want a run directory"},
		{[]string{"shrink", "--store", root, notRun}, exitUsage, "want a run directory"},
		{[]string{"shrink", "--store", root, "--runs", "2", "--need", "3", notRun}, exitUsage, "--need must be 1 to --runs"},
		{[]string{"adapter", "check"}, exitUsage, "the adapter's command as one argument"},
		{[]string{"adapter", "check", "/nonexistent/adapter"}, exitInvalid, "FAIL  hello"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := hiatus(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			if !strings.Contains(out+errOut, tc.want) {
				t.Errorf("output %q does not say %q", out+errOut, tc.want)
			}
		})
	}
}
