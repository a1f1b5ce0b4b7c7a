package history

import (
	"bytes"
	"math"
	"math/big"
	"testing"
)

func TestAppendOp(t *testing.T) {
	big1, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	for _, tc := range []struct {
		name string
		op   Op
		want string
	}{
		{"invoke", Op{Index: 0, Time: 1500, Type: Invoke, Process: 2, F: "acquire"},
			`{:index 0, :time 1500, :type :invoke, :process 2, :f :acquire, :value nil}`},
		{"ok with extras sorted", Op{Index: 7, Time: 9, Type: Ok, Process: 1, F: "acquire",
			Extra: map[Keyword]any{"token": "ab\"c", "fence": int64(3), "lease-ms": int64(500)}},
			`{:index 7, :time 9, :type :ok, :process 1, :f :acquire, :value nil, :fence 3, :lease-ms 500, :token "ab\"c"}`},
		{"fail with error", Op{Index: 3, Time: 4, Type: Fail, Process: 0, F: "write", Value: int64(207), Error: Keyword("stale-fence")},
			`{:index 3, :time 4, :type :fail, :process 0, :f :write, :value 207, :error :stale-fence}`},
		{"unset index and time", Op{Index: Unset, Time: Unset, Type: Info, Process: Nemesis, F: "pause",
			Value: map[Keyword]any{"process": int64(2), "kind": Keyword("sigstop")}},
			`{:type :info, :process :nemesis, :f :pause, :value {:kind :sigstop, :process 2}}`},
		{"values", Op{Index: Unset, Time: Unset, Type: Ok, Process: 0, F: "txn",
			Value: []any{big1, 1.5, 2.0, math.Inf(1), true, nil, Set{int64(1)}, "a\nb"}},
			`{:type :ok, :process 0, :f :txn, :value [123456789012345678901234567890N 1.5 2.0 ##Inf true nil #{1} "a\nb"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(AppendOp(nil, tc.op)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestWriterLines(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	for i := range 3 {
		if err := w.Write(Op{Index: int64(i), Time: int64(i), Type: Invoke, Process: 0, F: "read"}); err != nil {
			t.Fatal(err)
		}
	}
	if b.Len() != 0 {
		t.Errorf("wrote %d bytes before Flush", b.Len())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b.Bytes(), []byte("\n")); n != 3 {
		t.Errorf("%d lines, want 3:\n%s", n, b.String())
	}
}

func BenchmarkAppendOp(b *testing.B) {
	o := Op{Index: 123456, Time: 9876543210, Type: Ok, Process: 2, F: "write", Value: int64(207),
		Extra: map[Keyword]any{"fence": int64(17)}}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendOp(buf[:0], o)
	}
	b.SetBytes(int64(len(buf)))
}
