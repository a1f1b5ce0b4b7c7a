package harness

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hiatus-dev/hiatus/store"
)

// A runLog writes what a run did to its hiatus.log, and the headlines to
// the user too.
type runLog struct {
	f   *os.File
	out io.Writer
}

func newRunLog(run store.Run, out io.Writer) (*runLog, error) {
	f, err := os.OpenFile(run.Path(store.Log), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open run log: %w", err)
	}
	return &runLog{f: f, out: out}, nil
}

// logf writes to the log only.
func (l *runLog) logf(format string, args ...any) {
	fmt.Fprintf(l.f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// printf writes to the log and to the user.
func (l *runLog) printf(format string, args ...any) {
	l.logf(format, args...)
	fmt.Fprintf(l.out, format+"\n", args...)
}

func (l *runLog) close() { l.f.Close() }
