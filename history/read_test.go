package history

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/iotest"
)

// refDir holds the published reference histories, outside the repository.
const refDir = "../../shared/reference-histories"

// paths are the two ways the Reader decodes an op map; every test that
// decodes runs on both, and they must agree.
var paths = []struct {
	name string
	slow bool
}{{"fast", false}, {"library", true}}

// readAll reads every op of r with Next.
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

// readWith reads src op by op with Next, and checks that Each hands over
// the same ops and error, with chunks of sizes from one byte (the
// library's path, which Each reads as Next does, in its own chunks only):
// a disagreement is the error it returns.
func readWith(src string, slow bool) ([]Op, error) {
	r := NewReader(strings.NewReader(src), "h.edn")
	r.slow = slow
	ops, err := readAll(r)
	chunks := []int{0, 1, 7, 64}
	if slow {
		chunks = chunks[:1]
	}
	for _, chunk := range chunks {
		e := NewReader(strings.NewReader(src), "h.edn")
		e.slow, e.chunk = slow, chunk
		var got []Op
		eerr := e.Each(context.Background(), func(o Op) { got = append(got, o) })
		if fmt.Sprint(eerr) != fmt.Sprint(err) || len(got) != len(ops) || !reflect.DeepEqual(e.Processes(), r.Processes()) {
			return nil, fmt.Errorf("Each in chunks of %d: %d ops, %v, processes %v; Next: %d ops, %v, processes %v",
				chunk, len(got), eerr, e.Processes(), len(ops), err, r.Processes())
		}
		for i := range got {
			if !equalOp(got[i], ops[i]) {
				return nil, fmt.Errorf("Each in chunks of %d: op %d is %s; Next: %s", chunk, i, AppendOp(nil, got[i]), AppendOp(nil, ops[i]))
			}
		}
	}
	if err := readKept(src, slow, ops, err); err != nil {
		return nil, err
	}
	return ops, err
}

// readKept checks that a Reader that keeps only some extra keys reads src
// as one that keeps them all, ops and err, without the others: with Next
// and with Each, keeping none, some and the keys a check keeps.
func readKept(src string, slow bool, ops []Op, err error) error {
	keeps := [][]Keyword{{KeyLeaseMS, KeyFence, KeyFinal, KeyResolved}, {}, {KeyFence}}
	// In 1 MiB chunks (0) and by Next (-1): smaller chunks, which Each's
	// own tests read, made the reference histories' test take 17 s, not 4.
	chunks := []int{0, -1}
	if slow {
		keeps, chunks = keeps[:1], chunks[:1] // the library's path is slow, and filters in one place
	}
	for _, keep := range keeps {
		for _, chunk := range chunks {
			r := NewReader(strings.NewReader(src), "h.edn")
			r.slow, r.chunk = slow, max(chunk, 0)
			r.KeepExtra(keep...)
			var got []Op
			var kerr error
			if chunk < 0 {
				got, kerr = readAll(r)
			} else {
				kerr = r.Each(context.Background(), func(o Op) { got = append(got, o) })
			}
			if fmt.Sprint(kerr) != fmt.Sprint(err) || len(got) != len(ops) {
				return fmt.Errorf("keeping %v (chunks of %d): %d ops, %v; keeping all: %d ops, %v", keep, chunk, len(got), kerr, len(ops), err)
			}
			for i := range got {
				if want := keepOnly(ops[i], keep); !equalOp(got[i], want) {
					return fmt.Errorf("keeping %v (chunks of %d): op %d is %s; want %s", keep, chunk, i, AppendOp(nil, got[i]), AppendOp(nil, want))
				}
			}
		}
	}
	return nil
}

// keepOnly returns o with only the extra keys of keep.
func keepOnly(o Op, keep []Keyword) Op {
	var m map[Keyword]any
	for k, v := range o.Extra {
		if slices.Contains(keep, k) {
			if m == nil {
				m = map[Keyword]any{}
			}
			m[k] = v
		}
	}
	o.Extra = m
	return o
}

