package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// TestReadSummaryFS: read through a file system, a run's summary is what
// ReadSummary reads from its directory; a file that fsys will not open or
// that is too long to be hiatus's is as absent.
func TestReadSummaryFS(t *testing.T) {
	test := `{:name "lock-counter", :lock :setnx, :workers 3, :time-limit-ms 10000, :lease-ms 500, :work-ms 20, :nemesis :sigstop}`
	results := `{:valid? false, :lock-counter {:valid? false, :writes 9, :lost-min 1, :lost-max 1, :overlapping-sections 2, :explanation "1 lost"}}`
	const run = "lock-counter/20261201T094801.339Z"
	dir := filepath.Join(t.TempDir(), run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"test.edn": test, "results.edn": results} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := ReadSummary(dir)
	if want.Name != "lock-counter" || want.Verdict != "false" || want.Workers != 3 || !want.Started.Equal(time.Date(2026, 12, 1, 9, 48, 1, 339e6, time.UTC)) {
		t.Fatalf("ReadSummary: %+v", want)
	}
	long := "{:valid? true, :pad \"" + strings.Repeat("x", maxSummaryFile) + "\"}"
	for _, tc := range []struct {
		name    string
		fsys    fstest.MapFS
		dir     string
		verdict string
		config  bool
	}{
		{"the same", fstest.MapFS{run + "/test.edn": {Data: []byte(test)}, run + "/results.edn": {Data: []byte(results)}}, run, "false", true},
		{"no results", fstest.MapFS{run + "/test.edn": {Data: []byte(test)}}, run, "unknown", true},
		{"results too long", fstest.MapFS{run + "/test.edn": {Data: []byte(test)}, run + "/results.edn": {Data: []byte(long)}}, run, "unknown", true},
		{"nothing", fstest.MapFS{}, run, "unknown", false},
	} {
		got := ReadSummaryFS(tc.fsys, tc.dir)
		if got.Verdict != tc.verdict || (got.Config != "") != tc.config || !got.Started.Equal(want.Started) {
			t.Errorf("%s: %+v", tc.name, got)
		}
		if tc.name == "the same" && (got.Name != want.Name || got.Config != want.Config || got.Figures != want.Figures ||
			got.Workers != want.Workers || len(got.Checks) != len(want.Checks)) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
	}
}
