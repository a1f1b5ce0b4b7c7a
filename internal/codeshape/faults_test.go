package codeshape

import (
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hiatus-dev/hiatus/harness"
)

// faultNameHomes are the files that may spell a kind of fault's name: its
// declaration (nemesis's Kind* constants; the in-section pauses, which the
// checker tells apart, in history's vocabulary, which also has the op
// :restart and :stop, words of their own).
var faultNameHomes = map[string]bool{
	"nemesis/nemesis.go":    true,
	"nemesis/pausenode.go":  true,
	"history/vocabulary.go": true,
}

// faultsOnly reports whether s is a --nemesis of names alone: a fault, a
// sequence (a+b) or a list.
func faultsOnly(s string, names map[string]bool) bool {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' })
	return len(parts) > 0 && !slices.ContainsFunc(parts, func(p string) bool { return !names[p] })
}

// TestFaultNamesDeclared: no program file spells the name of a kind of
// fault but where it is declared. Every other names it by its constant, so
// a fault renamed or removed is renamed or removed everywhere, and a rule
// of where a fault may run is never a string compared by hand.
func TestFaultNamesDeclared(t *testing.T) {
	names := map[string]bool{}
	for _, k := range harness.NemesisNames() {
		names[k] = true
	}
	for _, k := range harness.InSectionKinds() {
		names[string(k)] = true
	}
	walkGo(t, func(rel string, f *ast.File, fset *token.FileSet) {
		if faultNameHomes[rel] {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && faultsOnly(s, names) {
				t.Errorf("%s: %s names kinds of fault: use their constants (nemesis.Kind*)", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
	})
}

// TestFaultsDocumented: every kind of fault --nemesis takes is a row of
// docs/nemesis.md's table of faults (the table under the header "|
// `--nemesis` |"; a row's first cell names its kinds) and is named in the
// README's --nemesis row, so that a fault declared is a fault documented;
// and each row of that table names only kinds there are.
func TestFaultsDocumented(t *testing.T) {
	kinds := harness.NemesisNames()
	rows := map[string]bool{} // the kinds the table's first cells name
	table := false
	for l := range strings.Lines(repoText(t, "docs/nemesis.md")) {
		switch {
		case strings.HasPrefix(l, "| `--nemesis` |"):
			table = true
			continue
		case !strings.HasPrefix(l, "|"):
			table = false
		}
		if cells := strings.Split(l, "|"); table && !strings.HasPrefix(l, "| ---") {
			for _, f := range strings.Split(cells[1], ",") {
				if name := strings.Trim(strings.TrimSpace(f), "`"); slices.Contains(kinds, name) {
					rows[name] = true
				} else {
					t.Errorf("docs/nemesis.md: a row of the table of faults names %q, which is no kind of fault", name)
				}
			}
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/nemesis.md has no table of faults under a \"| `--nemesis` |\" header")
	}
	var readme string
	for l := range strings.Lines(repoText(t, "README.md")) {
		if strings.HasPrefix(l, "| `--nemesis` |") {
			readme = l
		}
	}
	for _, k := range kinds {
		if !rows[k] {
			t.Errorf("docs/nemesis.md: no row of the table of faults names %s", k)
		}
		if !strings.Contains(readme, "`"+k+"`") {
			t.Errorf("README.md: the --nemesis row does not name %s", k)
		}
	}
}
