package progress

import (
	"fmt"
	"io"
	"time"

	"github.com/hiatus-dev/hiatus/compare"
)

// A Compare shows where a comparison stands: on a terminal, one line
// rewritten in place; elsewhere, a line per finished run.
type Compare struct {
	w   io.Writer
	tty bool
}

// NewCompare shows a comparison's progress on w.
func NewCompare(w io.Writer) *Compare {
	return &Compare{w: w, tty: IsTerminal(w)}
}

// Report shows where the comparison stands.
func (p *Compare) Report(pr compare.Progress) {
	if p.tty {
		if pr.Finished == nil {
			fmt.Fprintf(p.w, "\r\033[Krow %d/%d, run %d/%d (%s), ~%v left", pr.Row, pr.Rows, pr.Run, pr.Runs,
				pr.Setup.Short(), pr.Left.Round(time.Second))
		}
		return
	}
	if f := pr.Finished; f != nil {
		fmt.Fprintf(p.w, "row %d/%d, run %d/%d (%s): writes %d, lost %s, overlapping-sections %d, stale-rejected %d, valid? %s  %s; ~%v left\n",
			pr.Row, pr.Rows, pr.Run, pr.Runs, pr.Setup.Short(), f.Writes, f.LostText(), f.Overlapping, f.StaleRejected, f.Valid,
			f.Dir, pr.Left.Round(time.Second))
	}
}

// End clears the progress line.
func (p *Compare) End() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
