package history

import (
	"slices"
	"strings"
	"testing"
)

// TestFaultPairer: an end ends the open fault of its kind on its target;
// faults of other kinds or targets stay open; a begin on a target whose
// fault is open ends it first; a failed begin opens none; events without a
// :kind pair by their :f.
func TestFaultPairer(t *testing.T) {
	h := `{:type :info, :process :nemesis, :f :pause, :value {:kind :sigstop, :process 1, :worker 1}}
{:type :info, :process :nemesis, :f :start, :value {:kind :clock, :node 2}}
{:type :info, :process :nemesis, :f :pause, :value {:kind :sleep, :process 1}}
{:type :info, :process :nemesis, :f :resume, :value {:kind :sigstop, :process 1, :worker 1}}
{:type :info, :process :nemesis, :f :start, :value {:kind :clock, :node 3}}
{:type :info, :process :nemesis, :f :stop, :value {:kind :clock, :node 2}}
{:type :info, :process :nemesis, :f :kill, :value {:kind :kill-redis, :error "no server"}}
{:type :info, :process :nemesis, :f :pause, :value {:kind :sleep, :process 1}}
{:type :info, :process :nemesis, :f :pause}
{:type :invoke, :process 0, :f :pause}
{:type :info, :process :nemesis, :f :resume}
{:type :info, :process :nemesis, :f :read}`
	ops, err := ReadAll(strings.NewReader(h), "h.edn")
	if err != nil {
		t.Fatal(err)
	}
	want := []int{-1, -1, -1, 0, -1, 1, -1, 2, -1, -9, 8, -9} // -9: not a fault event
	var p FaultPairer
	for i, o := range ops {
		e, ok := ReadFaultEvent(o)
		got := -9
		if ok {
			got = p.Add(i, e)
		}
		if got != want[i] {
			t.Errorf("op %d (%s): ends %d, want %d", i, AppendOp(nil, o), got, want[i])
		}
	}
	if open := p.Open(); !slices.Equal(open, []int{4, 7}) {
		t.Errorf("open %v, want the clock on node 3 and the second sleep", open)
	}
	if e, _ := ReadFaultEvent(ops[6]); !e.Failed || e.Process != -1 || e.Kind != "kill-redis" {
		t.Errorf("a failed kill: %+v", e)
	}
}
