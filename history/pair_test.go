package history

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestPairs(t *testing.T) {
	ops, err := ReadFile(filepath.Join("testdata", "vector.edn"))
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := Pairs(ops)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		inv, comp int64 // op indexes; comp -1 when not done
		outcome   Type
	}{{0, 1, Ok}, {2, -1, Info}, {4, 5, Fail}, {7, 8, Ok}}
	if len(pairs) != len(want) {
		t.Fatalf("got %d pairs, want %d", len(pairs), len(want))
	}
	for i, w := range want {
		p := pairs[i]
		if p.Invoke.Index != w.inv || p.Done != (w.comp >= 0) || p.Done && p.Complete.Index != w.comp || p.Outcome() != w.outcome {
			t.Errorf("pair %d: got invoke %d, done %v, complete %d, %v; want %d, %d, %v",
				i, p.Invoke.Index, p.Done, p.Complete.Index, p.Outcome(), w.inv, w.comp, w.outcome)
		}
	}
	if !pairs[1].Done && pairs[1].Complete.Type != 0 {
		t.Errorf("an unfinished pair has a completion: %v", pairs[1].Complete)
	}
}

func TestPairsLines(t *testing.T) {
	ops, err := ReadFile(filepath.Join("testdata", "lines.edn"))
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := Pairs(ops)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pairs {
		got = append(got, string(p.Invoke.F)+":"+p.Outcome().String())
	}
	const want = "acquire:ok acquire:fail read:ok write:info read:info"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

func TestPairsInconsistent(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"completion without invocation",
			"{:type :invoke, :process 0, :f :read} {:type :ok, :process 1, :f :read}",
			"op 1: ok completion of read on process 1, which has no open invocation"},
		{"second completion",
			"{:type :invoke, :process 0, :f :read} {:type :ok, :process 0, :f :read} {:type :fail, :process 0, :f :read}",
			"op 2: fail completion of read on process 0, which has no open invocation"},
		{"two open invocations",
			"{:type :invoke, :process 3, :f :read} {:type :invoke, :process 3, :f :write, :value 1}",
			"op 1: process 3 invokes write while its read invoked at op 0 is still open"},
		{"f differs",
			"{:type :invoke, :process 0, :f :read} {:type :ok, :process 0, :f :write}",
			"op 1: completion of write on process 0, whose open invocation at op 0 is read"},
		{"invoke after info",
			"{:type :invoke, :process 2, :f :w} {:type :info, :process 2, :f :w} {:type :invoke, :process 2, :f :r}",
			"op 2: process 2 invokes r after its op 1 completed :info; a crashed process must not invoke again"},
		{"recorded index",
			"{:index 40, :type :invoke, :process 0, :f :read} {:index 41, :type :ok, :process 1, :f :read}",
			"op 41: ok completion of read on process 1, which has no open invocation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := ReadAll(strings.NewReader(tc.src), "h.edn")
			if err != nil {
				t.Fatal(err)
			}
			_, err = Pairs(ops)
			var ie *InconsistentError
			if !errors.As(err, &ie) || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestPairsSkipsNemesis: the nemesis's ops are not paired; those of every
// other process are, a named one's too.
func TestPairsSkipsNemesis(t *testing.T) {
	src := `{:type :info, :process :nemesis, :f :start} {:type :info, :process :nemesis, :f :start}
{:type :invoke, :process :checker, :f :check} {:type :invoke, :process 0, :f :r} {:type :info, :process :nemesis, :f :stop}
{:type :ok, :process :checker, :f :check}`
	ops, err := ReadAll(strings.NewReader(src), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	pairs, err := Pairs(ops)
	if err != nil || len(pairs) != 2 || pairs[0].Invoke.Index != 2 || !pairs[0].Done || pairs[0].Complete.Index != 5 ||
		pairs[1].Invoke.Index != 3 || pairs[1].Done {
		t.Errorf("got %+v, %v; want the checker's op 2 paired with op 5, and op 3 open", pairs, err)
	}
}

func TestPairsEmpty(t *testing.T) {
	if pairs, err := Pairs(nil); err != nil || len(pairs) != 0 {
		t.Errorf("got %v, %v", pairs, err)
	}
}
