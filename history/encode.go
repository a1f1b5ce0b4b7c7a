package history

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/big"
	"sort"
	"strconv"
)

// AppendOp appends o to dst as one EDN map, keys in Jepsen's reading order
// (:index :time :type :process :f :value :error, then the extras sorted),
// without a trailing newline. Index and Time are left out when Unset.
//
// It is written by hand rather than with an EDN library's encoder because the
// key order must be stable for people who read and diff histories, and the
// writer sits on the recording path (BenchmarkAppendOp: about 130 ns and one allocation an op).
func AppendOp(dst []byte, o Op) []byte { return appendOp(dst, o, "") }

// appendOp appends o as AppendOp does, its :process written as the string
// name unless name is "" (a lock server's record names its nodes).
func appendOp(dst []byte, o Op, name string) []byte {
	dst = append(dst, '{')
	first := true
	key := func(k string) {
		if !first {
			dst = append(dst, ", "...)
		}
		first = false
		dst = append(dst, ':')
		dst = append(dst, k...)
		dst = append(dst, ' ')
	}
	if o.Index != Unset {
		key("index")
		dst = strconv.AppendInt(dst, o.Index, 10)
	}
	if o.Time != Unset {
		key("time")
		dst = strconv.AppendInt(dst, o.Time, 10)
	}
	key("type")
	dst = append(dst, ':')
	dst = append(dst, o.Type.String()...)
	key("process")
	if name != "" {
		dst = appendString(dst, name)
	} else if h, g, ok := o.Process.Renews(); ok {
		dst = appendRenewer(append(dst, ':'), h, g)
	} else if o.Process == Nemesis {
		dst = append(dst, ":nemesis"...)
	} else {
		dst = strconv.AppendInt(dst, int64(o.Process), 10)
	}
	key("f")
	dst = appendValue(dst, o.F)
	key("value")
	dst = appendValue(dst, o.Value)
	if o.Error != nil {
		key("error")
		dst = appendValue(dst, o.Error)
	}
	if len(o.Extra) > 0 {
		keys := make([]string, 0, len(o.Extra))
		for k := range o.Extra {
			keys = append(keys, string(k))
		}
		sort.Strings(keys)
		for _, k := range keys {
			key(k)
			dst = appendValue(dst, o.Extra[Keyword(k)])
		}
	}
	return append(dst, '}')
}

// AppendValue appends v in EDN. Values of types the Op doc does not list are
// written as strings with fmt's %v, so that nothing is ever dropped silently.
func AppendValue(dst []byte, v any) []byte { return appendValue(dst, v) }

func appendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "nil"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case *big.Int:
		dst = x.Append(dst, 10)
		if !x.IsInt64() {
			dst = append(dst, 'N')
		}
		return dst
	case float64:
		return appendFloat(dst, x)
	case string:
		return appendString(dst, x)
	case Keyword:
		dst = append(dst, ':')
		return append(dst, x...)
	case []any:
		return appendSeq(dst, '[', ']', x)
	case Set:
		dst = append(dst, '#')
		return appendSeq(dst, '{', '}', x)
	case map[Keyword]any:
		m := make(map[any]any, len(x))
		for k, v := range x {
			m[k] = v
		}
		return appendMap(dst, m)
	case map[any]any:
		return appendMap(dst, x)
	}
	return appendString(dst, fmt.Sprintf("%v", v))
}

func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "##Inf"...)
	case math.IsInf(f, -1):
		return append(dst, "##-Inf"...)
	case math.IsNaN(f):
		return append(dst, "##NaN"...)
	}
	s := strconv.AppendFloat(nil, f, 'g', -1, 64)
	dst = append(dst, s...)
	for _, c := range s {
		if c == '.' || c == 'e' {
			return dst
		}
	}
	return append(dst, ".0"...)
}

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

func appendSeq(dst []byte, open, close byte, xs []any) []byte {
	dst = append(dst, open)
	for i, x := range xs {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = appendValue(dst, x)
	}
	return append(dst, close)
}

// appendMap writes keys in the order of their encodings so that equal maps
// always print alike.
func appendMap(dst []byte, m map[any]any) []byte {
	type kv struct {
		k   []byte
		val any
	}
	kvs := make([]kv, 0, len(m))
	for k, v := range m {
		kvs = append(kvs, kv{appendValue(nil, k), v})
	}
	sort.Slice(kvs, func(i, j int) bool { return string(kvs[i].k) < string(kvs[j].k) })
	dst = append(dst, '{')
	for i, e := range kvs {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = append(dst, e.k...)
		dst = append(dst, ' ')
		dst = appendValue(dst, e.val)
	}
	return append(dst, '}')
}

// A Writer writes ops to an io.Writer, one EDN map per line.
type Writer struct {
	w   *bufio.Writer
	buf []byte
}

// NewWriter returns a Writer on w. Call Flush to push buffered lines out.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// Write writes o as one line.
func (w *Writer) Write(o Op) error {
	w.buf = AppendOp(w.buf[:0], o)
	w.buf = append(w.buf, '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		return fmt.Errorf("write op: %w", err)
	}
	return nil
}

// Flush writes any buffered lines to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("flush history: %w", err)
	}
	return nil
}
