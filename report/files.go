package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
	"github.com/hiatus-dev/hiatus/store"
)

// LinearFile is porcupine's view of a run's linearizability check, which
// the timeline links to: `hiatus check --html` draws the same.
const LinearFile = "linear.html"

// An InputError is a history that cannot be drawn: unreadable, malformed,
// out of time order, or with nothing to draw. It is the user's to fix, not
// a fault of hiatus.
type InputError struct {
	Path string
	Err  error
}

func (e *InputError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }

func (e *InputError) Unwrap() error { return e.Err }

// DrawPlots draws the performance plots of the history file at path into
// dir, reading it op by op.
func DrawPlots(ctx context.Context, path, dir string) error {
	p := NewPerf()
	if _, err := eachOp(ctx, path, p.Add); err != nil {
		return err
	}
	if err := p.WritePlots(dir); err != nil {
		if errors.Is(err, ErrUntimed) {
			return &InputError{path, fmt.Errorf("%w: nothing to plot against", err)}
		}
		return err
	}
	return nil
}

// DrawTimeline draws the timeline t of the history file at path into the
// file out, with the summary of the run directory it lies in and a link to
// porcupine's view beside it. The history is read once, into t and a check
// of it, so that the page colours what the check found; without a
// results.edn beside it, the header gives this check's verdicts.
func DrawTimeline(ctx context.Context, path, out string, t *Timeline) error {
	dir := filepath.Dir(path)
	page := TimelinePage{Summary: ReadSummary(dir), Source: path}
	if _, err := os.Stat(filepath.Join(dir, store.Test)); err != nil {
		page.Name, page.Started = filepath.Base(path), time.Time{}
	}
	if t.Workers == 0 {
		t.Workers = page.Workers
	}
	if _, err := os.Stat(filepath.Join(dir, LinearFile)); err == nil {
		if rel, err := filepath.Rel(filepath.Dir(out), filepath.Join(dir, LinearFile)); err == nil {
			page.Linear = filepath.ToSlash(rel)
		}
	}
	s := checker.NewStream()
	defer s.Close()
	truncated, err := eachOp(ctx, path, func(o history.Op) {
		s.Add(o)
		t.Add(o)
	})
	if err != nil {
		return err
	}
	if err := addServer(ctx, dir, t); err != nil {
		return err
	}
	s.FlagSections(t.Kept())
	rs, err := s.Check(checker.Options{Model: page.RunModel(), Truncated: truncated})
	switch {
	case errors.Is(err, checker.ErrWholeHistory):
		return &InputError{path, ErrUnsorted}
	case err != nil:
		return &InputError{path, err}
	}
	t.SetFlags(s.Flagged())
	if _, err := os.Stat(filepath.Join(dir, store.Results)); err != nil {
		v, err := history.ParseValue(string(rs.AppendEDN(nil)))
		if m, ok := v.(map[history.Keyword]any); ok && err == nil {
			page.SetResults(m)
		}
	}
	err = files.WriteWith(out, func(w io.Writer) error { return t.WriteHTML(w, page) })
	if errors.Is(err, ErrUntimed) || errors.Is(err, ErrNoSections) || errors.Is(err, ErrUnsorted) {
		return &InputError{path, fmt.Errorf("%w: nothing to draw", err)}
	}
	return err
}

// addServer hands t the lock server's record of the run in dir, when it
// has one (lockserver.edn), event by event.
func addServer(ctx context.Context, dir string, t *Timeline) error {
	path, ok, err := store.Run{Dir: dir}.Optional(store.LockServer)
	if err != nil || !ok {
		return err
	}
	f, err := files.Open(path)
	if err != nil {
		return &InputError{path, err}
	}
	defer f.Close()
	r := history.NewServerReader(f, path)
	for ctx.Err() == nil {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return &InputError{path, err}
		}
		t.AddServer(e)
	}
	return ctx.Err()
}

// eachOp hands add every op of the history file at path, and says whether
// the file ended in a truncated op, as a run cut short leaves it. Only a
// cancelled ctx is returned as is.
func eachOp(ctx context.Context, path string, add func(history.Op)) (truncated bool, err error) {
	f, err := files.Open(path)
	if err != nil {
		return false, &InputError{path, fmt.Errorf("read history: %w", err)}
	}
	defer f.Close()
	err = history.NewReader(f, path).Each(ctx, add)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(err, history.ErrTruncated):
		return true, nil
	case err != nil:
		return false, &InputError{path, err}
	}
	return false, nil
}
