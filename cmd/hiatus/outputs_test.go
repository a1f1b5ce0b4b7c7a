package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/store"
)

// TestOutputsRefuseSpecialFiles: a file a command writes, named on its
// command line, is never written through a link nor into a named pipe
// (which would hang the command until someone read it) nor a device: each
// is refused, exit 254 naming it, before the work, and left as it was.
func TestOutputsRefuseSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "h.edn")
	if code, _, stderr := hiatus(t, "gen", "--sections", "20", "--workers", "2", "--seed", "1", "--out", h); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, stderr)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link, fifo := filepath.Join(dir, "link"), filepath.Join(dir, "fifo")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{link, fifo, "/dev/null", filepath.Join(dir, "missing", "x")} {
		for _, args := range [][]string{
			{"gen", "--sections", "5", "--out", target},
			{"check", "--out", target, h},
			{"check", "--html", target, h},
			{"timeline", "--out", target, h},
		} {
			code, _, stderr := hiatus(t, args...)
			if code != exitUsage || !strings.Contains(stderr, target) {
				t.Errorf("%v: exit %d, want %d naming %s: %s", args, code, exitUsage, target, stderr)
			}
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("a command wrote through a link: %s holds %q", outside, b)
	}
	for _, p := range []string{link, fifo} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() == 0 {
			t.Errorf("%s was replaced: %v", p, err)
		}
	}
}

// TestSaveResultsLateFailure: an --out that cannot be written when the
// check ends (it could when it began) loses neither the verdict nor the
// news: an invalid verdict keeps its exit status, a valid one is 254.
func TestSaveResultsLateFailure(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gone", "results.edn")
	for _, c := range []struct {
		valid checker.Validity
		code  int
	}{{checker.Invalid, exitInvalid}, {checker.Unknown, exitUnknown}, {checker.Valid, exitUsage}} {
		var stdout, stderr strings.Builder
		err := saveResults(out, store.Run{}, checker.Results{Valid: c.valid}, &stdout, &stderr)
		if err == nil {
			err = verdictExit(c.valid.ExitCode())
		}
		if code := exitCode(err, io.Discard); code != c.code || !strings.Contains(stderr.String()+fmt.Sprint(err), "not saved") {
			t.Errorf("%v: exit %d, want %d; stderr %q, err %v", c.valid, code, c.code, stderr.String(), err)
		}
	}
}
