package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hiatus-dev/hiatus/internal/files"
	"olympos.io/encoding/edn"
)

// ErrTruncated reports a history that ends inside an op, as the history of a
// run that crashed mid-write does. Errors wrapping it carry the position.
var ErrTruncated = errors.New("history truncated")

// A SyntaxError reports malformed EDN, or an EDN value that is not an op,
// at a 1-based line and byte column. A truncated history is a SyntaxError
// whose Err is ErrTruncated.
type SyntaxError struct {
	File      string
	Line, Col int
	Msg       string
	Err       error // ErrTruncated or nil
}

func (e *SyntaxError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

const (
	maxDepth = 1000    // deeper nesting is refused rather than risk the stack
	maxOp    = 1 << 28 // bytes; an op map longer than this is refused, not buffered
)

// A Reader reads ops from an EDN history one at a time. It takes every shape
// Jepsen and Knossos write: one op map after another (usually one a line), or
// a single vector [...] or list (...) of op maps, with ; comments anywhere.
// It holds one op map in memory at a time, however the history is shaped.
//
// Ops that lack :index get their position in the history (0 for the first
// op map) so that results can name them; ops that lack :time get Unset.
// :process :nemesis reads as Nemesis; a non-negative integer as itself; a
// renewer's name (:renew-3, :renew-3-1) as that renewer (Renewer); any
// other process (a keyword or string name, a negative number, any EDN value)
// as a number below -1: -2 for the first the Reader meets, -3 for the next
// and so on, one number per way of writing it, stable within one history
// (Processes lists them). Every process but the nemesis is a client, whose
// ops are paired and checked. An op map must have :type, :process and :f.
//
// Each op map is decoded by a hand-written parser for the EDN subset AppendOp
// writes, with olympos.io/encoding/edn as the fallback for any op map that
// parser does not recognise (tags, characters, symbols, discards, \u
// escapes...). The library is the bottleneck: on 100k hiatus-shaped lines
// (11 MB), one edn.Decoder over the whole input decodes 22 MB/s with 111
// allocations an op, and the fallback, which decodes key by key to place
// its errors, 5 MB/s with 235; the hand-written parser reads 290 MB/s with
// 1 allocation an op (BenchmarkReadLines, BenchmarkReadLinesGeneral).
//
// Values decode as the Op doc lists; integers that fit in int64 are int64,
// others *big.Int, whether written with N or not. Maps whose keys are all
// keywords decode to map[Keyword]any, others to map[any]any. A tagged value
// such as #inst "..." decodes to its untagged value, symbols and characters
// to strings.
type Reader struct {
	rd    io.Reader
	name  string
	slow  bool // decode with the library only; tests check both paths agree
	chunk int  // Each's chunk size in bytes; chunkSize when 0 (tests make it tiny)
	buf   []byte
	off   int   // start of unread input in buf
	base  int64 // stream offset of buf[0]
	line  int   // line of buf[off]
	lineS int64 // stream offset where that line starts
	eof   bool
	rerr  error // read error, reported once buffered input is used up
	err   error // sticky result of Next

	started bool
	close   byte   // closing bracket of the enclosing vector or list, or 0
	openLn  [2]int // line and column of its opening bracket
	closed  bool
	n       int64 // op maps read
	procs   map[string]Process
	kws     map[string]Keyword
	keep    []Keyword                  // the extra keys kept (KeepExtra); all when nil
	shared  map[string]map[Keyword]any // Extra maps shared among ops, by their text (extras.extra)
	keyBuf  []byte
	tags    *edn.TagMap
	stack   []opener
}

type opener struct {
	off   int
	close byte
}

// NewReader returns a Reader of the history in r; name, usually the file's
// path, prefixes error messages.
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{rd: r, name: name, line: 1, buf: make([]byte, 0, 64<<10)}
}

// KeepExtra makes r keep, of an op's extra keys, only those named, and
// leave the others out of Op.Extra, as a check does that reads four of
// them: a map and a string fewer an op, a fifth of the parse's time on a
// history hiatus wrote (docs/performance.md). The values of the keys left
// out are read all the same, so a history is malformed just as without it.
// Ops whose kept keys are written alike may share one Extra map, which
// must then be read only. Call it before the first op is read.
func (r *Reader) KeepExtra(keys ...Keyword) {
	r.keep = append([]Keyword{}, keys...)
}

