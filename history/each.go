package history

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"runtime"
	"slices"
	"sync/atomic"
)

// Each hands the ops of r to add, in history order, and returns the error
// that ended the history: nil at its clean end, ctx's error when ctx ends
// first. It gives exactly the ops and errors Next gives: the input is cut
// at line ends into chunks that up to maxWorkers goroutines parse at once
// with the hand-written parser (op maps it knows, with whitespace, commas
// and comments between them), while add runs on the caller's goroutine, in
// order. From the first chunk that parser refuses (a vector around the
// ops, a form it does not know) to the end, the ops are read as Next reads
// them, on the caller's goroutine, the input still read ahead on another.
// When ctx ends, Each returns at once, even while a read blocks (a
// terminal, a pipe with a quiet writer): that read's goroutine ends with
// it, and r must not be used again. A Reader already read from is read on
// as Next reads it.
func (r *Reader) Each(ctx context.Context, add func(Op)) error {
	inner, cancel := context.WithCancel(ctx)
	defer cancel() // the pipeline's goroutines end
	p := newPipeline(inner, r.rd, min(runtime.GOMAXPROCS(0), maxWorkers), cmp.Or(r.chunk, chunkSize))
	p.keep = r.keep
	if r.slow || len(r.buf) > 0 || r.n > 0 || r.err != nil {
		p.refuse.Store(true) // the library's path, or a Reader already read
	}
	go p.split()
	for range p.workers {
		go p.parse()
	}
	err := r.eachChunk(p, add)
	if err == nil {
		err = r.eachSlow(p, add)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err // Next, which read the end, has kept it for its next call
}

// eachChunk hands over the ops of the chunks parsed whole, and returns nil
// at the first chunk refused, which p.next returns again, or at the end.
func (r *Reader) eachChunk(p *pipeline, add func(Op)) error {
	for {
		c, err := p.next()
		if err != nil {
			return err
		}
		if c == nil || !c.ok {
			p.refuse.Store(true) // the chunks after it are read as Next reads them
			p.unread = c
			return nil
		}
		for i := range c.ops {
			o := &c.ops[i]
			if o.Index == Unset {
				o.Index = r.n
			}
			r.n++
			add(*o)
			if i%1024 == 1023 && p.ctx.Err() != nil {
				return p.ctx.Err()
			}
		}
		r.started = r.started || len(c.ops) > 0
		r.line += c.lines
		r.base += int64(len(c.data))
		r.lineS = r.base // chunks parsed whole end at a line's end
		p.done(c)
	}
}

// eachSlow hands over the ops of the rest of the input, read by Next.
func (r *Reader) eachSlow(p *pipeline, add func(Op)) error {
	r.rd = p // past what r has read already, if anything
	for i := 0; ; i++ {
		o, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		add(o)
		if i%1024 == 1023 && p.ctx.Err() != nil {
			return p.ctx.Err()
		}
	}
}

// The chunks of a pipeline: 1 MiB of lines each, and enough of them that
// every worker has one to parse while the caller adds the ops of another.
const (
	chunkSize = 1 << 20
	// maxWorkers bounds the parsers, and so the chunks in flight
	// (2*workers+2, each 1 MiB and its ops, about 3 MB): the memory of a
	// check (docs/checkers.md) is not the number of cores'.
	maxWorkers = 4
	// maxLine bounds a line read whole into a chunk; a longer line goes,
	// cut, to Next, which bounds an op map at maxOp.
	maxLine = 16 << 20
)

// A chunk is a piece of the input: whole lines, but for the input's end
// and lines longer than maxLine.
type chunk struct {
	data  []byte
	rest  []byte // bytes of data not yet read by Next (pipeline.Read)
	err   error  // the read error after data (io.EOF at the end)
	lines int    // newlines in data
	cut   bool   // data ends inside a line
	ok    bool   // the parser read data whole: ops are all its ops
	ops   []Op
	ready chan struct{}
}

// A pipeline reads its input in chunks on one goroutine, parses them on
// workers goroutines, and hands them back in order.
type pipeline struct {
	ctx     context.Context
	rd      io.Reader
	workers int
	size    int         // of a chunk
	maxLine int         // the longest line a chunk holds whole
	free    chan *chunk // chunks to fill
	todo    chan *chunk // chunks to parse, in no order
	order   chan *chunk // chunks in input order, parsed or being parsed
	keep    []Keyword   // the Reader's KeepExtra
	refuse  atomic.Bool // chunks are no longer parsed: Next reads them
	unread  *chunk      // the chunk Read reads from
}

// newPipeline returns a pipeline of chunks of size bytes (more for a long
// line) parsed by workers goroutines; Each starts its goroutines.
func newPipeline(ctx context.Context, rd io.Reader, workers, size int) *pipeline {
	n := 2*workers + 2
	p := &pipeline{ctx: ctx, rd: rd, workers: workers, size: size, maxLine: max(maxLine*size/chunkSize, 16*size),
		free: make(chan *chunk, n), todo: make(chan *chunk, n), order: make(chan *chunk, n)}
	for range n {
		p.free <- &chunk{ready: make(chan struct{}, 1)} // its data when first filled: most inputs are small
	}
	return p
}

// split reads the input into chunks until its end or a read error.
func (p *pipeline) split() {
	defer close(p.todo)
	defer close(p.order)
	var carry []byte // the start of a line the last chunk did not hold
	for {
		var c *chunk
		select {
		case c = <-p.free:
		case <-p.ctx.Done():
			return
		}
		if c.data == nil {
			c.data = make([]byte, 0, p.size)
		}
		c.data = append(c.data[:0], carry...)
		p.fill(c)
		carry = carry[:0]
		if end := bytes.LastIndexByte(c.data, '\n') + 1; c.err == nil && !c.cut && end > 0 {
			carry = append(carry, c.data[end:]...)
			c.data = c.data[:end]
		}
		select {
		case p.order <- c:
		case <-p.ctx.Done():
			return
		}
		p.todo <- c // never blocks: it has room for every chunk
		if c.err != nil {
			return
		}
	}
}

// fill reads into c until it is full and holds a line's end, or the input
// ends.
func (p *pipeline) fill(c *chunk) {
	c.err, c.cut = nil, false
	for idle := 0; c.err == nil; {
		if len(c.data) == cap(c.data) {
			if bytes.IndexByte(c.data, '\n') >= 0 {
				return
			}
			if len(c.data) >= p.maxLine {
				c.cut = true
				return
			}
			c.data = slices.Grow(c.data, len(c.data)) // room for the rest of a long line
		}
		n, err := p.rd.Read(c.data[len(c.data):cap(c.data)])
		c.data = c.data[:len(c.data)+n]
		c.err = err
		if idle++; n > 0 {
			idle = 0
		} else if idle == 100 && err == nil {
			c.err = io.ErrNoProgress
		}
	}
}

// parse parses the chunks it is given, unless the pipeline refuses them.
func (p *pipeline) parse() {
	kws := &Reader{keep: p.keep}
	for c := range p.todo {
		c.ok = false
		c.ops = c.ops[:0]
		if !p.refuse.Load() && (c.err == nil || c.err == io.EOF) {
			c.parse(kws)
		}
		c.ready <- struct{}{}
	}
}

// parse decodes the op maps of c.data that make it up whole, with nothing
// but whitespace, commas and comments between them, with the hand-written
// parser, kws interning their keywords.
func (c *chunk) parse(kws *Reader) {
	c.lines = bytes.Count(c.data, nl)
	if c.cut {
		return
	}
	// A history hiatus writes has an op a line: room for as many, where
	// growing by append took 27 MB of new memory a check of 250,000
	// sections.
	c.ops = slices.Grow(c.ops, c.lines+1)
	b := c.data
	for i := 0; ; {
		if i = skipSpace(b, i); i == len(b) {
			c.ok = true
			return
		}
		if b[i] != '{' {
			return
		}
		d := fastDec{b: b[i:], r: kws}
		op, ok := d.op()
		if !ok {
			return
		}
		c.ops = append(c.ops, op)
		i += d.i
	}
}

// next returns the next chunk in order, parsed; nil at the end.
func (p *pipeline) next() (*chunk, error) {
	var c *chunk
	var ok bool
	select {
	case c, ok = <-p.order:
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
	if !ok {
		return nil, nil
	}
	select {
	case <-c.ready:
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
	c.rest = c.data
	return c, nil
}

// done gives c back to be filled again.
func (p *pipeline) done(c *chunk) {
	clear(c.ops) // the ops' maps are garbage once added
	if cap(c.data) > p.size {
		c.data = make([]byte, 0, p.size) // a long line's room goes back
	}
	p.free <- c
}

// Read reads the chunks in order, for Next.
func (p *pipeline) Read(b []byte) (int, error) {
	for {
		c := p.unread
		if c == nil {
			return 0, io.EOF
		}
		if len(c.rest) > 0 {
			n := copy(b, c.rest)
			c.rest = c.rest[n:]
			return n, nil
		}
		if c.err != nil {
			return 0, c.err
		}
		p.done(c)
		var err error
		if p.unread, err = p.next(); err != nil {
			return 0, err
		}
	}
}
