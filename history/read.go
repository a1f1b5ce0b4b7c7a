package history

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

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
// :process :nemesis reads as Nemesis; any other non-integer process (a
// keyword or string name) reads as a negative number, -2 for the first name
// the Reader meets, -3 for the next and so on, stable within one history.
// Op.IsClient reports true for those; Pairs, like Jepsen, does not take them
// for clients. Integer processes are read as they are, negative ones too.
// An op map must have :type, :process and :f.
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

// ReadAll reads every op of the history in r. On an error it returns the ops
// before the one at fault, so a truncated history yields all its complete ops
// together with an error wrapping ErrTruncated.
func ReadAll(r io.Reader, name string) ([]Op, error) {
	return readAll(NewReader(r, name))
}

func readAll(r *Reader) ([]Op, error) {
	var ops []Op
	for {
		op, err := r.Next()
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return ops, err
		}
		ops = append(ops, op)
	}
}

// ReadFile reads every op of the history file at path, as ReadAll does.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
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

// decodeSlow decodes e key by key and value by value with the EDN library,
// so that it accepts all of EDN and that errors name the exact key or value.
func (r *Reader) decodeSlow(e []byte) (Op, error) {
	op := Op{Index: Unset, Time: Unset}
	seen := make(map[Keyword]bool)
	i := 1
	for {
		var err error
		if i, err = r.skipDiscards(e, i); err != nil {
			return Op{}, err
		}
		if e[i] == '}' {
			break
		}
		kEnd, err := r.formEnd(e, i, true)
		if err != nil {
			return Op{}, err
		}
		key, err := r.libValue(e, i, kEnd)
		if err != nil {
			return Op{}, err
		}
		k, ok := key.(Keyword)
		if !ok {
			return Op{}, r.errAt(i, "expected a keyword key in op map, got %q", token(e[i:]))
		}
		if seen[k] {
			return Op{}, r.errAt(i, "duplicate key :%s in op map", k)
		}
		seen[k] = true
		vi, err := r.skipDiscards(e, kEnd)
		if err != nil {
			return Op{}, err
		}
		if e[vi] == '}' {
			return Op{}, r.errAt(vi, "expected a value for key :%s, got }", k)
		}
		vEnd, err := r.formEnd(e, vi, true)
		if err != nil {
			return Op{}, err
		}
		v, err := r.libValue(e, vi, vEnd)
		if err != nil {
			return Op{}, err
		}
		if msg := r.setField(&op, k, v); msg != "" {
			return Op{}, r.errAt(vi, "%s, got %q", msg, token(e[vi:]))
		}
		i = vEnd
	}
	for _, k := range [...]Keyword{"type", "process", "f"} {
		if !seen[k] {
			return Op{}, r.errAt(0, "expected a :%s key in the op map", k)
		}
	}
	return op, nil
}

// skipDiscards skips whitespace, comments and #_ discarded forms in the op
// map e from i. The closing brace guarantees it stops inside e.
func (r *Reader) skipDiscards(e []byte, i int) (int, error) {
	for {
		i = skipSpace(e, i)
		if i+1 >= len(e) || e[i] != '#' || e[i+1] != '_' {
			return min(i, len(e)-1), nil
		}
		end, err := r.formEnd(e, i, true)
		if err != nil {
			return 0, err
		}
		i = end
	}
}

// setField sets the field of op that key k names to v, or returns what was
// expected instead.
func (r *Reader) setField(op *Op, k Keyword, v any) string {
	switch k {
	case "index", "time":
		n, ok := v.(int64)
		if !ok || n < 0 {
			return "expected a non-negative integer for :" + string(k)
		}
		if k == "index" {
			op.Index = n
		} else {
			op.Time = n
		}
	case "type":
		kw, _ := v.(Keyword)
		t, err := ParseType(string(kw))
		if err != nil {
			return "expected :invoke, :ok, :fail or :info for :type"
		}
		op.Type = t
	case "process":
		switch p := v.(type) {
		case int64:
			op.Process = Process(p)
		case Keyword:
			if p == "nemesis" {
				op.Process = Nemesis
			} else {
				op.Process = r.named(":" + string(p))
			}
		case string:
			op.Process = r.named(p)
		default:
			return "expected an integer, :nemesis or a name for :process"
		}
	case "f":
		f, ok := v.(Keyword)
		if !ok {
			return "expected a keyword for :f"
		}
		op.F = f
	case "value":
		op.Value = v
	case "error":
		op.Error = v
	default:
		if op.Extra == nil {
			op.Extra = make(map[Keyword]any)
		}
		op.Extra[k] = v
	}
	return ""
}

