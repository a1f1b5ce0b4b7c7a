package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/report"
)

// TestTimelineCommand: a lone history's timeline goes beside it or to
// --out, with the verdict of a check made for it; a window of it holds
// what it says; bad arguments and histories with nothing to draw are the
// user's to fix, and leave no page behind.
func TestTimelineCommand(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "h.edn")
	if code, _, stderr := hiatus(t, "gen", "--sections", "300", "--workers", "4", "--lost", "2", "--seed", "1", "--out", h); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "window.html")
	for _, tc := range []struct {
		args []string
		page string
		want []string
	}{
		{[]string{"timeline", h}, filepath.Join(dir, report.TimelineFile),
			[]string{"valid? false", "updates lost", "h.edn"}},
		{[]string{"timeline", "--from", "1s", "--to", "2s", "--out", out, h}, out,
			[]string{"This timeline holds", "valid? false"}},
	} {
		code, stdout, stderr := hiatus(t, tc.args...)
		if code != 0 || !strings.Contains(stdout, tc.page) {
			t.Fatalf("%v: exit %d: %s%s", tc.args, code, stdout, stderr)
		}
		b, err := os.ReadFile(tc.page)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%v: the page lacks %q", tc.args, w)
			}
		}
	}
	untimed := writeFile(t, "untimed.edn", "{:type :invoke, :process 0, :f :read}\n{:type :ok, :process 0, :f :read, :value 0}\n")
	journal := writeFile(t, "journal.edn", "{:index 0, :time 20, :type :invoke, :process 0, :f :acquire}\n"+
		"{:index 1, :time 10, :type :invoke, :process 1, :f :acquire}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{untimed}, ":time"},
		{[]string{journal}, "out of time order"},
		{[]string{filepath.Join(dir, "nope.edn")}, "no such file"},
		{[]string{"--from", "1h", h}, "no critical section"},
		{[]string{"--max-sections", "0", h}, "--max-sections"},
	} {
		code, _, stderr := hiatus(t, append([]string{"timeline", "--out", filepath.Join(dir, "bad.html")}, tc.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("timeline %v: exit %d, %q; want %d naming %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*bad.html*")); len(left) > 0 {
		t.Errorf("failed timelines left %v", left)
	}
}