func TestReadValues(t *testing.T) {
	huge, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	nines, _ := new(big.Int).SetString("99999999999999999999", 10)
	for _, tc := range []struct {
		name, value string
		want        any
	}{
		{"nil", "nil", nil},
		{"true", "true", true},
		{"false", "false", false},
		{"int", "42", int64(42)},
		{"negative int", "-42", int64(-42)},
		{"max int64", "9223372036854775807", int64(math.MaxInt64)},
		{"min int64", "-9223372036854775808", int64(math.MinInt64)},
		{"big int with N", "123456789012345678901234567890N", huge},
		{"big int without N", "99999999999999999999", nines},
		{"small int with N", "7N", int64(7)},
		{"float", "1.5", 1.5},
		{"float exponent", "-2.5e-3", -2.5e-3},
		{"decimal", "1.5M", 1.5},
		{"inf", "##Inf", math.Inf(1)},
		{"minus inf", "##-Inf", math.Inf(-1)},
		{"string", `"a b"`, "a b"},
		{"string escapes", `"t\there \"q\" b\\s\nx"`, "t\there \"q\" b\\s\nx"},
		{"string unicode", `"ünï"`, "ünï"},
		{"string unicode escape", `"\u00e9"`, "é"},
		{"keyword", ":timeout", Keyword("timeout")},
		{"namespaced keyword", ":jepsen/nemesis", Keyword("jepsen/nemesis")},
		{"vector", "[1 :a nil]", []any{int64(1), Keyword("a"), nil}},
		{"list", `(1 "b")`, []any{int64(1), "b"}},
		{"empty vector", "[]", []any{}},
		{"nested", "[[:read :x nil] [:write :y 2]]",
			[]any{[]any{Keyword("read"), Keyword("x"), nil}, []any{Keyword("write"), Keyword("y"), int64(2)}}},
		{"keyword map", "{:kind :sigstop, :ms 800}", map[Keyword]any{"kind": Keyword("sigstop"), "ms": int64(800)}},
		{"mixed map", `{"s" 1, 2 :two}`, map[any]any{"s": int64(1), int64(2): Keyword("two")}},
		{"empty map", "{}", map[Keyword]any{}},
		{"set", "#{1 2}", Set{int64(1), int64(2)}},
		{"empty set", "#{}", Set{}},
		{"set with a repeat", "#{1 :a 1}", Set{int64(1), Keyword("a")}},
		{"deepest nesting", strings.Repeat("[", 998) + strings.Repeat("]", 998), nest(998)},
		{"inst tag", `#inst "2024-01-02T03:04:05Z"`, "2024-01-02T03:04:05Z"},
		{"other tag", `#uuid "6ba7b810-9dad-11d1-80b4-00c04fd430c8"`, "6ba7b810-9dad-11d1-80b4-00c04fd430c8"},
		{"char", `\c`, "c"},
		{"symbol", "some-symbol", "some-symbol"},
		{"discard", "#_ :ignored 3", int64(3)},
		{"comment inside", "[1 ; one\n 2]", []any{int64(1), int64(2)}},
	} {
		for _, p := range paths {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				src := "{:type :ok, :process 0, :f :v, :value " + tc.value + "}"
				ops, err := readWith(src, p.slow)
				if err != nil {
					t.Fatal(err)
				}
				if len(ops) != 1 || !equalValue(ops[0].Value, tc.want) {
					t.Errorf("read %s: got %#v, want %#v", tc.value, ops[0].Value, tc.want)
				}
			})
		}
	}
}

func nest(n int) any {
	v := []any{}
	for range n - 1 {
		v = []any{v}
	}
	return v
}

func TestReadNaN(t *testing.T) {
	for _, p := range paths {
		ops, err := readWith("{:type :ok, :process 0, :f :v, :value ##NaN}", p.slow)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if f, ok := ops[0].Value.(float64); !ok || !math.IsNaN(f) {
			t.Errorf("%s: got %#v, want NaN", p.name, ops[0].Value)
		}
	}
}