// named returns the process number of a process that has a name.
func (r *Reader) named(name string) Process {
	if p, ok := r.procs[name]; ok {
		return p
	}
	if r.procs == nil {
		r.procs = make(map[string]Process)
	}
	p := Process(-2 - int64(len(r.procs)))
	r.procs[name] = p
	return p
}

// libValue decodes the form e[i:end] with the EDN library.
func (r *Reader) libValue(e []byte, i, end int) (any, error) {
	if r.tags == nil {
		// Tagged values read as their untagged value; the library would
		// otherwise fail a whole history on one odd #inst.
		r.tags = new(edn.TagMap)
		same := func(v any) (any, error) { return v, nil }
		r.tags.MustAddTagFn("inst", same)
		r.tags.MustAddTagFn("base64", same)
	}
	span := e[i:end]
	x, err := unmarshal(span, r.tags)
	if err != nil {
		// The library knows neither ##Inf nor integers beyond int64 written
		// without N; the hand-written parser does.
		d := fastDec{b: span, r: r}
		if v, ok := d.value(); ok && d.i == len(span) {
			return v, nil
		}
		return nil, r.errAt(i, "invalid EDN value %q: %v", token(span), err)
	}
	v, err := convert(x)
	if err != nil {
		return nil, r.errAt(i, "%v", err)
	}
	return v, nil
}

func unmarshal(b []byte, tags *edn.TagMap) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("EDN decoder failed: %v", p)
		}
	}()
	d := edn.NewDecoder(bytes.NewReader(b))
	d.UseTagMap(tags)
	err = d.Decode(&v)
	return v, err
}

// convert turns a value decoded by the library into the types the Op doc
// lists.
func convert(x any) (any, error) {
	switch v := x.(type) {
	case nil, bool, int64, float64, string:
		return v, nil
	case big.Int:
		return normInt(&v), nil
	case *big.Int:
		return normInt(v), nil
	case edn.Keyword:
		return Keyword(v), nil
	case edn.Symbol:
		return string(v), nil
	case rune:
		return string(v), nil
	case big.Float:
		f, _ := v.Float64()
		return f, nil
	case *big.Float:
		f, _ := v.Float64()
		return f, nil
	case edn.Tag:
		return convert(v.Value)
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	case []byte:
		return string(v), nil
	case *any:
		return convert(*v)
	case []any:
		xs := make([]any, len(v))
		for i, e := range v {
			var err error
			if xs[i], err = convert(e); err != nil {
				return nil, err
			}
		}
		return xs, nil
	case map[any]bool:
		s := make(Set, 0, len(v))
		for e := range v {
			c, err := convert(e)
			if err != nil {
				return nil, err
			}
			s = append(s, c)
		}
		// The library keeps a set in a Go map; order it for stable output.
		sort.Slice(s, func(i, j int) bool {
			return string(AppendValue(nil, s[i])) < string(AppendValue(nil, s[j]))
		})
		return s, nil
	case map[any]any:
		m := make(map[any]any, len(v))
		for k, e := range v {
			if _, ok := k.(*any); ok {
				return nil, errors.New("a vector, list, map or set as a map key is not supported")
			}
			ck, err := convert(k)
			if err != nil {
				return nil, err
			}
			if m[ck], err = convert(e); err != nil {
				return nil, err
			}
		}
		return keywordMap(m), nil
	}
	return fmt.Sprintf("%v", x), nil
}

// keywordMap returns m as a map[Keyword]any if all its keys are keywords.
func keywordMap(m map[any]any) any {
	km := make(map[Keyword]any, len(m))
	for k, v := range m {
		kw, ok := k.(Keyword)
		if !ok {
			return m
		}
		km[kw] = v
	}
	return km
}

func normInt(n *big.Int) any {
	if n.IsInt64() {
		return n.Int64()
	}
	return n
}

