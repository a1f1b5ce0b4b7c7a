package codeshape

import (
	"go/ast"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of the program's packages.
const module = "github.com/hiatus-dev/hiatus/"

// A docPackage is a row of docs/architecture.md's table.
type docPackage struct {
	floor   int
	imports []string
}

// docRow is a row of the table: | floor | `package` | `a` `b` or — | owns |.
var docRow = regexp.MustCompile("^\\| (\\d+) \\| `([^`]+)` \\| ([^|]*) \\| [^|]+ \\|$")

// TestArchitectureDoc: docs/architecture.md's table names every package of
// the program and no other, each with what its files (tests aside) import
// of hiatus, and every import goes to a lower floor.
func TestArchitectureDoc(t *testing.T) {
	doc := readArchitecture(t)
	code := programImports(t)
	for _, p := range slices.Sorted(maps.Keys(code)) {
		d, ok := doc[p]
		if !ok {
			t.Errorf("docs/architecture.md: package %s is not in the table", p)
			continue
		}
		if got := slices.Sorted(maps.Keys(code[p])); !slices.Equal(got, d.imports) {
			t.Errorf("docs/architecture.md: %s imports %v, the table says %v", p, got, d.imports)
		}
		for imp := range code[p] {
			if q, ok := doc[imp]; ok && q.floor >= d.floor {
				t.Errorf("docs/architecture.md: %s (floor %d) imports %s (floor %d): an import must go down", p, d.floor, imp, q.floor)
			}
		}
	}
	for p := range doc {
		if _, ok := code[p]; !ok {
			t.Errorf("docs/architecture.md: the table names %s, which is no package", p)
		}
	}
}

// readArchitecture reads the table of docs/architecture.md, by package.
func readArchitecture(t *testing.T) map[string]docPackage {
	t.Helper()
	out := map[string]docPackage{}
	for l := range strings.Lines(repoText(t, "docs/architecture.md")) {
		m := docRow.FindStringSubmatch(strings.TrimSuffix(l, "\n"))
		if m == nil {
			continue
		}
		floor, _ := strconv.Atoi(m[1])
		var imports []string
		for _, w := range strings.Fields(m[3]) {
			if w != "—" {
				imports = append(imports, strings.Trim(w, "`"))
			}
		}
		slices.Sort(imports)
		out[m[2]] = docPackage{floor: floor, imports: imports}
	}
	if len(out) == 0 {
		t.Fatal("docs/architecture.md has no table of packages")
	}
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// programImports maps each package directory of the program (one with a
// Go file, tests counted; not an adapter that is a module of its own) to
// the hiatus packages its files import, tests aside.
func programImports(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case notProgram(root, p, d):
			return fs.SkipDir
		case d.IsDir() && p != root && exists(filepath.Join(p, "go.mod")):
			return fs.SkipDir // a module of its own (an adapter's)
		case !d.IsDir() && strings.HasSuffix(p, ".go"):
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			if out[filepath.ToSlash(rel)] == nil {
				out[filepath.ToSlash(rel)] = map[string]bool{}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	walkGo(t, func(rel string, f *ast.File, _ *token.FileSet) {
		if out[filepath.Dir(rel)] == nil {
			return // of a module of its own
		}
		for _, im := range f.Imports {
			if path, _ := strconv.Unquote(im.Path.Value); strings.HasPrefix(path, module) {
				out[filepath.Dir(rel)][strings.TrimPrefix(path, module)] = true
			}
		}
	})
	return out
}
