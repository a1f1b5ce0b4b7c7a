package adapter

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hiatus-dev/hiatus/internal/printable"
)

// StderrBudget is how much of what one adapter process writes on its
// standard error reaches the log it is given (a run's hiatus.log): 64 KiB,
// some 800 lines, room for a start-up's notices, a few tracebacks (a
// Python or Node trace is 1–5 kB) and the warnings of a run. A library
// that logs each request fills it in seconds and says nothing the history
// does not: one wrote 998 MB in a 7 s run. Past it what the adapter writes
// is still read, at once, so that it never blocks on a full pipe, but only
// counted, and its last StderrTail bytes kept; when the adapter is gone
// the log says how much was dropped, and shows that tail, where a crash
// says why.
const StderrBudget = 64 << 10

// StderrTail is how much of the end of an adapter's dropped standard error
// the log shows when the adapter is gone.
const StderrTail = 2 << 10

// A stderrLog passes what an adapter writes on its standard error to w, up
// to budget bytes, each line escaped (printable.Lines): a log is read on a
// terminal (tail -f, cat), and a run that holds its adapters in process
// (pause-test) has the terminal itself for w. The rest is counted, its
// tail kept, and said by close.
type stderrLog struct {
	mu      sync.Mutex
	w       io.Writer
	command string
	budget  int64
	passed  int64
	dropped int64
	endsNL  bool   // what was passed ends with a newline, or nothing was
	partial []byte // the start of a character whose other bytes are to come
	tail    Tail
}

func newStderrLog(w io.Writer, command string, budget int64) *stderrLog {
	return &stderrLog{w: w, command: command, budget: budget, endsNL: true}
}

// Write never fails and never waits on anything but w, and on w only
// while the budget lasts: the adapter must not block on its stderr.
func (s *stderrLog) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(b)
	if k := min(int64(len(b)), s.budget-s.passed); k > 0 {
		s.pass(b[:k])
		s.passed += k
		b = b[k:]
	}
	if len(b) == 0 {
		return n, nil
	}
	if s.dropped == 0 {
		s.line(fmt.Sprintf("hiatus: adapter %q has written %d bytes on its standard error, all one adapter may add to the log; "+
			"what it writes past them is dropped, and counted when it exits", s.command, s.budget))
	}
	s.dropped += int64(len(b))
	_, _ = s.tail.Write(b)
	return n, nil
}

// pass writes b to w, escaped line by line; a character split between
// two writes waits for its end, not to be taken for invalid UTF-8.
func (s *stderrLog) pass(b []byte) {
	b = append(s.partial, b...)
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	s.partial = bytes.Clone(b[cut:])
	if cut > 0 {
		_, _ = io.WriteString(s.w, printable.Lines(string(b[:cut]))) // the log is not the adapter's to fail
		s.endsNL = b[cut-1] == '\n'
	}
	if len(s.partial) > 0 {
		s.endsNL = false
	}
}

// say writes a line of hiatus's own about the adapter to w, on a line of
// its own: it is not counted against the budget.
func (s *stderrLog) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line(fmt.Sprintf(format, args...))
}

// flush writes what is left of a character whose end will not come now:
// its bytes, escaped.
func (s *stderrLog) flush() {
	if len(s.partial) > 0 {
		_, _ = io.WriteString(s.w, printable.Escape(string(s.partial)))
		s.partial = nil
	}
}

// line writes text to w on a line of its own.
func (s *stderrLog) line(text string) {
	s.flush()
	if !s.endsNL {
		text = "\n" + text
	}
	_, _ = io.WriteString(s.w, text+"\n")
	s.endsNL = true
}

// close says, once the adapter is gone and its stderr read to its end,
// how much of it was dropped, and shows its last lines.
func (s *stderrLog) close(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dropped == 0 {
		s.flush()
		return
	}
	last := s.tail.bytes()
	if int64(len(last)) < s.dropped {
		// It begins mid-line: from its first whole line.
		if i := bytes.IndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
	}
	msg := fmt.Sprintf("hiatus: adapter %q (pid %d) wrote %d bytes on its standard error past the %d the log takes of one adapter; dropped",
		s.command, pid, s.dropped, s.budget)
	if text := printable.Lines(strings.TrimRight(string(last), "\n")); text != "" {
		msg += fmt.Sprintf(". Its last %d bytes:\n%s", len(last), text)
	}
	s.line(msg)
	s.dropped = 0
}
