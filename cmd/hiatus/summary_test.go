package main

import (
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
)

// TestLostText: a run's summary shows lost updates as the history proves
// them, never 0 beside a write of unknown outcome that could hide one.
func TestLostText(t *testing.T) {
	for _, tc := range []struct {
		lo, hi, info int64
		want         string
	}{
		{0, 0, 0, "0"},
		{3, 3, 2, "3"},
		{0, 1, 1, "0–1 (1 write of unknown outcome)"},
		{2, 4, 3, "2–4 (3 writes of unknown outcome)"},
	} {
		lc := checker.Result{Fields: []checker.Field{{Key: "info-writes", Value: tc.info},
			{Key: "lost-min", Value: tc.lo}, {Key: "lost-max", Value: tc.hi}}}
		if got := lostText(lc); got != tc.want {
			t.Errorf("lost %d–%d with %d :info writes: %q, want %q", tc.lo, tc.hi, tc.info, got, tc.want)
		}
	}
}
