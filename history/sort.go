package history

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/hiatus-dev/hiatus/internal/files"
)

// SortOptions bound a SortFile.
type SortOptions struct {
	// Chunk is how many ops the sort holds in memory at once; a history
	// longer than one chunk is sorted chunk by chunk into files in Dir and
	// merged, so that one of any length sorts in that much memory.
	Chunk int
	// FanIn bounds the files merged at once, and so the files open at
	// once.
	FanIn int
	// Partial says a history that ends inside an op (its disk refused the
	// rest) ends there, rather than fails.
	Partial bool
	// Dir is where the sort makes a directory for its files, which it
	// removes before it returns; "" for os.TempDir.
	Dir string
}

// The bounds of a SortFile whose options leave them unset: about 25 MB of
// ops with their maps in memory, and a day's run of 300 million ops, 3,000
// chunks, merged in two passes.
const (
	defaultSortChunk = 100_000
	defaultSortFanIn = 64
)

// SortFile reads the history at path, a run's journal, and hands its ops
// to emit in a history's order — by :time, ops of equal time in the order
// they arrived, so that a process's own ops stay in order — with dense
// :index from 0.
func SortFile(ctx context.Context, path string, o SortOptions, emit func(Op) error) error {
	f, err := files.Open(path)
	if err != nil {
		return fmt.Errorf("sort the journal: %w", err)
	}
	defer f.Close()
	chunk, fanIn := cmp.Or(o.Chunk, defaultSortChunk), cmp.Or(o.FanIn, defaultSortFanIn)
	tmp, err := os.MkdirTemp(o.Dir, "sort-")
	if err != nil {
		return fmt.Errorf("sort the journal: %w", err)
	}
	defer os.RemoveAll(tmp)
	var runs []string
	ops := make([]Op, 0, min(chunk, 1<<16)) // each chunk in the last one's array: written out before the next is read
	byTime := func(a, b Op) int { return cmp.Compare(a.Time, b.Time) }
	// The journal is parsed in parallel (Each); a chunk is sorted and
	// written out on this goroutine, the parse waiting for it.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var werr error
	err = NewReader(f, path).Each(rctx, func(op Op) {
		if ops = append(ops, op); len(ops) < chunk || werr != nil {
			return
		}
		slices.SortStableFunc(ops, byTime)
		run := filepath.Join(tmp, fmt.Sprintf("run-%d.edn", len(runs)))
		if werr = writeRun(run, ops); werr != nil {
			cancel()
			return
		}
		runs, ops = append(runs, run), ops[:0]
	})
	switch {
	case werr != nil:
		return werr
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil && !(o.Partial && errors.Is(err, ErrTruncated)):
		return fmt.Errorf("sort the journal: %w", err)
	}
	slices.SortStableFunc(ops, byTime)
	if len(runs) == 0 {
		return emitAll(ops, emit) // the whole journal fitted in one chunk
	}
	if len(ops) > 0 {
		run := filepath.Join(tmp, fmt.Sprintf("run-%d.edn", len(runs)))
		if err := writeRun(run, ops); err != nil {
			return err
		}
		runs = append(runs, run)
	}
	if runs, err = narrow(ctx, tmp, runs, fanIn); err != nil {
		return err
	}
	return mergeRuns(ctx, runs, emit)
}

// narrow merges consecutive groups of runs into longer ones until at most
// fanIn are left. Each group takes its place among the others, so that ties
// still go to the run that came earlier in the journal.
func narrow(ctx context.Context, tmp string, runs []string, fanIn int) ([]string, error) {
	fanIn = max(fanIn, 2) // one at a time would never narrow
	for pass := 0; len(runs) > fanIn; pass++ {
		var next []string
		for i := 0; i < len(runs); i += fanIn {
			group := runs[i:min(i+fanIn, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			path := filepath.Join(tmp, fmt.Sprintf("pass-%d-%d.edn", pass, len(next)))
			if err := mergeInto(ctx, group, path); err != nil {
				return nil, err
			}
			for _, g := range group {
				os.Remove(g)
			}
			next = append(next, path)
		}
		runs = next
	}
	return runs, nil
}

// mergeInto merges sorted runs into one file at path.
func mergeInto(ctx context.Context, runs []string, path string) error {
	return writeOps(path, func(emit func(Op) error) error { return mergeRuns(ctx, runs, emit) })
}

func emitAll(ops []Op, emit func(Op) error) error {
	for i, o := range ops {
		o.Index = int64(i)
		if err := emit(o); err != nil {
			return err
		}
	}
	return nil
}

func writeRun(path string, ops []Op) error {
	return writeOps(path, func(emit func(Op) error) error {
		for _, o := range ops {
			if err := emit(o); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeOps writes to a new file at path the ops each hands to its emit.
func writeOps(path string, each func(emit func(Op) error) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("sort the journal: %w", err)
	}
	w := NewWriter(f)
	err = each(w.Write)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("sort the journal: %w", cerr)
	}
	return err
}

// mergeRuns merges sorted runs, each of them later in the journal than the
// one before, so that ties of :time go to the earlier run.
func mergeRuns(ctx context.Context, paths []string, emit func(Op) error) (err error) {
	h := &runHeap{}
	for i, p := range paths {
		f, ferr := os.Open(p)
		if ferr != nil {
			return fmt.Errorf("sort the journal: %w", ferr)
		}
		defer f.Close()
		c := &runCursor{r: NewReader(f, p), run: i}
		if err := c.next(); err != nil {
			return err
		}
		if c.ok {
			h.cs = append(h.cs, c)
		}
	}
	heap.Init(h)
	for i := int64(0); h.Len() > 0; i++ {
		c := h.cs[0]
		o := c.op
		o.Index = i
		if err := emit(o); err != nil {
			return err
		}
		if err := c.next(); err != nil {
			return err
		}
		if c.ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
		if i%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// A runCursor is the next op of one sorted run.
type runCursor struct {
	r   *Reader
	run int
	op  Op
	ok  bool
}

func (c *runCursor) next() error {
	o, err := c.r.Next()
	switch {
	case errors.Is(err, io.EOF):
		c.ok = false
		return nil
	case err != nil:
		return fmt.Errorf("sort the journal: %w", err)
	}
	c.op, c.ok = o, true
	return nil
}

// A runHeap orders run cursors by their next op's :time, then by run.
type runHeap struct{ cs []*runCursor }

func (h *runHeap) Len() int { return len(h.cs) }
func (h *runHeap) Less(i, j int) bool {
	a, b := h.cs[i], h.cs[j]
	return a.op.Time < b.op.Time || a.op.Time == b.op.Time && a.run < b.run
}
func (h *runHeap) Swap(i, j int) { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *runHeap) Push(x any)    { h.cs = append(h.cs, x.(*runCursor)) }
func (h *runHeap) Pop() any {
	c := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return c
}
