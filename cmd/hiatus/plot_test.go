package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/report"
)

// TestPlotCommand: plots of a saved history go beside it or to --out; a
// history without :time, or none, is the user's to fix.
func TestPlotCommand(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "h.edn")
	if code, _, stderr := hiatus(t, "gen", "--sections", "300", "--workers", "4", "--lost", "1", "--seed", "1", "--out", h); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "plots")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plot", h}, {"plot", "--out", out, h}} {
		code, stdout, stderr := hiatus(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, code, stdout, stderr)
		}
	}
	for _, d := range []string{dir, out} {
		for _, name := range []string{report.LatencyRaw, report.LatencyQuantiles, report.Rate} {
			if fi, err := os.Stat(filepath.Join(d, name)); err != nil || fi.Size() == 0 {
				t.Errorf("%s: %v", filepath.Join(d, name), err)
			}
		}
	}
	untimed := writeFile(t, "untimed.edn", "{:type :invoke, :process 0, :f :read}\n{:type :ok, :process 0, :f :read, :value 0}\n")
	for _, tc := range []struct{ path, want string }{
		{untimed, ":time"},
		{filepath.Join(dir, "nope.edn"), "no such file"},
	} {
		code, _, stderr := hiatus(t, "plot", tc.path)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("plot %s: exit %d, %q; want %d naming %q", tc.path, code, stderr, exitUsage, tc.want)
		}
	}
}
