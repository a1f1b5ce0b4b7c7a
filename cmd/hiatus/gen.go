package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/hiatus-dev/hiatus/harness"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/internal/gen"
	"github.com/urfave/cli/v2"
)

func genCommand() *cli.Command {
	return &cli.Command{
		Name:  "gen",
		Usage: "write a synthetic lock-counter (or list-append) history, seeded, in the format run writes",
		Description: "Writes the history of a simulated run: WORKERS contend for a lease lock (--lease) and run\n" +
			"SECTIONS critical sections (acquire, read, write the value read plus one, release; eight\n" +
			"lines each). --lost injects lost updates: a holder is SIGSTOPped past its lease while\n" +
			"another section increments, then writes the same value. --info makes that many writes\n" +
			"time out with an unknown outcome, which the seed decides. The same flags always give\n" +
			"the same history, to reproduce benchmarks and compare checkers on one input.\n\n" +
			"Examples:\n" +
			"  hiatus gen --sections 250000 --workers 64 --seed 1 --out /tmp/h.edn\n" +
			"  hiatus gen --sections 1000 --workers 8 --lost 3 --info 10 --seed 7 > h.edn && hiatus check h.edn",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "sections", Value: 1000, Usage: "critical sections, those that lose updates included"},
			&cli.IntFlag{Name: "workers", Value: 3, Usage: "workers contending for the lock"},
			&cli.IntFlag{Name: "lost", Usage: "lost updates to inject (two sections each)"},
			&cli.IntFlag{Name: "info", Usage: "writes of unknown outcome (:info)"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "seed of every choice"},
			&cli.DurationFlag{Name: "lease", Value: gen.DefaultLease, Usage: "the lock's lease"},
			&cli.DurationFlag{Name: "work", Value: gen.DefaultWork, Usage: "time between a section's read and its write"},
			&cli.StringFlag{Name: "workload", Value: harness.WorkloadCounter, Usage: "the workload of the simulated run, as run's --workload: " + harness.WorkloadUsage()},
			&cli.StringFlag{Name: "out", Usage: "write the history to `FILE` instead of stdout (a new or regular file: hiatus writes no link, pipe or device)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErrorf("gen takes no arguments, only flags (see hiatus gen --help)")
			}
			if err := harness.CheckWorkload(c.String("workload")); err != nil {
				return usageErrorf("%v", err)
			}
			cfg := gen.Config{
				Sections: c.Int("sections"), Workers: c.Int("workers"), Lost: c.Int("lost"), Info: c.Int("info"),
				Seed: c.Int64("seed"), Lease: c.Duration("lease"), Work: c.Duration("work"), Lists: c.String("workload") == harness.WorkloadListAppend,
			}
			return runGen(cfg, c.String("out"), c.App.Writer, c.App.ErrWriter)
		},
	}
}

// runGen writes the history cfg describes to the file out, or to stdout,
// and says what it wrote on stderr.
func runGen(cfg gen.Config, out string, stdout, stderr io.Writer) error {
	if err := cfg.Check(); err != nil {
		return usageError(err)
	}
	w, name := stdout, "stdout"
	var f *files.File
	if out != "" {
		var err error
		if f, err = files.Create(out); err != nil {
			return usageErrorf("--out: %v", err)
		}
		defer f.Abort() // after Close, a no-op: the file has its name
		w, name = f, out
	}
	bw := bufio.NewWriter(w)
	st, err := gen.Write(bw, cfg)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return err
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "hiatus: wrote %d ops to %s: %d sections of %d workers, %d acknowledged writes, %d lost, %d :info (%d took effect); final %d\n",
		st.Ops, name, cfg.Sections, cfg.Workers, st.Writes, cfg.Lost, cfg.Info, st.Happened, st.Final)
	return nil
}