func TestReadShapes(t *testing.T) {
	want := []Op{
		{Index: 0, Time: Unset, Type: Invoke, Process: 1, F: "read"},
		{Index: 1, Time: Unset, Type: Ok, Process: 1, F: "read", Value: int64(3)},
		{Index: 2, Time: Unset, Type: Info, Process: Nemesis, F: "start"},
	}
	const a = "{:type :invoke, :process 1, :f :read, :value nil}"
	const b = "{:type :ok, :process 1, :f :read, :value 3}"
	const c = "{:type :info, :process :nemesis, :f :start}"
	for _, tc := range []struct{ name, src string }{
		{"lines", a + "\n" + b + "\n" + c + "\n"},
		{"lines without final newline", a + "\n" + b + "\n" + c},
		{"one line", a + b + c},
		{"crlf", a + "\r\n" + b + "\r\n" + c + "\r\n"},
		{"vector", "[" + a + "\n " + b + "\n " + c + "]\n"},
		{"list", "(" + a + ", " + b + ", " + c + ")"},
		{"comments", "; a history\n" + a + " ; first\n;;\n" + b + "\n" + c + "\n; end"},
		{"vector with comments", "; head\n[; open\n" + a + "\n; mid\n" + b + c + "\n] ; tail\n"},
		{"multi-line maps", strings.ReplaceAll(a+b+c, ", ", ",\n  ")},
		{"discarded op", a + "\n#_" + b + "\n" + b + "\n" + c},
	} {
		for _, p := range paths {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				got, err := readWith(tc.src, p.slow)
				if err != nil {
					t.Fatal(err)
				}
				checkOps(t, got, want)
			})
		}
	}
}

func TestReadEmpty(t *testing.T) {
	for _, src := range []string{"", "\n\n", "; nothing\n", "[]", "( )", "[\n; none\n]\n"} {
		ops, err := readWith(src, false)
		if err != nil || len(ops) != 0 {
			t.Errorf("%q: got %d ops, %v; want none", src, len(ops), err)
		}
	}
}

func TestReadFields(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []Op
	}{
		{"index and time", "{:index 7, :time 99, :type :ok, :process 3, :f :w}",
			[]Op{{Index: 7, Time: 99, Type: Ok, Process: 3, F: "w"}}},
		{"missing index is the position", "{:type :ok, :process 3, :f :w}\n{:time 5, :type :ok, :process 3, :f :w}",
			[]Op{{Index: 0, Time: Unset, Type: Ok, Process: 3, F: "w"}, {Index: 1, Time: 5, Type: Ok, Process: 3, F: "w"}}},
		{"error and extras", `{:type :fail, :process 0, :f :release, :error :expired, :token "t", :lease-ms 500}`,
			[]Op{{Index: 0, Time: Unset, Type: Fail, Process: 0, F: "release", Error: Keyword("expired"),
				Extra: map[Keyword]any{"token": "t", "lease-ms": int64(500)}}}},
		{"nemesis", "{:type :info, :process :nemesis, :f :pause, :value {:kind :sigstop}}",
			[]Op{{Index: 0, Time: Unset, Type: Info, Process: Nemesis, F: "pause", Value: map[Keyword]any{"kind": Keyword("sigstop")}}}},
		{"named processes", `{:type :info, :process :checker, :f :a} {:type :info, :process "n1", :f :b} {:type :info, :process :checker, :f :c}`,
			[]Op{{Index: 0, Time: Unset, Type: Info, Process: -2, F: "a"}, {Index: 1, Time: Unset, Type: Info, Process: -3, F: "b"},
				{Index: 2, Time: Unset, Type: Info, Process: -2, F: "c"}}},
		{"big index with N", "{:index 5N, :type :ok, :process 1, :f :w}",
			[]Op{{Index: 5, Time: Unset, Type: Ok, Process: 1, F: "w"}}},
		// Any value is a process: each way of writing one is one process,
		// numbered below -1 whatever it is, a negative number too, so that
		// none is taken for another.
		{"any value a process", `{:type :ok, :process -2, :f :a} {:type :ok, :process :x, :f :b} {:type :ok, :process 1.5, :f :c}
{:type :ok, :process [1 2], :f :d} {:type :ok, :process "x", :f :e} {:type :ok, :process -2, :f :f} {:type :ok, :process 2, :f :g}`,
			[]Op{{Index: 0, Time: Unset, Type: Ok, Process: -2, F: "a"}, {Index: 1, Time: Unset, Type: Ok, Process: -3, F: "b"},
				{Index: 2, Time: Unset, Type: Ok, Process: -4, F: "c"}, {Index: 3, Time: Unset, Type: Ok, Process: -5, F: "d"},
				{Index: 4, Time: Unset, Type: Ok, Process: -6, F: "e"}, {Index: 5, Time: Unset, Type: Ok, Process: -2, F: "f"},
				{Index: 6, Time: Unset, Type: Ok, Process: 2, F: "g"}}},
		// The symbol x, the string "x", the character \x and a tagged "x"
		// are four processes, as Clojure has them: merged, one's open op
		// would hide another's.
		{"a process as written", `{:type :invoke, :process x, :f :a} {:type :invoke, :process "x", :f :a} {:type :invoke, :process \x, :f :a}
{:type :invoke, :process #foo "x", :f :a}`,
			[]Op{{Index: 0, Time: Unset, Type: Invoke, Process: -2, F: "a"}, {Index: 1, Time: Unset, Type: Invoke, Process: -3, F: "a"},
				{Index: 2, Time: Unset, Type: Invoke, Process: -4, F: "a"}, {Index: 3, Time: Unset, Type: Invoke, Process: -5, F: "a"}}},
	} {
		for _, p := range paths {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				got, err := readWith(tc.src, p.slow)
				if err != nil {
					t.Fatal(err)
				}
				checkOps(t, got, tc.want)
			})
		}
	}
}

