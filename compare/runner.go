package compare

import (
	"context"
	"fmt"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
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

// Run makes t.Runs runs of every setup — the cells of the grid, Cells —
// one after another (runs are timing experiments: two at once would
// disturb each other), and fills t.Rows with their figures (Table.Fill),
// so that an interrupted grid keeps what was done. guess is how long a run
// is expected to take until one has been timed. It stops at the first run
// that fails, or when ctx ends; but a census's run that fails is a cell of
// the census (its Error said), and the census goes on: hundreds of
// libraries' cells are not to be lost to one adapter that cannot start.
func Run(ctx context.Context, t *Table, setups []Setup, run RunFunc, guess time.Duration, report func(Progress)) error {
	var results []Result
	defer func() { t.Fill(setups, results) }()
	cells := Cells(len(setups), t.Runs)
	start := time.Now()
	left := func() time.Duration {
		per := guess
		if len(results) > 0 {
			per = time.Since(start) / time.Duration(len(results))
		}
		return per * time.Duration(len(cells)-len(results))
	}
	for _, c := range cells {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := setups[c.Row]
		p := Progress{Row: c.Row + 1, Rows: len(setups), Run: c.Run + 1, Runs: t.Runs, Done: len(results), Total: len(cells),
			Setup: s, Left: left()}
		report(p)
		f, err := run(ctx, s, c.Run)
		switch {
		case err != nil && s.Probe != "" && ctx.Err() == nil:
			f = Figures{Valid: checker.Unknown.String(), Error: err.Error()}
		case err != nil:
			return fmt.Errorf("%s, run %d: %w", s.Short(), c.Run+1, err)
		}
		if err := ctx.Err(); err != nil {
			// The run was cut short: its figures are not comparable with
			// the others' (its directory stays in the store).
			return err
		}
		results = append(results, Result{Cell: c, Figures: f})
		p.Done, p.Left, p.Finished = len(results), left(), &f
		report(p)
	}
	return nil
}