// keeps reports whether an op's extra key k is kept.
func (r *Reader) keeps(k []byte) bool {
	if r.keep == nil {
		return true
	}
	for _, kw := range r.keep {
		if string(kw) == string(k) {
			return true
		}
	}
	return false
}

// ReadAll reads every op of the history in r. On an error it returns the ops
// before the one at fault, so a truncated history yields all its complete ops
// together with an error wrapping ErrTruncated.
func ReadAll(r io.Reader, name string) ([]Op, error) {
	var ops []Op
	err := NewReader(r, name).Each(context.Background(), func(o Op) { ops = append(ops, o) })
	return ops, err
}

// ReadFile reads every op of the history file at path, as ReadAll does.
// It reads only a regular file (files.Open).
func ReadFile(path string) ([]Op, error) {
	f, err := files.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	return ReadAll(f, path)
}

// Next returns the next op, or io.EOF at the clean end of the history.
// After an error, it returns that error again.
func (r *Reader) Next() (Op, error) {
	if r.err != nil {
		return Op{}, r.err
	}
	op, err := r.next()
	if err != nil {
		r.err = err
	}
	return op, err
}

func (r *Reader) next() (Op, error) {
	for {
		r.skipSpace()
		b := r.buf[r.off:]
		if len(b) == 0 {
			return Op{}, r.atEOF()
		}
		switch c := b[0]; {
		case r.closed:
			return Op{}, r.errAt(0, "expected the end of the history after the %c closing it, got %q", r.close, r.token())
		case !r.started && (c == '[' || c == '('):
			r.started, r.close = true, closerOf(c)
			r.openLn[0], r.openLn[1] = r.pos(0)
			r.advance(1)
			continue
		case r.close != 0 && c == r.close:
			r.closed = true
			r.advance(1)
			continue
		case c == '#' && len(b) == 1 && r.fill():
			continue // whether it starts a discard is in the next read
		case c == '#' && len(b) > 1 && b[1] == '_':
			end, err := r.scan()
			if err != nil {
				return Op{}, err
			}
			r.advance(end)
			continue
		case c != '{':
			if isCloser(c) && r.close != 0 {
				return Op{}, r.errAt(0, "expected %c to close the %s opened at %d:%d, got %c",
					r.close, kindName(r.close), r.openLn[0], r.openLn[1], c)
			}
			return Op{}, r.errAt(0, "expected an op map {...}, got %q", r.token())
		}
		r.started = true
		var op Op
		end, ok := 0, false
		if !r.slow {
			// Most op maps decode in one pass; only those the fast parser
			// refuses, or that straddle the buffer's end, are scanned first.
			d := fastDec{b: b, r: r}
			op, ok = d.op()
			end = d.i
		}
		if !ok {
			var err error
			if end, err = r.scan(); err != nil {
				return Op{}, err
			}
			if op, err = r.decode(r.buf[r.off : r.off+end]); err != nil {
				return Op{}, err
			}
		}
		if op.Index == Unset {
			op.Index = r.n
		}
		r.n++
		r.advance(end)
		return op, nil
	}
}

// atEOF is the result of a Next that finds no more input.
func (r *Reader) atEOF() error {
	if r.rerr != nil {
		return fmt.Errorf("read %s: %w", r.name, r.rerr)
	}
	if r.close != 0 && !r.closed {
		e := r.errAt(0, "expected %c to close the %s opened at %d:%d, got the end of the history",
			r.close, kindName(r.close), r.openLn[0], r.openLn[1])
		e.Err = ErrTruncated
		return e
	}
	return io.EOF
}