func TestReadMalformed(t *testing.T) {
	const ok = "{:type :ok, :process 0, :f :r}\n"
	deep := "{:type :ok, :process 0, :f :r, :value " + strings.Repeat("[", 1200) + strings.Repeat("]", 1200) + "}"
	for _, tc := range []struct{ name, src, want string }{
		{"key not a keyword", "{:type :ok, 3 :x, :process 0, :f :r}",
			`h.edn:1:13: expected a keyword key in op map, got "3"`},
		{"string key", ok + `{:type :ok, "f" :r, :process 0}`,
			`h.edn:2:13: expected a keyword key in op map, got "\"f\""`},
		{"wrong closer", "{:type :ok, :value [1 2}, :process 0}",
			`h.edn:1:24: expected ] to close the vector opened at 1:20, got }`},
		{"wrong closer on a later line", ok + ok + "{:type :ok,\n :value {:a (1 2]}}",
			`h.edn:4:17: expected ) to close the list opened at 4:13, got ]`},
		{"wrong closer of a set", "{:type :ok, :value #{1 2], :process 0}",
			`h.edn:1:25: expected } to close the set opened at 1:20, got ]`},
		{"wrong closer of the history", "[" + ok + ")",
			`h.edn:2:1: expected ] to close the vector opened at 1:1, got )`},
		{"not a map", ok + "42\n", `h.edn:2:1: expected an op map {...}, got "42"`},
		{"stray closer", ok + "}", `h.edn:2:1: expected an op map {...}, got "}"`},
		{"nested history", "[[" + ok + "]]", `h.edn:1:2: expected an op map {...}, got "["`},
		{"after the history", "[" + ok + "]\n" + ok,
			`h.edn:3:1: expected the end of the history after the ] closing it, got "{"`},
		{"bad type", "{:type :done, :process 0, :f :r}",
			`h.edn:1:8: expected :invoke, :ok, :fail or :info for :type, got ":done"`},
		{"missing type", ok + "{:process 0, :f :r}", `h.edn:2:1: expected a :type key in the op map`},
		{"missing process", "{:type :ok, :f :r}", `h.edn:1:1: expected a :process key in the op map`},
		{"missing f", "{:type :ok, :process 1}", `h.edn:1:1: expected a :f key in the op map`},
		{"missing value", "{:type :ok, :f :r, :process}", `h.edn:1:28: expected a value for key :process, got }`},
		{"duplicate key", "{:type :ok, :process 0, :f :r, :type :ok}", `h.edn:1:32: duplicate key :type in op map`},
		{"negative index", "{:index -1, :type :ok, :process 0, :f :r}",
			`h.edn:1:9: expected a non-negative integer for :index, got "-1"`},
		{"float time", "{:time 1.5, :type :ok, :process 0, :f :r}",
			`h.edn:1:8: expected a non-negative integer for :time, got "1.5"`},
		{"string f", `{:type :ok, :process 0, :f "r"}`, `h.edn:1:28: expected a keyword for :f, got "\"r\""`},
		{"bad token", "{:type :ok, :process 0, :f :r, :value @x}", `h.edn:1:39: invalid EDN value "@x": `},
		{"collection key", "{:type :ok, :process 0, :f :r, :value {[1] 2}}",
			`h.edn:1:39: a vector, list, map or set as a map key is not supported`},
		{"too deep", deep, `h.edn:1:1038: values nested deeper than 1000 levels`},
	} {
		for _, p := range paths {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				_, err := readWith(tc.src, p.slow)
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("got %v, want a *SyntaxError", err)
				}
				if !strings.HasPrefix(err.Error(), tc.want) {
					t.Errorf("got  %v\nwant %s", err, tc.want)
				}
				if errors.Is(err, ErrTruncated) {
					t.Errorf("%v is ErrTruncated", err)
				}
			})
		}
	}
}

