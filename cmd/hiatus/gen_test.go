package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenCommand(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a phrase stderr must hold
		check  int    // the exit status of hiatus check on the history; -1 for no history
	}{
		{"valid", []string{"--sections", "100", "--workers", "4", "--seed", "1"}, exitValid,
			"wrote 810 ops", exitValid},
		{"lost", []string{"--sections", "100", "--workers", "4", "--lost", "2", "--seed", "1"}, exitValid,
			"2 lost", exitInvalid},
		{"info", []string{"--sections", "100", "--workers", "64", "--info", "30", "--seed", "1"}, exitValid,
			"30 :info", exitValid},
		{"lists", []string{"--workload", "list-append", "--sections", "100", "--workers", "3", "--info", "5", "--seed", "2"}, exitValid,
			"wrote 8", exitValid},
		{"lists lost", []string{"--workload", "list-append", "--sections", "100", "--workers", "3", "--lost", "2", "--seed", "2"}, exitValid,
			"2 lost", exitInvalid},
		{"too many", []string{"--sections", "3", "--lost", "2"}, exitUsage, "need more than 3 sections", -1},
		{"no workers", []string{"--workers", "0"}, exitUsage, "workers must be at least 1", -1},
		{"argument", []string{"history.edn"}, exitUsage, "takes no arguments", -1},
		{"unknown workload", []string{"--workload", "queue"}, exitUsage, `--workload "queue": want one of counter, list-append`, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".edn")
			code, stdout, stderr := hiatus(t, append(append([]string{"gen"}, tc.args...), "--out", out)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, want %d; stderr %q lacks %q", code, tc.code, stderr, tc.stderr)
			}
			if stdout != "" {
				t.Errorf("--out, yet stdout has %q", stdout)
			}
			if tc.check < 0 {
				return
			}
			if code, stdout, _ := hiatus(t, "check", out); code != tc.check {
				t.Errorf("hiatus check exit %d, want %d\n%s", code, tc.check, stdout)
			}
		})
	}
}

// TestGenStdout checks that without --out the history goes to stdout, the
// same as to a file.
func TestGenStdout(t *testing.T) {
	out := filepath.Join(t.TempDir(), "h.edn")
	args := []string{"gen", "--sections", "20", "--workers", "3", "--info", "2", "--seed", "4"}
	code, stdout, _ := hiatus(t, args...)
	if code != exitValid {
		t.Fatalf("exit %d", code)
	}
	hiatus(t, append(args, "--out", out)...)
	b, err := os.ReadFile(out)
	if err != nil || string(b) != stdout {
		t.Errorf("stdout and --out differ (%v)", err)
	}
}