// fill reads more input into buf, keeping buf[off:]. It reports whether it
// added any.
func (r *Reader) fill() bool {
	if r.eof || r.rerr != nil {
		return false
	}
	if r.off > 0 {
		n := copy(r.buf, r.buf[r.off:])
		r.base += int64(r.off)
		r.buf, r.off = r.buf[:n], 0
	}
	if len(r.buf) == cap(r.buf) {
		nb := make([]byte, len(r.buf), 2*cap(r.buf))
		copy(nb, r.buf)
		r.buf = nb
	}
	for tries := 0; tries < 100; tries++ {
		n, err := r.rd.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+n]
		if err == io.EOF {
			r.eof = true
		} else if err != nil {
			r.rerr = err
		}
		if n > 0 || err != nil {
			return n > 0
		}
	}
	r.rerr = io.ErrNoProgress
	return false
}

// advance consumes n bytes of buf[off:], keeping the line count.
func (r *Reader) advance(n int) {
	seg := r.buf[r.off : r.off+n]
	if k := bytes.Count(seg, nl); k > 0 {
		r.line += k
		r.lineS = r.base + int64(r.off+bytes.LastIndexByte(seg, '\n')+1)
	}
	r.off += n
}

var nl = []byte{'\n'}

// pos returns the line and column of buf[off+i].
func (r *Reader) pos(i int) (line, col int) {
	seg := r.buf[r.off : r.off+i]
	line, start := r.line, r.lineS-r.base
	if k := bytes.Count(seg, nl); k > 0 {
		line += k
		start = int64(r.off + bytes.LastIndexByte(seg, '\n') + 1)
	}
	return line, r.off + i - int(start) + 1
}

func (r *Reader) errAt(i int, format string, args ...any) *SyntaxError {
	line, col := r.pos(i)
	return &SyntaxError{File: r.name, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// skipSpace consumes whitespace, commas and comments.
func (r *Reader) skipSpace() {
	for {
		b := r.buf[r.off:]
		i := skipSpace(b, 0)
		r.advance(i)
		if i < len(b) && b[i] != ';' {
			return
		}
		// The buffer ends in space or inside a comment; a comment is
		// consumed only once its newline, or the end of input, is read.
		if !r.fill() {
			r.advance(len(b) - i)
			return
		}
	}
}

// skipSpace returns the index of the first byte of b at or after i that is
// neither whitespace, a comma nor part of a complete comment.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\n', '\t', '\r', ',', '\f', '\v':
			i++
		case ';':
			k := bytes.IndexByte(b[i:], '\n')
			if k < 0 {
				return i
			}
			i += k + 1
		default:
			return i
		}
	}
	return i
}

// scan returns the length of the form at buf[off], reading more input as
// needed.
func (r *Reader) scan() (int, error) {
	for {
		end, err := r.formEnd(r.buf[r.off:], 0, r.eof)
		if err != errNeedMore {
			return end, err
		}
		if len(r.buf)-r.off > maxOp {
			return 0, r.errAt(0, "op map longer than %d bytes", maxOp)
		}
		if !r.fill() && r.rerr != nil {
			return 0, fmt.Errorf("read %s: %w", r.name, r.rerr)
		}
	}
}

var errNeedMore = errors.New("need more input")

// special marks the bytes that matter to bracket matching.
var special = [256]bool{'"': true, '\\': true, ';': true, '(': true, ')': true,
	'[': true, ']': true, '{': true, '}': true}

// delim marks the bytes that end an atom.
var delim = [256]bool{' ': true, '\n': true, '\t': true, '\r': true, ',': true,
	'\f': true, '\v': true, '"': true, '\\': true, ';': true, '(': true, ')': true,
	'[': true, ']': true, '{': true, '}': true}

