package main

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

// A checkProgress shows, on a terminal, how far a long check has got: a line
// rewritten twice a second once the check has taken more than a couple of
// seconds, cleared at the end. Elsewhere (a pipe, a log) it shows nothing.
type checkProgress struct {
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

// progressAfter is how long a check runs before its progress is shown.
const progressAfter = 2 * time.Second

// startProgress starts showing the progress of a check of the file at path,
// of total bytes, on w when w is a terminal.
func startProgress(w io.Writer, path string, total int64) *checkProgress {
	p := &checkProgress{w: w, path: path, total: total, start: time.Now(), stop: make(chan struct{})}
	if !isTerminal(w) {
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
				if now.Sub(p.start) >= progressAfter {
					fmt.Fprint(p.w, "\r\033[K"+p.line(now))
					shown = true
				}
			}
		}
	}()
	return p
}

// isTerminal reports whether w is a terminal, where a line rewritten in
// place makes sense; in a pipe or a log it would be noise.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// reader counts what r reads as the check's progress.
func (p *checkProgress) reader(r io.Reader) io.Reader { return &countingReader{r: r, n: &p.read} }

// checking says the history is read and what the check does now.
func (p *checkProgress) checking(what string) { p.phase.Store(&what) }

// end clears the line, if one was shown. It may be called more than once.
func (p *checkProgress) end() {
	p.once.Do(func() { close(p.stop) })
	p.done.Wait()
}

// line is the progress line at now.
func (p *checkProgress) line(now time.Time) string {
	elapsed := now.Sub(p.start).Round(time.Second)
	if ph := p.phase.Load(); ph != nil && *ph != "" {
		return fmt.Sprintf("%s: %s (%v)", p.path, *ph, elapsed)
	}
	read := p.read.Load()
	if p.total <= 0 || read <= 0 {
		return fmt.Sprintf("%s: read %s (%v)", p.path, size(read), elapsed)
	}
	frac := min(1, float64(read)/float64(p.total))
	left := time.Duration(float64(now.Sub(p.start)) * (1 - frac) / frac).Round(time.Second)
	return fmt.Sprintf("%s: read %.0f%% (%s of %s), ~%v left to read", p.path, 100*frac, size(read), size(p.total), left)
}

// thousands writes n with commas between thousands: 2,500,000.
func thousands(n int64) string {
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

// size writes a byte count for people.
func size(n int64) string {
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
