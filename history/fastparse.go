package history

import (
	"math"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf8"
)

// This file holds the fast path of the Reader: a hand-written parser for the
// EDN subset AppendOp writes, which decodes hiatus's own histories about ten
// times faster than the library (see the Reader doc).

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
	var ex extras
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
			if d.r.keep != nil {
				if ok = ex.add(d, k); !ok {
					return op, false
				}
				continue
			}
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
	if d.r.keep != nil {
		op.Extra = ex.extra(d.r)
	}
	return op, seen&(4|8|16) == 4|8|16
}

// extras are the extra keys of an op read by a Reader that keeps only some
// (Reader.KeepExtra): those kept, with their values and text, and those
// left out, to see that no key is repeated. An op with more than four of
// either goes to the library path.
type extras struct {
	kept  [4]extra
	nkept int
	left  [4][]byte
	nleft int
}

type extra struct {
	k, text []byte // the key's name; its value as written
	v       any
}

// add reads the value of the extra key k, which d has read, and keeps it
// if the Reader does.
func (ex *extras) add(d *fastDec, k []byte) bool {
	if ex.nleft == len(ex.left) || ex.nkept == len(ex.kept) || ex.has(k) {
		return false
	}
	if !d.r.keeps(k) {
		ex.left[ex.nleft] = k
		ex.nleft++
		return d.skip()
	}
	start := d.i
	v, ok := d.value()
	ex.kept[ex.nkept] = extra{k: k, text: d.b[start:d.i], v: v}
	ex.nkept++
	return ok
}

// has reports whether the op has had the key k already, kept or not.
func (ex *extras) has(k []byte) bool {
	same := func(b []byte) bool { return string(b) == string(k) }
	return slices.ContainsFunc(ex.left[:ex.nleft], same) ||
		slices.ContainsFunc(ex.kept[:ex.nkept], func(e extra) bool { return same(e.k) })
}

// extra returns the map of the keys kept. Ops whose kept keys are written
// the same, with values that cannot be changed (numbers, strings,
// keywords), share one map: a check's Reader keeps :lease-ms, which every
// acquire's completion repeats, and a map for each was a fifth of the
// parse. At most maxShared maps are shared, so a history of ever new
// values (fences) costs a lookup an op and no more memory.
func (ex *extras) extra(r *Reader) map[Keyword]any {
	if ex.nkept == 0 {
		return nil
	}
	r.keyBuf = r.keyBuf[:0]
	shareable := true
	for _, e := range ex.kept[:ex.nkept] {
		r.keyBuf = append(append(append(append(r.keyBuf, e.k...), 0), e.text...), 0)
		switch e.v.(type) {
		case nil, bool, int64, float64, string, Keyword:
		default:
			shareable = false
		}
	}
	if m, ok := r.shared[string(r.keyBuf)]; ok && shareable {
		return m
	}
	m := make(map[Keyword]any, ex.nkept)
	for _, e := range ex.kept[:ex.nkept] {
		m[r.intern(e.k)] = e.v
	}
	if shareable && len(r.shared) < maxShared {
		if r.shared == nil {
			r.shared = make(map[string]map[Keyword]any)
		}
		r.shared[string(r.keyBuf)] = m
	}
	return m
}

// maxShared bounds the Extra maps a Reader shares among its ops.
const maxShared = 64

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
	b, i := d.b, d.i // locals: the compiler keeps them in registers
	for i < len(b) && (b[i] == ' ' || b[i] == ',' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	d.i = i
}

// atom returns the bytes up to the next delimiter.
func (d *fastDec) atom() []byte {
	b, i := d.b, d.i
	s := i
	for i < len(b) && !delim[b[i]] {
		i++
	}
	d.i = i
	return b[s:i]
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
	b, i := d.b, d.i
	if i+1 >= len(b) || b[i] != ':' || b[i+1] == ':' || b[i+1] == '/' {
		return nil, false
	}
	i++
	s := i
	for i < len(b) && kwChar[b[i]] {
		i++
	}
	d.i = i
	return b[s:i], i > s && (i == len(b) || delim[b[i]])
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
	b, i := d.b, d.i
	var n int64
	s := i
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		n = n*10 + int64(b[i]-'0')
	}
	d.i = i
	k := i - s
	return n, k > 0 && k <= 18 && (k == 1 || b[s] != '0') && d.atEnd()
}

func (d *fastDec) process() (Process, bool) {
	if d.i < len(d.b) && d.b[d.i] == ':' {
		k, ok := d.keyword()
		if ok && len(k) > len(renewerName) && string(k[:len(renewerName)]) == renewerName {
			r, isRenewer := parseRenewer(string(k))
			return r, isRenewer // any other name is the general path's
		}
		return Nemesis, ok && string(k) == "nemesis"
	}
	v, ok := d.value()
	n, isInt := v.(int64)
	// Any other process is numbered by the general path, which knows the
	// history's other names.
	return Process(n), ok && isInt && n >= 0
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

// skip reads a value as value does, without making it: a string or an
// integer, as an op's extra keys mostly are, allocates nothing.
func (d *fastDec) skip() bool {
	if d.i < len(d.b) && d.b[d.i] == '"' {
		_, esc, ok := d.plainStr()
		if esc {
			_, ok = d.escaped(d.i + 1)
		}
		return ok
	}
	if d.i < len(d.b) && ('0' <= d.b[d.i] && d.b[d.i] <= '9' || d.b[d.i] == '-') {
		i := d.i
		if _, ok := decimal(d.atom()); ok {
			return true
		}
		d.i = i
	}
	_, ok := d.value()
	return ok
}

// number parses an EDN integer or float. Octal, hex, ratios and M decimals
// are left to the library.
func number(a []byte) (any, bool) {
	if n, ok := decimal(a); ok {
		return n, true
	}
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

// decimal parses the integers a history is mostly made of, in plain digits
// with at most a minus sign and 18 digits, without strconv: on a generated
// history, strconv's checks took a third of the time numbers took.
func decimal(a []byte) (int64, bool) {
	s := a
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 18 || s[0] == '0' && len(s) > 1 {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(s) < len(a) {
		n = -n
	}
	return n, true
}

// str reads a string that uses only the escapes AppendOp writes.
func (d *fastDec) str() (any, bool) {
	b, esc, ok := d.plainStr()
	if esc {
		return d.escaped(d.i + 1)
	}
	return string(b), ok
}

// plainStr reads the string at d.i when it has no escape, and returns its
// bytes, without making a string of them; esc says it has one, and leaves
// d.i at its quote, for escaped.
func (d *fastDec) plainStr() (b []byte, esc, ok bool) {
	s := d.i + 1
	for j := s; j < len(d.b); j++ {
		switch d.b[j] {
		case '"':
			d.i = j + 1
			return d.b[s:j], false, utf8.Valid(d.b[s:j])
		case '\\':
			return nil, true, false
		}
	}
	return nil, false, false
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
