package harness

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hiatus-dev/hiatus/internal/printable"
	"github.com/hiatus-dev/hiatus/store"
)

// A runLog writes what a run did to its hiatus.log, and the headlines to
// the user too. It is safe for concurrent use: workers that end early say
// so from goroutines of their own.
type runLog struct {
	f   *os.File
	out io.Writer
	mu  sync.Mutex // orders the lines on out, which may be anything
}

func newRunLog(run store.Run, out io.Writer) (*runLog, error) {
	f, err := run.Append(store.Log)
	if err != nil {
		return nil, fmt.Errorf("open run log: %w", err)
	}
	return &runLog{f: f, out: out}, nil
}

// logf writes to the log only, escaped as printf's terminal copy is: the
// log is read on a terminal too (less, tail -f).
func (l *runLog) logf(format string, args ...any) {
	fmt.Fprintf(l.f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), printable.Lines(fmt.Sprintf(format, args...)))
}

// printf writes to the log and to the user, escaped for a terminal
// (printable.Lines): a headline may quote what an adapter said, or the
// command it was started by.
func (l *runLog) printf(format string, args ...any) {
	l.logf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.out, printable.Lines(fmt.Sprintf(format, args...)))
}

func (l *runLog) close() { l.f.Close() }
