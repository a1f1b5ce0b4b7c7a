package history

import (
	"context"
	"io"
)

// Each hands the ops of r to add, in history order, and returns the
// error that ended the history: nil at its clean end, ctx's error when ctx
// ends first. The reader parses on a goroutine of its own while add runs on
// the caller's, a batch of ops behind, so that two cores share the work of
// a large history. When ctx ends, Each returns at once, even while a read
// blocks (a terminal, a pipe with a quiet writer): that read's goroutine
// ends with it, and r must not be used again.
func (r *Reader) Each(ctx context.Context, add func(Op)) error {
	const batches, size = 4, 4096
	full := make(chan []Op, batches)
	empty := make(chan []Op, batches)
	for range batches {
		empty <- make([]Op, 0, size)
	}
	var rerr error
	go func() {
		defer close(full)
		send := func(b []Op) bool {
			select {
			case full <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			var b []Op
			select {
			case b = <-empty:
			case <-ctx.Done():
				return
			}
			for b = b[:0]; len(b) < size; {
				o, err := r.Next()
				if err != nil {
					if err != io.EOF {
						rerr = err
					}
					send(b)
					return
				}
				b = append(b, o)
			}
			if !send(b) {
				return
			}
		}
	}()
	for {
		var b []Op
		var ok bool
		select {
		case b, ok = <-full:
		case <-ctx.Done():
			return ctx.Err() // the reader stops at its next batch, or read
		}
		if !ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, o := range b {
			add(o)
		}
		clear(b) // the ops' maps are garbage once added
		empty <- b
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return rerr // read after full is closed, which follows the last write
}
