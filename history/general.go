package history

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"time"

	"olympos.io/encoding/edn"
)

// This file holds the general path of the Reader: op maps the hand-written
// parser (fastparse.go) does not recognise are decoded key by key with
// olympos.io/encoding/edn, and the library's values converted to the types
// the Op doc lists.

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
		msg := ""
		if k == "process" {
			r.setProcess(&op, v, e[vi:vEnd])
		} else {
			msg = r.setField(&op, k, v)
		}
		if msg != "" {
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
		if !r.keeps([]byte(k)) {
			return ""
		}
		if op.Extra == nil {
			op.Extra = make(map[Keyword]any)
		}
		op.Extra[k] = v
	}
	return ""
}

// setProcess sets op's process to v, which the history writes as raw: a
// non-negative integer is itself, :nemesis the nemesis, and anything else
// (a name, a negative number, any EDN value) the number of how it is
// written. Its text is the key, not its decoded value, which would make one
// of the symbol x, the string "x" and the character \x: processes that are
// merged would hide each other's overlaps, where a process written in two
// ways is two whose ops do not pair, which the checks report.
func (r *Reader) setProcess(op *Op, v any, raw []byte) {
	switch p := v.(type) {
	case int64:
		if p >= 0 {
			op.Process = Process(p)
			return
		}
	case Keyword:
		if p == "nemesis" {
			op.Process = Nemesis
			return
		}
		if rp, ok := parseRenewer(string(p)); ok && string(raw) == ":"+string(p) {
			op.Process = rp
			return
		}
	}
	op.Process = r.named(string(raw))
}

// named returns the process number of a process written as something
// other than a non-negative integer or :nemesis; name is how it is written.
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

// Processes returns how the history writes each process the Reader numbered
// below -1 (names, negative numbers, any other value), by number; nil when
// every process was a non-negative integer or :nemesis.
func (r *Reader) Processes() map[Process]string {
	if len(r.procs) == 0 {
		return nil
	}
	m := make(map[Process]string, len(r.procs))
	for name, p := range r.procs {
		m[p] = name
	}
	return m
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
	if err := checkDepth(b); err != nil {
		return nil, err
	}
	d := edn.NewDecoder(bytes.NewReader(b))
	d.UseTagMap(tags)
	err = d.Decode(&v)
	return v, err
}

// checkDepth refuses values nested deeper than maxDepth before the
// library decodes them: its decoder recursed a level a bracket, and a
// test.edn of 4 MiB of "[" overflowed the stack, which no recover catches.
func checkDepth(b []byte) error { return CheckNesting(b, maxDepth) }

// ErrNested is the error of EDN nested deeper than a reader takes.
var ErrNested = errors.New("values nested deeper than hiatus reads")

// CheckNesting refuses EDN whose lists, vectors, maps or sets are nested
// more than most deep, or that holds more than most*100 tags (#), each of
// which the EDN decoder recurses into too. It reads EDN's words as the
// decoder does: strings, a character (\x) and comments (;) hold no
// brackets. What is malformed otherwise it leaves to the decoder.
func CheckNesting(b []byte, most int) error {
	depth, tags := 0, 0
	for j := 0; j < len(b); j++ {
		switch b[j] {
		case '"':
			e := stringEnd(b, j)
			if e < 0 {
				return nil
			}
			j = e - 1
		case '\\':
			j++
		case ';':
			k := bytes.IndexByte(b[j:], '\n')
			if k < 0 {
				return nil
			}
			j += k
		case '(', '[', '{':
			if depth++; depth > most {
				return fmt.Errorf("%w: more than %d levels", ErrNested, most)
			}
		case ')', ']', '}':
			depth = max(depth-1, 0)
		case '#':
			if tags++; tags > most*100 {
				return fmt.Errorf("%w: more than %d tags", ErrNested, most*100)
			}
		}
	}
	return nil
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

// ParseValue reads one EDN literal, such as 0 or {:x 0 :y 0}, into the
// types an Op's values have when a history is read: a value given on a
// command line compares equal to the same value in a history.
func ParseValue(s string) (any, error) {
	v, err := unmarshal([]byte(s), nil)
	if err != nil {
		return nil, err
	}
	return convert(v)
}
