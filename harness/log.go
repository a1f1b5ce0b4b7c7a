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

// A setupLog tells the steps of a run's set-up on machines reached over
// SSH as each ends, with the time since the set-up began: to the user at
// once (a node's step may take seconds, and a slow one must be found),
// and to the run's log once the run has one (replay: the set-up is over
// by then, the copies of the binary waited for). A nil setupLog tells
// nothing: on this machine the set-up takes a moment.
type setupLog struct {
	out   io.Writer
	begin time.Time
	mu    sync.Mutex
	lines []string
}

func newSetupLog(cfg runPlan, out io.Writer) *setupLog {
	if cfg.inventory() == "" {
		return nil
	}
	return &setupLog{out: out, begin: time.Now()}
}

// printf tells a step that ended now.
func (s *setupLog) printf(format string, args ...any) {
	if s == nil {
		return
	}
	line := fmt.Sprintf("set-up %5.1f s: %s", time.Since(s.begin).Seconds(), fmt.Sprintf(format, args...))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
	fmt.Fprintln(s.out, printable.Lines(line))
}

// replay writes the steps told so far into the run's log.
func (s *setupLog) replay(lg *runLog) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		lg.logf("%s", l)
	}
}