// A fastDec decodes the EDN subset that AppendOp writes, without reflection
// and with few allocations. It reports false for anything else, malformed or
// merely unusual, and leaves it to the library path.
type fastDec struct {
	b     []byte
	i     int
	r     *Reader
	depth int
}

func (d *fastDec) op() (Op, bool) {
	op := Op{Index: Unset, Time: Unset}
	var seen uint8
	for d.i = 1; ; {
		d.space()
		if d.i >= len(d.b) {
			return op, false
		}
		if d.b[d.i] == '}' {
			d.i++
			break
		}
		k, ok := d.keyword()
		if !ok {
			return op, false
		}
		d.space()
		var bit uint8
		switch string(k) {
		case "index":
			bit = 1
			op.Index, ok = d.count()
		case "time":
			bit = 2
			op.Time, ok = d.count()
		case "type":
			bit = 4
			var t []byte
			if t, ok = d.keyword(); ok {
				op.Type = typeOf(t)
				ok = op.Type != 0
			}
		case "process":
			bit = 8
			op.Process, ok = d.process()
		case "f":
			bit = 16
			var f []byte
			f, ok = d.keyword()
			op.F = d.r.intern(f)
		case "value":
			bit = 32
			op.Value, ok = d.value()
		case "error":
			bit = 64
			op.Error, ok = d.value()
		default:
			kw := d.r.intern(k)
			if _, dup := op.Extra[kw]; dup {
				return op, false
			}
			var v any
			v, ok = d.value()
			if op.Extra == nil {
				op.Extra = make(map[Keyword]any, 4)
			}
			op.Extra[kw] = v
		}
		if !ok || seen&bit != 0 {
			return op, false
		}
		seen |= bit
	}
	return op, seen&(4|8|16) == 4|8|16
}

func typeOf(b []byte) Type {
	switch string(b) {
	case "invoke":
		return Invoke
	case "ok":
		return Ok
	case "fail":
		return Fail
	case "info":
		return Info
	}
	return 0
}

func (d *fastDec) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', ',', '\n', '\t', '\r':
			d.i++
		default:
			return
		}
	}
}

// atom returns the bytes up to the next delimiter.
func (d *fastDec) atom() []byte {
	s := d.i
	for d.i < len(d.b) && !delim[d.b[d.i]] {
		d.i++
	}
	return d.b[s:d.i]
}

// kwChar marks the bytes EDN allows in a keyword after its colon.
var kwChar = func() (t [256]bool) {
	for c := '0'; c <= 'z'; c++ {
		t[c] = '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for _, c := range ".*+!-_?$%&=<>/:#'" {
		t[c] = true
	}
	return t
}()

// keyword returns the name of the keyword at d.i.
func (d *fastDec) keyword() ([]byte, bool) {
	if d.i+1 >= len(d.b) || d.b[d.i] != ':' || d.b[d.i+1] == ':' || d.b[d.i+1] == '/' {
		return nil, false
	}
	d.i++
	s := d.i
	for d.i < len(d.b) && kwChar[d.b[d.i]] {
		d.i++
	}
	return d.b[s:d.i], d.i > s && d.atEnd()
}

// atEnd reports whether an atom may end at d.i.
func (d *fastDec) atEnd() bool { return d.i == len(d.b) || delim[d.b[d.i]] }

// intern returns k as a Keyword, sharing the string among the ops that use
// the same keyword: histories repeat a few keywords millions of times.
func (r *Reader) intern(k []byte) Keyword {
	if kw, ok := r.kws[string(k)]; ok {
		return kw
	}
	kw := Keyword(k)
	if r.kws == nil {
		r.kws = make(map[string]Keyword)
	}
	if len(r.kws) < 4096 && len(k) <= 64 {
		r.kws[string(kw)] = kw
	}
	return kw
}

// count reads a non-negative int64 written in plain digits.
func (d *fastDec) count() (int64, bool) {
	var n int64
	s := d.i
	for ; d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9'; d.i++ {
		n = n*10 + int64(d.b[d.i]-'0')
	}
	k := d.i - s
	return n, k > 0 && k <= 18 && (k == 1 || d.b[s] != '0') && d.atEnd()
}

