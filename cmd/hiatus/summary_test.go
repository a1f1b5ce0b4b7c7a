package main

import (
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
)

// TestLostText: a run's summary shows lost updates as the history proves
// them, never 0 beside a write of unknown outcome that could hide one.
func TestLostText(t *testing.T) {
	for _, tc := range []struct {
		f    checker.LockFigures
		want string
	}{
		{checker.LockFigures{}, "0"},
		{checker.LockFigures{LostMin: 3, LostMax: 3, InfoWrites: 2}, "3"},
		{checker.LockFigures{LostMin: 0, LostMax: 1, InfoWrites: 1}, "0–1 (1 write of unknown outcome)"},
		{checker.LockFigures{LostMin: 2, LostMax: 4, InfoWrites: 3}, "2–4 (3 writes of unknown outcome)"},
		{checker.LockFigures{LostMin: 1, LostMax: 2}, "1–2 (writes that overlap the final read)"},
	} {
		if got := lostText(tc.f); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.f, got, tc.want)
		}
	}
}
