package main

import (
	"fmt"
	"path/filepath"

	"github.com/hiatus-dev/hiatus/report"
	"github.com/hiatus-dev/hiatus/store"
	"github.com/urfave/cli/v2"
)

func plotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "draw a saved history's performance plots: latency-raw.png, latency-quantiles.png, rate.png",
		ArgsUsage: "[RUN-DIR | HISTORY.edn]",
		Description: "Draws Jepsen's performance plots of a history, with the nemesis's fault windows shaded:\n" +
			"every op's latency against time, latency quantiles per time bucket, and completed ops per\n" +
			"second, each by :f and outcome. A run directory gets them beside its history (a run\n" +
			"draws them as it ends); a lone history file, in --out or its own directory.\n\n" +
			"Exit status: 0 drawn, 254 bad arguments or unreadable input, 255 internal error.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write the plots into `DIR` instead"},
			&cli.StringFlag{Name: "store", Value: "store", Usage: "directory where runs are kept"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usageErrorf("plot takes one history or run directory, not %d arguments", c.NArg())
			}
			_, path, err := store.Resolve(c.String("store"), c.Args().First())
			if err != nil {
				return usageError(err)
			}
			dir := c.String("out")
			if dir == "" {
				dir = filepath.Dir(path)
			}
			ctx, stop := onSignals(c.Context)
			defer stop()
			if _, err := interruptible(ctx, "plot", func() (struct{}, error) {
				return struct{}{}, report.DrawPlots(ctx, path, dir)
			}); err != nil {
				return drawError(ctx, "plot", err)
			}
			fmt.Fprintf(c.App.Writer, "plots: %s, %s, %s in %s\n", report.LatencyRaw, report.LatencyQuantiles, report.Rate, dir)
			return nil
		},
	}
}