func (d *fastDec) process() (Process, bool) {
	if d.i < len(d.b) && d.b[d.i] == ':' {
		k, ok := d.keyword()
		return Nemesis, ok && string(k) == "nemesis"
	}
	v, ok := d.value()
	n, isInt := v.(int64)
	return Process(n), ok && isInt
}

func (d *fastDec) value() (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; c {
	case ':':
		k, ok := d.keyword()
		return d.r.intern(k), ok
	case '"':
		return d.str()
	case '[', '(':
		d.i++
		xs, ok := d.seq(closerOf(c))
		return xs, ok
	case '{':
		return d.mapv()
	case '#':
		if d.i+1 < len(d.b) && d.b[d.i+1] == '{' {
			d.i += 2
			xs, ok := d.seq('}')
			return Set(xs), ok && distinct(xs)
		}
		switch string(d.atom()) {
		case "##Inf":
			return math.Inf(1), true
		case "##-Inf":
			return math.Inf(-1), true
		case "##NaN":
			return math.NaN(), true
		}
		return nil, false
	}
	a := d.atom()
	switch string(a) {
	case "nil":
		return nil, true
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return number(a)
}

// number parses an EDN integer or float. Octal, hex, ratios and M decimals
// are left to the library.
func number(a []byte) (any, bool) {
	s := a
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if len(s) == 0 || s[0] < '0' || s[0] > '9' {
		return nil, false
	}
	digits, float := 0, false
	for _, c := range s {
		switch {
		case '0' <= c && c <= '9':
			digits++
		case c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+':
			float = true
		case c != 'N':
			return nil, false
		}
	}
	if float {
		f, err := strconv.ParseFloat(string(a), 64)
		return f, err == nil
	}
	if a[len(a)-1] == 'N' {
		a, s = a[:len(a)-1], s[:len(s)-1]
	}
	if len(s) == 0 || digits != len(s) || s[0] == '0' && len(s) > 1 {
		return nil, false
	}
	if n, err := strconv.ParseInt(string(a), 10, 64); err == nil {
		return n, true
	}
	n, ok := new(big.Int).SetString(string(a), 10)
	if !ok {
		return nil, false
	}
	return normInt(n), true
}

// str reads a string that uses only the escapes AppendOp writes.
func (d *fastDec) str() (any, bool) {
	s := d.i + 1
	for j := s; j < len(d.b); j++ {
		switch d.b[j] {
		case '"':
			d.i = j + 1
			return string(d.b[s:j]), utf8.Valid(d.b[s:j])
		case '\\':
			return d.escaped(s)
		}
	}
	return nil, false
}

func (d *fastDec) escaped(s int) (any, bool) {
	var out []byte
	for j := s; j < len(d.b); j++ {
		c := d.b[j]
		switch c {
		case '"':
			d.i = j + 1
			return string(out), utf8.Valid(out)
		case '\\':
			if j++; j >= len(d.b) {
				return nil, false
			}
			switch c = d.b[j]; c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case '"', '\\':
			default:
				return nil, false
			}
		}
		out = append(out, c)
	}
	return nil, false
}

// seq reads the elements up to close, which it consumes.
func (d *fastDec) seq(close byte) ([]any, bool) {
	if d.depth++; d.depth >= maxDepth {
		return nil, false
	}
	defer func() { d.depth-- }()
	xs := []any{}
	for {
		d.space()
		if d.i >= len(d.b) {
			return nil, false
		}
		if d.b[d.i] == close {
			d.i++
			return xs, true
		}
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		xs = append(xs, v)
	}
}

func (d *fastDec) mapv() (any, bool) {
	d.i++
	kvs, ok := d.seq('}')
	if !ok || len(kvs)%2 != 0 {
		return nil, false
	}
	m := make(map[any]any, len(kvs)/2)
	for i := 0; i < len(kvs); i += 2 {
		switch kvs[i].(type) {
		case []any, Set, map[any]any, map[Keyword]any:
			return nil, false
		}
		m[kvs[i]] = kvs[i+1]
	}
	return keywordMap(m), true
}

// distinct reports whether the elements of a set differ, as EDN requires;
// the fast parser leaves sets that repeat one to the library, which drops
// the repeats.
func distinct(xs []any) bool {
	if len(xs) < 2 {
		return true
	}
	seen := make(map[string]bool, len(xs))
	for _, x := range xs {
		k := string(AppendValue(nil, x))
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}
