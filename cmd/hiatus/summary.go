package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/hiatus-dev/hiatus/checker"
)

// printSummary prints the figures of a run's sections as a table, under
// the names results.edn gives them (docs/checkers.md defines each), then
// the verdict and, when invalid, why.
func printSummary(out io.Writer, dir string, rs checker.Results) {
	if f, ok := rs.LockFigures(); ok {
		final, lost := "unknown", "unknown"
		if f.Counted {
			final, lost = fmt.Sprint(f.Final), lostText(f)
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw)
		for _, row := range []struct {
			name  string
			value any
			gloss string
		}{
			{"writes", f.Writes, "acknowledged writes"},
			{"final", final, "the counter (or the lists' elements) at the final read"},
			{"lost", lost, "updates the final read is missing"},
			{"overlapping-sections", f.Overlapping, "sections that overlapped another, of those that may have written"},
			{"stale-rejected", f.StaleRejected, "writes (and fence-rmw reads) refused for a stale fence"},
			{"change-rejected", f.ChangeRejected, "writes refused: the counter changed since their read"},
			{"late-writes", f.LateWrites, "writes sent after the writer's lease expired"},
			{"pauses", f.Pauses, "processes frozen by the nemesis or in their sections"},
			{"faults", f.Faults, "nemesis faults begun: pauses, kills, partitions, clock jumps"},
			{"info-ops", f.InfoOps, "ops of unknown outcome"},
		} {
			fmt.Fprintf(tw, "  %s\t%v\t%s\n", row.name, row.value, row.gloss)
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
	printExplanations(out, rs)
	fmt.Fprintf(out, "valid? %v   (%s)\n", rs.Valid, dir)
}

// lostText is a run's lost updates as the history proves them: a count, or
// a range with the writes of unknown outcome that leave it open.
func lostText(f checker.LockFigures) string {
	if f.LostMax == f.LostMin {
		return fmt.Sprint(f.LostMin)
	}
	switch {
	case f.InfoWrites == 1:
		return fmt.Sprintf("%d–%d (1 write of unknown outcome)", f.LostMin, f.LostMax)
	case f.InfoWrites > 1:
		return fmt.Sprintf("%d–%d (%d writes of unknown outcome)", f.LostMin, f.LostMax, f.InfoWrites)
	}
	return fmt.Sprintf("%d–%d (writes that overlap the final read)", f.LostMin, f.LostMax)
}
