package checker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hiatus-dev/hiatus/history"
	"github.com/hiatus-dev/hiatus/internal/files"
)

// A File is a history read from a file for checking: every op, or, for a
// lock-counter history that can be, only what a Stream keeps of them.
type File struct {
	Path      string
	Ops       []history.Op // nil when streamed
	Stream    *Stream      // nil when read whole
	N         int          // ops read
	Truncated error        // where the history was cut short; nil if it was not
	Model     string       // opts.Model, or the model detected
	Detected  bool         // the model was detected from the ops' :f
	Initial   any          // the model's initial state
	// Processes says how the history writes each process numbered below
	// -1 (history.Reader.Processes); nil when it has none.
	Processes map[history.Process]string
	// Record is the lock server's record the File was opened with, which
	// Check holds the history to; nil for none.
	Record *Record
}

// An InputError is what is wrong with a history file or with the options
// asked of it: the user's to fix, not a fault of the checker.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// Open reads the history at path, a regular file, for a check with opts. A
// lock-counter history is read into a Stream, unless whole asks for every
// op (a drawing needs them); any other, or one the options need whole
// (porcupine), is read whole. wrap, if not nil, wraps the file as it is
// read (to count its bytes, say). A truncated history is read as far as it
// goes (File.Truncated). Errors are *InputError, or ctx's when it ended.
func Open(ctx context.Context, path string, opts Options, whole bool, wrap func(io.Reader) io.Reader) (*File, error) {
	if wrap == nil {
		wrap = func(r io.Reader) io.Reader { return r }
	}
	f, err := files.Open(path)
	if err != nil {
		return nil, inputErrorf("read history: %w", err)
	}
	defer f.Close()
	if !whole {
		h, err := openStream(ctx, f, path, opts, wrap)
		if !errors.Is(err, ErrWholeHistory) {
			return h, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, inputErrorf("read history: %w", err)
		}
		opts.beforeWhole()
	}
	return readWhole(ctx, wrap(f), path, opts)
}

// Read reads a history from r, a stream such as standard input that cannot
// be read twice, whole, for a check with opts; name says where it comes
// from in messages. It ends when ctx does, even while r blocks.
func Read(ctx context.Context, r io.Reader, name string, opts Options) (*File, error) {
	return readWhole(ctx, r, name, opts)
}

// openStream reads the history in f into a Stream. It returns an error
// wrapping ErrWholeHistory when the history must be read whole instead:
// when it is not lock-counter, or the options need all its ops.
func openStream(ctx context.Context, f *os.File, path string, opts Options, wrap func(io.Reader) io.Reader) (*File, error) {
	if opts.Analyzer == AnalyzerPorcupine || opts.Model != "" && !streamed(opts.Model) {
		return nil, ErrWholeHistory
	}
	h := &File{Path: path, Stream: NewStreamMemory(opts.Memory), Record: opts.Record}
	if fi, err := f.Stat(); err == nil {
		// hiatus writes about 100 bytes an op; a little more room than
		// needed is cheaper than growing.
		h.Stream.Grow(int(fi.Size() / 80))
	}
	keys := streamKeys()
	if opts.Record != nil {
		h.Stream.SetRecord(opts.Record)
		keys = append(keys, recordStreamKeys()...)
	}
	rd := history.NewReader(wrap(f), path)
	rd.KeepExtra(keys...)
	err := rd.Each(ctx, h.Stream.Add)
	switch {
	case errors.Is(err, history.ErrTruncated):
		h.Truncated = err
	case ctx.Err() != nil:
		h.Stream.Close()
		return nil, ctx.Err()
	case err != nil:
		h.Stream.Close()
		return nil, &InputError{Err: err}
	}
	h.N, h.Processes = h.Stream.Ops(), rd.Processes()
	if err := h.resolve(opts, h.Stream.Model); err != nil {
		h.Stream.Close()
		return nil, err
	}
	if !streamed(h.Model) {
		h.Stream.Close()
		return nil, fmt.Errorf("%w: the %s model", ErrWholeHistory, h.Model)
	}
	return h, nil
}

// beforeWhole calls o.ReadWhole, if set.
func (o Options) beforeWhole() {
	if o.ReadWhole != nil {
		o.ReadWhole()
	}
}

// readWhole reads every op of the history in r.
func readWhole(ctx context.Context, r io.Reader, name string, opts Options) (*File, error) {
	// A malformed history is a *history.SyntaxError, which says
	// file:line:col; a truncated one is checked as far as it goes.
	var ops []history.Op
	rd := history.NewReader(r, name)
	err := rd.Each(ctx, func(o history.Op) { ops = append(ops, o) })
	h := &File{Path: name, Ops: ops, N: len(ops), Record: opts.Record}
	switch {
	case errors.Is(err, history.ErrTruncated):
		h.Truncated = err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &InputError{Err: err}
	}
	h.Processes = rd.Processes()
	if err := h.resolve(opts, func() (string, error) { return Detect(ops) }); err != nil {
		return nil, err
	}
	return h, nil
}

// resolve settles the model, detecting it when opts names none, and its
// initial state.
func (h *File) resolve(opts Options, detect func() (string, error)) error {
	h.Model = opts.Model
	if h.Model == "" {
		m, err := detect()
		if err != nil {
			return inputErrorf("%s: %v", h.Path, err)
		}
		h.Model, h.Detected = m, true
	}
	initial, err := initialFor(h.Model, opts.Initial)
	switch {
	case errors.Is(err, ErrUnknownModel):
		return inputErrorf("--model: %w", err)
	case err != nil:
		return inputErrorf("--initial: %w", err)
	}
	h.Initial = initial
	return nil
}

// Check checks a streamed history, with opts's model and initial state set
// to the File's. A history the Stream cannot judge (ops out of time order,
// as in a journal) is read again, whole, and checked by Check, which
// sorts it. A File read whole is checked by Check.
func (h *File) Check(ctx context.Context, opts Options) (rs Results, err error) {
	defer func() { rs.Processes = h.Processes }()
	opts.Model, opts.Truncated, opts.Record = h.Model, h.Truncated != nil, h.Record
	if h.Stream != nil {
		rs, err := h.Stream.Check(opts)
		if !errors.Is(err, ErrWholeHistory) {
			return rs, err
		}
		opts.beforeWhole()
		h.Ops, _ = history.ReadFile(h.Path) // its errors are known already
		h.Stream = nil
	}
	return Check(ctx, h.Ops, opts)
}