func TestReadTruncated(t *testing.T) {
	const a = "{:type :invoke, :process 1, :f :read, :value nil}"
	const b = "{:type :ok, :process 1, :f :read, :value 3}"
	for _, tc := range []struct {
		name, src, want string
		n               int
	}{
		{"mid map", a + "\n" + b + "\n{:type :invoke, :pro", "h.edn:3:21: the history ends inside the map opened at 3:1", 2},
		{"mid value", a + "\n{:type :ok, :value [1 {:a", "h.edn:2:26: the history ends inside the map opened at 2:1", 1},
		{"mid string", a + "\n" + `{:type :ok, :value "abc`, "h.edn:2:24: the history ends inside the map opened at 2:1", 1},
		{"open brace only", a + "\n{", "h.edn:2:2: the history ends inside the map opened at 2:1", 1},
		{"vector mid map", "[" + a + "\n " + b + "\n {:type", "h.edn:3:8: the history ends inside the map opened at 3:2", 2},
		{"vector not closed", "[" + a + "\n " + b + "\n",
			"h.edn:3:1: expected ] to close the vector opened at 1:1, got the end of the history", 2},
		{"list not closed", "(" + a, "h.edn:1:51: expected ) to close the list opened at 1:1, got the end of the history", 1},
	} {
		for _, p := range paths {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				ops, err := readWith(tc.src, p.slow)
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("got %v, want ErrTruncated", err)
				}
				if err.Error() != tc.want {
					t.Errorf("got  %v\nwant %s", err, tc.want)
				}
				if len(ops) != tc.n {
					t.Errorf("got %d ops before the truncation, want %d", len(ops), tc.n)
				}
			})
		}
	}
}

