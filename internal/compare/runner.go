package compare

import (
	"context"
	"fmt"
	"time"
)

// A RunFunc makes run i (from 0) of a setup and returns its figures.
type RunFunc func(ctx context.Context, s Setup, i int) (Figures, error)

// Progress is where a grid stands, reported before each run and after it.
type Progress struct {
	Row, Rows   int           // the row under way, from 1
	Run, Runs   int           // the run under way in it, from 1
	Done, Total int           // runs finished, and in all
	Left        time.Duration // estimated time until the grid is done
	Setup       Setup
	Finished    *Figures // the run just finished; nil when one is about to start
}

// Run makes t.Runs runs of every setup, one after another (runs are timing
// experiments: two at once would disturb each other), and adds their figures
// to t.Rows as they finish, so that an interrupted grid keeps what was done.
// guess is how long a run is expected to take until one has been timed.
// It stops at the first run that fails, or when ctx ends.
func Run(ctx context.Context, t *Table, setups []Setup, run RunFunc, guess time.Duration, report func(Progress)) error {
	t.Rows = make([]Row, len(setups))
	for i, s := range setups {
		t.Rows[i].Setup = s
	}
	total := len(setups) * t.Runs
	start := time.Now()
	done := 0
	left := func() time.Duration {
		per := guess
		if done > 0 {
			per = time.Since(start) / time.Duration(done)
		}
		return per * time.Duration(total-done)
	}
	for i, s := range setups {
		for j := range t.Runs {
			if err := ctx.Err(); err != nil {
				return err
			}
			p := Progress{Row: i + 1, Rows: len(setups), Run: j + 1, Runs: t.Runs, Done: done, Total: total,
				Setup: s, Left: left()}
			report(p)
			f, err := run(ctx, s, j)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", s.Short(), j+1, err)
			}
			if err := ctx.Err(); err != nil {
				// The run was cut short: its figures are not comparable with
				// the others' (its directory stays in the store).
				return err
			}
			t.Rows[i].Runs = append(t.Rows[i].Runs, f)
			done++
			p.Done, p.Left, p.Finished = done, left(), &f
			report(p)
		}
	}
	return nil
}