// formEnd returns the end of the form that starts at b[i]. It returns
// errNeedMore when b ends inside the form and eof is false; b is relative to
// buf[off] so that errors can carry positions.
func (r *Reader) formEnd(b []byte, i int, eof bool) (int, error) {
	need := func(what string) error {
		if !eof {
			return errNeedMore
		}
		line, col := r.pos(i)
		e := r.errAt(len(b), "the history ends inside the %s opened at %d:%d", what, line, col)
		e.Err = ErrTruncated
		return e
	}
	j := i
	switch c := b[i]; {
	case c == '#' && i+1 < len(b) && b[i+1] == '{':
		j++
	case c == '#' && i+1 < len(b) && (b[i+1] == '_' || isLetter(b[i+1])):
		// A discard or tag prefix belongs to the form that follows it.
		j += 2
		for j < len(b) && !delim[b[j]] {
			j++
		}
		if b[i+1] == '_' {
			j = i + 2
		}
		k := skipSpace(b, j)
		if k >= len(b) || b[k] == ';' { // skipSpace stops at a comment that does not end
			return 0, need("tagged value")
		}
		if isCloser(b[k]) {
			return 0, r.errAt(k, "expected a value after %s, got %c", b[i:j], b[k])
		}
		return r.formEnd(b, k, eof)
	case c == '"':
		k := stringEnd(b, i)
		if k < 0 {
			return 0, need("string")
		}
		return k, nil
	case c == '\\':
		j += 2
		fallthrough
	case !isOpener(c):
		for j < len(b) && !delim[b[j]] {
			j++
		}
		if j >= len(b) && !eof {
			return 0, errNeedMore
		}
		return min(j, len(b)), nil
	}
	return r.collectionEnd(b, i, j, need)
}

// collectionEnd returns the end of the collection whose opening bracket is
// b[j] (b[i] when it has no # prefix), matching every bracket inside it;
// need is what formEnd returns when b ends inside it.
func (r *Reader) collectionEnd(b []byte, i, j int, need func(string) error) (int, error) {
	stack := append(r.stack[:0], opener{i, closerOf(b[j])})
	defer func() { r.stack = stack[:0] }()
	for j++; ; {
		for j < len(b) && !special[b[j]] {
			j++
		}
		if j >= len(b) {
			return 0, need(kindName(stack[0].close))
		}
		switch c := b[j]; c {
		case '"':
			if j = stringEnd(b, j); j < 0 {
				return 0, need(kindName(stack[0].close))
			}
		case '\\':
			j += 2
		case ';':
			k := bytes.IndexByte(b[j:], '\n')
			if k < 0 {
				return 0, need(kindName(stack[0].close))
			}
			j += k + 1
		case '(', '[', '{':
			if len(stack) >= maxDepth {
				return 0, r.errAt(j, "values nested deeper than %d levels", maxDepth)
			}
			start := j
			if j > 0 && c == '{' && b[j-1] == '#' {
				start--
			}
			stack = append(stack, opener{start, closerOf(c)})
			j++
		default:
			top := stack[len(stack)-1]
			if c != top.close {
				line, col := r.pos(top.off)
				kind := kindName(top.close)
				if b[top.off] == '#' {
					kind = "set"
				}
				return 0, r.errAt(j, "expected %c to close the %s opened at %d:%d, got %c",
					top.close, kind, line, col, c)
			}
			stack = stack[:len(stack)-1]
			j++
			if len(stack) == 0 {
				return j, nil
			}
		}
	}
}

// stringEnd returns the index after the string that opens at b[i], or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

func isOpener(c byte) bool { return c == '(' || c == '[' || c == '{' }
func isCloser(c byte) bool { return c == ')' || c == ']' || c == '}' }
func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func closerOf(c byte) byte {
	switch c {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

func kindName(close byte) string {
	switch close {
	case ')':
		return "list"
	case ']':
		return "vector"
	}
	return "map"
}

// token returns the token at buf[off], reading enough input that it does
// not depend on where a read ended.
func (r *Reader) token() string {
	for len(r.buf)-r.off <= 40 && r.fill() {
	}
	return token(r.buf[r.off:])
}

// token returns the atom or bracket at the start of b, for error messages.
func token(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if isOpener(b[0]) || isCloser(b[0]) {
		return string(b[:1])
	}
	j := 1
	if b[0] == '"' {
		if k := stringEnd(b, 0); k > 0 {
			j = k
		} else {
			j = len(b)
		}
	}
	for j < len(b) && !delim[b[j]] {
		j++
	}
	if j > 40 {
		return string(b[:40]) + "..."
	}
	return string(b[:j])
}

// decode returns the op of the op map e, which formEnd has checked to be
// bracketed correctly; e is relative to buf[off].
func (r *Reader) decode(e []byte) (Op, error) {
	if !r.slow {
		d := fastDec{b: e, r: r}
		if op, ok := d.op(); ok && d.i == len(e) {
			return op, nil
		}
	}
	return r.decodeSlow(e)
}
