package checker

import (
	"encoding/binary"
	"errors"
	"io"
)

// The buffers of the records on disk. A list's writer is written a run at
// a time; a run's reader is one of as many as a list has runs, all read at
// once by a merge, so it stays small.
const (
	spillBuffer = 1 << 20
	runBuffer   = 1 << 15
)

// errShortRun is a sorted run that ends inside a record, errBadVarint one
// with a word no encoder writes (a varint of more than 64 bits).
var (
	errShortRun  = errors.New("a sorted run ends inside a record")
	errBadVarint = errors.New("a sorted run holds a word of more than 64 bits")
)

// A recordEncoder writes the records of one sorted run as varints of each
// word's difference from the same word of the record before (the first
// from zero). Differences wrap as int64 arithmetic does, and the decoder's
// sums wrap back, so every word comes back exactly, whatever it is.
type recordEncoder struct{ prev, cur []int64 }

// newRecordEncoder is the encoder of a run of records of words words.
func newRecordEncoder(words int) *recordEncoder {
	return &recordEncoder{prev: make([]int64, words), cur: make([]int64, words)}
}

// append appends the record in cur to b, and makes it the record before
// the next; the caller fills cur again.
func (e *recordEncoder) append(b []byte) []byte {
	for k, v := range e.cur {
		b = binary.AppendVarint(b, v-e.prev[k])
	}
	e.prev, e.cur = e.cur, e.prev
	return b
}

// A recordDecoder reads back what a recordEncoder wrote.
type recordDecoder struct {
	r      io.Reader
	buf    []byte
	lo, hi int  // the bytes of buf not yet decoded
	eof    bool // r has nothing more
	prev   []int64
}

// newRecordDecoder reads the run r of records of words words, through a
// buffer of size bytes (more when a record may take more).
func newRecordDecoder(r io.Reader, words, size int) *recordDecoder {
	return &recordDecoder{r: r, buf: make([]byte, max(size, words*binary.MaxVarintLen64)), prev: make([]int64, words)}
}

// next decodes the next record into w; it reports false at the end of the
// run.
func (d *recordDecoder) next(w []int64) (bool, error) {
	if d.hi-d.lo < len(w)*binary.MaxVarintLen64 && !d.eof {
		if err := d.fill(); err != nil {
			return false, err
		}
	}
	if d.lo == d.hi {
		return false, nil
	}
	for k := range w {
		v, n := binary.Varint(d.buf[d.lo:d.hi])
		switch {
		case n == 0:
			return false, errShortRun
		case n < 0:
			return false, errBadVarint
		}
		d.lo += n
		d.prev[k] += v
		w[k] = d.prev[k]
	}
	return true, nil
}

// fill moves what is left to the front of the buffer and reads after it
// until the buffer is full or r ends.
func (d *recordDecoder) fill() error {
	d.hi = copy(d.buf, d.buf[d.lo:d.hi])
	d.lo = 0
	for d.hi < len(d.buf) {
		n, err := d.r.Read(d.buf[d.hi:])
		d.hi += n
		switch {
		case errors.Is(err, io.EOF):
			d.eof = true
			return nil
		case err != nil:
			return err
		}
	}
	return nil
}