// TestReadRoundTrip checks that what AppendOp writes reads back as the same
// op, on both decoding paths.
func TestReadRoundTrip(t *testing.T) {
	huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	ops := []Op{
		{Index: 0, Time: 1500, Type: Invoke, Process: 2, F: "acquire"},
		{Index: 1, Time: 9, Type: Ok, Process: 1, F: "acquire",
			Extra: map[Keyword]any{"token": "ab\"c\\", "fence": int64(3), "lease-ms": int64(500), "final?": true}},
		{Index: 2, Time: 4, Type: Fail, Process: 0, F: "write", Value: int64(207), Error: Keyword("stale-fence")},
		{Index: Unset, Time: Unset, Type: Info, Process: Nemesis, F: "pause",
			Value: map[Keyword]any{"process": int64(2), "kind": Keyword("sigstop"), "ms": int64(800)}},
		{Index: 4, Time: 1 << 60, Type: Ok, Process: 1 << 40, F: "txn",
			Value: []any{huge, 1.5, 2.0, -0.25, 1e300, math.Inf(1), math.Inf(-1), true, false, nil,
				Set{int64(1), "x"}, "a\nb\tc\rd", "ünïcödé", []any{}, Set{}, map[Keyword]any{},
				map[any]any{"k": int64(1), int64(2): []any{Keyword("a")}}}},
		{Index: 5, Time: 0, Type: Info, Process: 3, F: "write", Error: "read tcp 10.0.0.1:6379: i/o timeout",
			Value: []any{[]any{Keyword("read"), Keyword("x"), nil}, []any{Keyword("write"), Keyword("y"), int64(-2)}}},
	}
	var buf []byte
	for _, op := range ops {
		buf = AppendOp(buf, op)
		buf = append(buf, '\n')
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			got, err := readWith(string(buf), p.slow)
			if err != nil {
				t.Fatal(err)
			}
			want := append([]Op(nil), ops...)
			want[3].Index = 3
			checkOps(t, got, want)
		})
	}
}

// TestReadChunks reads through readers that return little at a time, so that
// ops and errors straddle the buffer's refills.
func TestReadChunks(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 3000 {
		fmt.Fprintf(&b, "{:type :invoke, :process %d, :f :write, :value \"%s\"}\n", i, strings.Repeat("x", i%97))
		if i%7 == 0 {
			fmt.Fprintf(&b, "; comment %d %s\n", i, strings.Repeat("y", i%89))
			b.WriteString("#_ {:discarded [1 2 3]}\n")
		}
	}
	b.WriteString("{:type :ok,\n :process 1, :f [1 2)}]")
	src := b.String()
	last := strings.Count(src, "\n") + 1
	want := fmt.Sprintf("h.edn:%d:21: expected ] to close the vector opened at %d:17, got )", last, last)
	for name, rd := range map[string]func(io.Reader) io.Reader{
		"whole": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader,
		"half": iotest.HalfReader, "data and EOF": iotest.DataErrReader,
	} {
		t.Run(name, func(t *testing.T) {
			ops, err := ReadAll(rd(strings.NewReader(src)), "h.edn")
			if len(ops) != 3000 || err == nil || err.Error() != want {
				t.Errorf("got %d ops, %v\nwant 3000, %s", len(ops), err, want)
			}
		})
	}
}

// TestReadStreams checks that a history of one huge vector is read with a
// buffer the size of an op, not of the history.
func TestReadStreams(t *testing.T) {
	pr, pw := io.Pipe()
	const n = 200000
	go func() {
		w := bufio.NewWriter(pw)
		w.WriteString("[")
		for i := range n {
			fmt.Fprintf(w, "{:process %d, :type :invoke, :f :read, :value nil}\n", i)
		}
		w.WriteString("]")
		w.Flush()
		pw.Close()
	}()
	r := NewReader(pr, "big.edn")
	count := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		count++
	}
	if count != n || cap(r.buf) > 64<<10 {
		t.Errorf("read %d ops with a %d-byte buffer; want %d ops, 64 KiB", count, cap(r.buf), n)
	}
}

func TestReadErrorSticks(t *testing.T) {
	r := NewReader(strings.NewReader("42 {:type :ok, :process 0, :f :r}"), "h.edn")
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Errorf("got %v then %v, want the same error twice", err1, err2)
	}
}

