package history

import (
	"fmt"
	"testing"
)

// TestRenewerRoundTrip: a renewer's process is written by its name and
// read back as the same renewer, on both paths of the Reader and in every
// chunking; names that are not a renewer's as appendRenewer writes it are
// ordinary names, numbered below -1.
func TestRenewerRoundTrip(t *testing.T) {
	for _, c := range []struct {
		holder Process
		gen    int
		name   string
	}{
		{0, 0, ":renew-0"}, {3, 0, ":renew-3"}, {3, 1, ":renew-3-1"}, {1<<40 - 1, maxRenewGen - 1, ":renew-1099511627775-2097151"},
	} {
		p, ok := Renewer(c.holder, c.gen)
		if !ok {
			t.Fatalf("Renewer(%d, %d): not a renewer", c.holder, c.gen)
		}
		if h, g, ok := p.Renews(); !ok || h != c.holder || g != c.gen {
			t.Errorf("Renewer(%d, %d).Renews() = %d, %d, %v", c.holder, c.gen, h, g, ok)
		}
		if p.String() != c.name || !p.IsClient() || !p.IsRenewer() {
			t.Errorf("Renewer(%d, %d) = %s (client %v), want %s", c.holder, c.gen, p, p.IsClient(), c.name)
		}
		line := string(AppendOp(nil, Op{Index: 0, Time: 5, Type: Invoke, Process: p, F: FRenew, Extra: map[Keyword]any{KeyToken: "ab"}}))
		if want := fmt.Sprintf("{:index 0, :time 5, :type :invoke, :process %s, :f :renew, :value nil, :token \"ab\"}", c.name); line != want {
			t.Errorf("written %s, want %s", line, want)
		}
		for _, slow := range []bool{false, true} {
			ops, err := readWith(line+"\n", slow)
			if err != nil || len(ops) != 1 || ops[0].Process != p {
				t.Errorf("read %s (slow %v): %v, %v; want process %d", line, slow, ops, err, p)
			}
		}
	}
	for _, p := range []Process{0, 7, -2, Nemesis} {
		if p.IsRenewer() {
			t.Errorf("%v is a renewer", p)
		}
	}
	for _, bad := range []struct {
		holder Process
		gen    int
	}{{-1, 0}, {1 << 40, 0}, {0, -1}, {0, maxRenewGen}} {
		if _, ok := Renewer(bad.holder, bad.gen); ok {
			t.Errorf("Renewer(%d, %d) is a renewer", bad.holder, bad.gen)
		}
	}
	for _, name := range []string{":renew-", ":renew-03", ":renew-3-0", ":renew-3-01", ":renew--3", ":renew-x", ":renew-3-", ":renew-1099511627776",
		":renew-3-2097152", `"renew-3"`, ":renewal-3", "renew-3", ":renew-3-1-1"} {
		for _, slow := range []bool{false, true} {
			ops, err := readWith(fmt.Sprintf("{:type :invoke, :process %s, :f :renew}\n{:type :ok, :process %s, :f :renew}\n", name, name), slow)
			if err != nil || len(ops) != 2 || ops[0].Process != -2 || ops[1].Process != -2 {
				t.Errorf("read process %s (slow %v): %v, %v; want a name numbered -2", name, slow, ops, err)
			}
		}
	}
}
