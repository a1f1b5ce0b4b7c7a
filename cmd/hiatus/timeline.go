package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/urfave/cli/v2"
)

func timelineCommand() *cli.Command {
	return &cli.Command{
		Name:      "timeline",
		Usage:     "draw a saved history's lease timeline: timeline.html",
		ArgsUsage: "[RUN-DIR | HISTORY.edn]",
		Description: "Draws the history on the Redis clock, one row a worker slot: each critical section from\n" +
			"acquire to release with its lease window, reads and writes, every fault as a shaded band,\n" +
			"stale writes and lost updates in colours of their own, with the verdict and each check's\n" +
			"explanation above. One self-contained page that works offline. A run directory gets it\n" +
			"beside its history (a run draws it as it ends); a lone history, in --out or beside it.\n" +
			"The history is checked as it is read, so that the colours are the check's; the header\n" +
			"gives results.edn's verdicts when one lies beside it, else this check's.\n\n" +
			"Exit status: 0 drawn, 254 bad arguments or unreadable input, 255 internal error.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write the page to `FILE` instead (a new or regular file: hiatus writes no link, pipe or device)"},
			&cli.DurationFlag{Name: "from", Usage: "draw the sections that begin this long after the first op, or later (a window of a long history)"},
			&cli.DurationFlag{Name: "to", Usage: "draw the sections that begin before this long after the first op; 0: to the end"},
			&cli.IntFlag{Name: "max-sections", Value: report.DefaultMaxSections, Usage: "keep at most `N` sections"},
			&cli.IntFlag{Name: "workers", Usage: "draw process p in row p mod `N` (default: test.edn's workers, else the processes before the first :info)"},
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usageErrorf("timeline takes one history or run directory, not %d arguments", c.NArg())
			}
			if c.Int("max-sections") < 1 || c.Int("workers") < 0 || c.Duration("from") < 0 || c.Duration("to") < 0 {
				return usageErrorf("--max-sections must be at least 1, and --workers, --from and --to not negative")
			}
			_, path, err := store.Resolve(c.String("store"), c.Args().First())
			if err != nil {
				return usageError(err)
			}
			out := c.String("out")
			if out == "" {
				out = filepath.Join(filepath.Dir(path), report.TimelineFile)
			}
			if err := files.Writable(out); err != nil {
				return usageErrorf("--out: %v", err)
			}
			t := &report.Timeline{Workers: c.Int("workers"), MaxSections: c.Int("max-sections"),
				From: int64(c.Duration("from")), To: int64(c.Duration("to"))}
			ctx, stop := onSignals(c.Context)
			defer stop()
			if _, err := interruptible(ctx, "timeline", func() (struct{}, error) {
				return struct{}{}, report.DrawTimeline(ctx, path, out, t)
			}); err != nil {
				return drawError(ctx, "timeline", err)
			}
			fmt.Fprintf(c.App.Writer, "timeline: %s\n", out)
			return nil
		},
	}
}

// drawError gives an error of drawing a history its exit status: a history
// that cannot be drawn is the user's to fix.
func drawError(ctx context.Context, what string, err error) error {
	switch {
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: fmt.Errorf("%s interrupted", what)}
	case errors.As(err, new(*report.InputError)):
		return usageError(err)
	}
	return err
}