func TestReadFileTestdata(t *testing.T) {
	// generated.edn is `hiatus gen --sections 40 --workers 4 --lost 1
	// --info 2 --seed 11`: hiatus's own format, with every kind of op.
	for name, n := range map[string]int{"lines.edn": 11, "vector.edn": 9, "list.edn": 4, "values.edn": 10, "generated.edn": 332} {
		t.Run(name, func(t *testing.T) {
			ops, err := ReadFile(filepath.Join("testdata", name))
			if err != nil || len(ops) != n {
				t.Fatalf("got %d ops, %v; want %d", len(ops), err, n)
			}
			src, _ := os.ReadFile(filepath.Join("testdata", name))
			slow, err := readWith(string(src), true)
			if err != nil {
				t.Fatal(err)
			}
			checkOps(t, slow, ops)
		})
	}
	if _, err := ReadFile(filepath.Join("testdata", "absent.edn")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: got %v, want os.ErrNotExist", err)
	}
}

// TestReadReference reads every history listed in the reference corpus and
// pairs its ops.
func TestReadReference(t *testing.T) {
	for _, path := range referencePaths(t) {
		t.Run(path, func(t *testing.T) {
			ops, err := ReadFile(filepath.Join(refDir, path))
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) == 0 {
				t.Fatal("no ops")
			}
			src, _ := os.ReadFile(filepath.Join(refDir, path))
			slow, err := readWith(string(src), true)
			if err != nil {
				t.Fatal(err)
			}
			checkOps(t, slow, ops)
			if _, err := Pairs(ops); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// referencePaths returns the histories EXPECTED.tsv lists, skipping tb when
// the corpus is absent.
func referencePaths(tb testing.TB) []string {
	paths, err := referenceList()
	if err != nil {
		tb.Skipf("no reference histories: %v", err)
	}
	return paths
}

func referenceList() ([]string, error) {
	data, err := os.ReadFile(filepath.Join(refDir, "EXPECTED.tsv"))
	if err != nil {
		return nil, err
	}
	var paths []string
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i > 0 {
			paths = append(paths, strings.SplitN(line, "\t", 2)[0])
		}
	}
	return paths, nil
}

func checkOps(t *testing.T, got, want []Op) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d ops, want %d", len(got), len(want))
	}
	for i := range got {
		if !equalOp(got[i], want[i]) {
			t.Errorf("op %d:\ngot  %s\nwant %s", i, AppendOp(nil, got[i]), AppendOp(nil, want[i]))
		}
	}
}

func equalOp(a, b Op) bool {
	if a.Index != b.Index || a.Time != b.Time || a.Type != b.Type || a.Process != b.Process || a.F != b.F ||
		!equalValue(a.Value, b.Value) || !equalValue(a.Error, b.Error) || len(a.Extra) != len(b.Extra) {
		return false
	}
	for k, v := range a.Extra {
		if w, ok := b.Extra[k]; !ok || !equalValue(v, w) {
			return false
		}
	}
	return true
}

// equalValue compares decoded values by type and value, taking NaN as equal
// to NaN and sets in any order.
func equalValue(a, b any) bool {
	switch x := a.(type) {
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !equalValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case Set:
		y, ok := b.(Set)
		if !ok {
			return false
		}
		return equalValue(sortedSet(x), sortedSet(y))
	case map[Keyword]any:
		y, ok := b.(map[Keyword]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !equalValue(v, w) {
				return false
			}
		}
		return true
	case map[any]any:
		y, ok := b.(map[any]any)
		return ok && bytes.Equal(AppendValue(nil, x), AppendValue(nil, y))
	}
	return a == b
}

func sortedSet(s Set) []any {
	xs := append([]any{}, s...)
	sort.Slice(xs, func(i, j int) bool { return string(AppendValue(nil, xs[i])) < string(AppendValue(nil, xs[j])) })
	return xs
}

// historyLines returns n ops of a lock-counter run as hiatus writes them.
func historyLines(n int) []byte {
	w := &bytes.Buffer{}
	var line []byte
	fs := []Keyword{"acquire", "read", "write", "release"}
	for i := range n {
		p := Process(i / 2 % 10)
		op := Op{Index: int64(i), Time: int64(i) * 1234567, Type: Invoke, Process: p, F: fs[i/2%4]}
		if i%2 == 1 {
			op.Type = Ok
			switch op.F {
			case "acquire":
				op.Extra = map[Keyword]any{"token": "3f9a1c2b7d", "lease-ms": int64(500), "fence": int64(i)}
			case "read", "write":
				op.Value = int64(i / 8)
			}
		}
		if i%1000 == 999 {
			op = Op{Index: int64(i), Time: int64(i) * 1234567, Type: Info, Process: Nemesis, F: "pause",
				Value: map[Keyword]any{"kind": Keyword("sigstop"), "worker": int64(1), "ms": int64(800)}}
		}
		line = AppendOp(line[:0], op)
		w.Write(line)
		w.WriteByte('\n')
	}
	return w.Bytes()
}

