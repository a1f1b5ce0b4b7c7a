package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
)

// printSummary prints the figures of a lock-counter run as a table, then the
// verdict and, when invalid, why.
func printSummary(out io.Writer, cfg runConfig, dir string, rs checker.Results) {
	lc, ok := rs.Check("lock-counter")
	if ok {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw)
		for _, row := range []struct{ label, key string }{
			{"successful writes", "writes"},
			{"final counter", "final"},
			{"lost updates", "lost-min"},
			{"overlapping sections", "overlapping-sections"},
			{"stale writes rejected", "stale-rejected"},
			{"writes past the lease", "late-writes"},
			{"pauses injected", "pauses"},
			{"faults injected", "faults"},
			{":info ops", "info-ops"},
		} {
			v := lc.Get(row.key)
			switch {
			case v == nil:
				v = "unknown"
			case row.key == "lost-min":
				v = lostText(lc)
			}
			fmt.Fprintf(tw, "  %s\t%v\n", row.label, v)
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
	for _, r := range rs.Checks {
		if r.Explanation != "" {
			fmt.Fprintf(out, "%s: %s\n", r.Name, r.Explanation)
		}
	}
	fmt.Fprintf(out, "valid? %v   (%s)\n", rs.Valid, dir)
}

// lostText is a run's lost updates as the history proves them: a count, or
// a range with the writes of unknown outcome that leave it open.
func lostText(lc checker.Result) string {
	lo, _ := history.Int(lc.Get("lost-min"))
	hi, _ := history.Int(lc.Get("lost-max"))
	if hi == lo {
		return fmt.Sprint(lo)
	}
	n, _ := history.Int(lc.Get("info-writes"))
	writes := "writes"
	if n == 1 {
		writes = "write"
	}
	return fmt.Sprintf("%d–%d (%d %s of unknown outcome)", lo, hi, n, writes)
}
