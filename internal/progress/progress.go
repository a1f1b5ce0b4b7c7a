// Package progress shows a person at a terminal how far a long command has
// got: a check reading a large history, a comparison's runs. Where the
// output is no terminal (a pipe, a log) it writes only what a log wants.
package progress

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// A Check shows, on a terminal, how far a long check has got: a line
// rewritten twice a second once the check has taken more than a couple of
// seconds, cleared at the end. Elsewhere (a pipe, a log) it shows nothing.
type Check struct {
	w     io.Writer
	path  string
	total int64 // the history's size in bytes; 0 if unknown
	start time.Time
	read  atomic.Int64           // bytes read so far
	phase atomic.Pointer[string] // "" while reading, then what the check is doing
	stop  chan struct{}
	once  sync.Once
	done  sync.WaitGroup
}

// after is how long a check runs before its progress is shown.
const after = 2 * time.Second

// StartCheck starts showing the progress of a check of the file at path,
// of total bytes, on w when w is a terminal.
func StartCheck(w io.Writer, path string, total int64) *Check {
	p := &Check{w: w, path: path, total: total, start: time.Now(), stop: make(chan struct{})}
	if !IsTerminal(w) {
		return p
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		shown := false
		for {
			select {
			case <-p.stop:
				if shown {
					fmt.Fprint(p.w, "\r\033[K")
				}
				return
			case now := <-tick.C:
				if now.Sub(p.start) >= after {
					fmt.Fprint(p.w, "\r\033[K"+p.line(now))
					shown = true
				}
			}
		}
	}()
	return p
}

// IsTerminal reports whether w is a terminal, where a line rewritten in
// place makes sense; in a pipe or a log it would be noise.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Reader counts what r reads as the check's progress.
func (p *Check) Reader(r io.Reader) io.Reader { return &countingReader{r: r, n: &p.read} }

// Checking says the history is read and what the check does now.
func (p *Check) Checking(what string) { p.phase.Store(&what) }

// End clears the line, if one was shown. It may be called more than once.
func (p *Check) End() {
	p.once.Do(func() { close(p.stop) })
	p.done.Wait()
}

// line is the progress line at now.
func (p *Check) line(now time.Time) string {
	elapsed := now.Sub(p.start).Round(time.Second)
	if ph := p.phase.Load(); ph != nil && *ph != "" {
		return fmt.Sprintf("%s: %s (%v)", p.path, *ph, elapsed)
	}
	read := p.read.Load()
	if p.total <= 0 || read <= 0 {
		return fmt.Sprintf("%s: read %s (%v)", p.path, Size(read), elapsed)
	}
	frac := min(1, float64(read)/float64(p.total))
	left := time.Duration(float64(now.Sub(p.start)) * (1 - frac) / frac).Round(time.Second)
	return fmt.Sprintf("%s: read %.0f%% (%s of %s), ~%v left to read", p.path, 100*frac, Size(read), Size(p.total), left)
}

// Thousands writes n with commas between thousands: 2,500,000.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// Size writes a byte count for people.
func Size(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// A countingReader adds the bytes it reads to n.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	c.n.Add(int64(k))
	return k, err
}
