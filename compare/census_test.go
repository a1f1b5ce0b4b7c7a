package compare

import (
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/checker"
	"github.com/hiatus-dev/hiatus/harness"
)

// TestCensus: every cell of the census is a run that validates, named
// apart from every other; each row runs under the battery its placement
// allows (a Redis lock under every probe but one node's majority cut),
// and the table gives each cell its verdict, what decided it and its run,
// and says why a cell was left out.
func TestCensus(t *testing.T) {
	setups, err := ScenarioSetups(CensusName)
	if err != nil {
		t.Fatal(err)
	}
	if rows := len(CensusRows()); rows < 18 {
		t.Errorf("%d census rows: the census is at least 18 library × use rows", rows)
	}
	p := Plan{Runs: 1, Name: "census", Base: harness.DefaultConfig(), Setups: setups}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	perRow := map[string]int{}
	for _, s := range setups {
		name := p.Config(s, 0).Name
		if names[name] {
			t.Errorf("two cells named %s", name)
		}
		names[name] = true
		perRow[s.Version+"/"+s.Side]++
	}
	for _, r := range CensusRows() {
		n, want := perRow[r.Library+"/"+r.Usage], len(Probes())-1
		if r.Store == "" && r.Lock != "etcd" && r.Lock != "zookeeper" && n != want {
			t.Errorf("%s, %s: %d probes, want every one a Redis lock takes (%d)", r.Library, r.Usage, n, want)
		}
		if n < 7 {
			t.Errorf("%s, %s: %d probes: want at least the seven every placement takes", r.Library, r.Usage, n)
		}
	}
	tab := &Table{Kind: "scenario", Runs: 1}
	for i, s := range setups {
		f := Figures{Valid: checker.Valid.String(), Path: "run-" + s.Slug()}
		if i == 1 {
			f.Valid, f.Failed = checker.Invalid.String(), []string{"fence-order"}
		}
		tab.Rows = append(tab.Rows, Row{Setup: s, Runs: []Figures{f}})
	}
	md := string(tab.Markdown())
	for _, want := range []string{"| library | use | lease, run | none | sigstop |", "[✓](run-" + setups[0].Slug() + ")",
		"[✗ fence-order](run-" + setups[1].Slug() + ")", "Cells left out", "is not kept on Redis"} {
		if !strings.Contains(md, want) {
			t.Errorf("the census table lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "not run") {
		t.Errorf("a cell of the census has no run:\n%s", md)
	}
}

// TestCensusCell: a cell says its runs' verdicts, k of n, what decided
// them (lost updates, or the failed checks; lock-counter only when no
// update was lost), links the first run that was not valid, and carries
// the errors of runs that could not be made.
func TestCensusCell(t *testing.T) {
	valid := Figures{Valid: checker.Valid.String(), Path: "v"}
	lost := Figures{Valid: checker.Invalid.String(), Path: "l", Failed: []string{checker.ModelLockCounter, "linear"}}
	lost.LostMin, lost.LostMax = 2, 2
	counter := Figures{Valid: checker.Invalid.String(), Path: "c", Failed: []string{checker.ModelLockCounter}}
	broken := Figures{Valid: checker.Unknown.String(), Error: "adapter did not say hello"}
	for _, tc := range []struct {
		name string
		runs []Figures
		want string
		errs int
	}{
		{"valid", []Figures{valid}, "[✓](v)", 0},
		{"lost", []Figures{lost}, "[✗ 2 lost, linear](l)", 0},
		{"counter-without-loss", []Figures{counter}, "[✗ lock-counter](c)", 0},
		{"error", []Figures{broken}, "? error", 1},
		{"several", []Figures{valid, lost, broken}, "[✗ 1/3, ? 1: 0–2 lost, linear, error](l)", 1},
		{"cut-short", []Figures{valid}, "[✓ 1/1 (of 3)](v)", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := &Table{Runs: max(1, len(tc.runs))}
			if tc.name == "cut-short" {
				tab.Runs = 3
			}
			got, errs := tab.censusCell(Row{Setup: Setup{Probe: "sigstop", Version: "lib", Side: "use"}, Runs: tc.runs})
			if got != tc.want || len(errs) != tc.errs {
				t.Errorf("censusCell = %q, %d errors; want %q, %d", got, len(errs), tc.want, tc.errs)
			}
		})
	}
}