func benchmarkRead(b *testing.B, slow bool) {
	data := historyLines(100000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "bench.edn")
		r.slow = slow
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 100000 {
			b.Fatalf("read %d ops", n)
		}
	}
}

// BenchmarkReadLines reads 100k ops of a hiatus history, one op a line.
func BenchmarkReadLines(b *testing.B) { benchmarkRead(b, false) }

// BenchmarkReadLinesGeneral reads the same history with the EDN library.
func BenchmarkReadLinesGeneral(b *testing.B) { benchmarkRead(b, true) }

// TestKeepExtraShares: ops whose kept keys are written alike share one
// Extra map, and ops of ever new values share none past maxShared; what is
// left out is still read, so a malformed or repeated key left out is the
// error it is when kept.
func TestKeepExtraShares(t *testing.T) {
	var b strings.Builder
	for i := range 3 * maxShared {
		fmt.Fprintf(&b, "{:type :ok, :process 1, :f :acquire, :lease-ms 500, :token \"t%d\"}\n", i)
		fmt.Fprintf(&b, "{:type :invoke, :process 1, :f :write, :value 1, :fence %d, :section %d}\n", i, i)
	}
	r := NewReader(strings.NewReader(b.String()), "h.edn")
	r.KeepExtra(KeyLeaseMS, KeyFence)
	ops, err := readAll(r)
	if err != nil || len(ops) != 6*maxShared {
		t.Fatalf("%d ops, %v", len(ops), err)
	}
	if reflect.ValueOf(ops[0].Extra).UnsafePointer() != reflect.ValueOf(ops[len(ops)-2].Extra).UnsafePointer() {
		t.Errorf("the acquires' {:lease-ms 500} are not one map")
	}
	if len(r.shared) > maxShared {
		t.Errorf("%d maps shared, more than %d", len(r.shared), maxShared)
	}
	if got := ops[len(ops)-1].Extra; len(got) != 1 || got[KeyFence] != int64(3*maxShared-1) {
		t.Errorf("the last write's extras: %v", got)
	}
	// Values written alike under other keys are other extras: a :fence 5
	// after a :lease-ms 5 is not given the acquire's map.
	two := "{:type :ok, :process 1, :f :acquire, :lease-ms 5}\n{:type :invoke, :process 1, :f :write, :value 1, :fence 5}\n"
	r = NewReader(strings.NewReader(two), "h.edn")
	r.KeepExtra(KeyLeaseMS, KeyFence)
	if ops, err := readAll(r); err != nil || len(ops) != 2 || len(ops[1].Extra) != 1 || ops[1].Extra[KeyFence] != int64(5) {
		t.Errorf("%q keeping :lease-ms and :fence: %v, %v", two, ops, err)
	}
	for _, src := range []string{
		`{:type :ok, :process 1, :f :acquire, :token "a", :token "b"}`,
		`{:type :ok, :process 1, :f :acquire, :token "\q"}`,
		`{:type :ok, :process 1, :f :acquire, :token 01}`,
		`{:type :ok, :process 1, :f :acquire, :a 1, :b 2, :c 3, :d 4, :e 5, :fence 6}`,
		`{:type :ok, :process 1, :f :acquire, :fence [1 2], :lease-ms 5, :x {:y 1}}`,
	} {
		for _, p := range paths {
			if _, err := readWith(src, p.slow); err != nil && !errors.As(err, new(*SyntaxError)) {
				t.Errorf("%s, %s path: %v", src, p.name, err)
			}
		}
	}
}
