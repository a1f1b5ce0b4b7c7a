package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fileCalls are the calls that open, make or replace a file or directory
// by path, which outside package files could read a planted pipe, read
// without limit, or write through a planted link. os.CreateTemp and
// os.MkdirTemp are not among them: they make a new name, privately.
var fileCalls = map[string]map[string]bool{
	"os": {"Open": true, "OpenFile": true, "ReadFile": true, "Create": true, "WriteFile": true,
		"Mkdir": true, "MkdirAll": true, "Rename": true, "Symlink": true, "Link": true,
		"Truncate": true, "OpenRoot": true, "OpenInRoot": true, "DirFS": true},
	"io/ioutil":             {"ReadFile": true, "WriteFile": true, "TempFile": true},
	"syscall":               {"Open": true, "Openat": true, "Creat": true},
	"golang.org/x/sys/unix": {"Open": true, "Openat": true, "Openat2": true, "Creat": true},
	// Writers of a path in other libraries the program imports.
	"github.com/prometheus/client_golang/prometheus": {"WriteToTextfile": true},
}

// fileCallsAllowed are the calls of fileCalls made elsewhere than package
// files, each by file, function and call, with the reason it is safe.
var fileCallsAllowed = map[string]string{
	"internal/files/*":                                          "the one way",
	"history/sort.go mergeRuns os.Open":                         "reads the runs it wrote into its own os.MkdirTemp directory",
	"history/sort.go writeOps os.Create":                        "writes a run into its own os.MkdirTemp directory",
	"nemesis/nemesis.go withChildren os.ReadFile":               "reads /proc/PID/stat, which the kernel makes",
	"topology/netns.go usedPrefixes os.ReadFile":                "reads /proc/net/route, which the kernel makes",
	"harness/ssh.go copySelf os.Open":                           "reads this program's own binary (os.Executable)",
	"harness/worker.go guardMetrics prometheus.WriteToTextfile": "writes by os.CreateTemp and a rename in the run's metrics directory, which the run made (store.Run.MakeDir): a link planted at the name is replaced, not written through",
	"web/web.go Open os.OpenRoot":                               "opens the store it serves as a Root, and opens nothing in it but by its open (regular files, O_NONBLOCK, re-checked)",
	"internal/adaptertest/adaptertest.go Leftovers os.ReadFile": "tests only: reads /proc/PID/environ and cmdline",
	"internal/browser/browser.go Screenshot os.WriteFile":       "tests only: a screenshot into the test's directory",
	"internal/sshtest/*":                                        "tests only: the test network's own configuration, keys and directories",
}

// TestFilesOneWay: no code outside package files opens, makes or replaces
// a file by path, but where fileCallsAllowed says why it may; and every
// entry there is still needed.
func TestFilesOneWay(t *testing.T) {
	used := map[string]bool{}
	walkGo(t, func(rel string, f *ast.File, fset *token.FileSet) {
		pkgs := imported(f)
		eachCall(f, func(fn string, call *ast.SelectorExpr) {
			id, ok := call.X.(*ast.Ident)
			if !ok || !fileCalls[pkgs[id.Name]][call.Sel.Name] {
				return
			}
			key := rel + " " + fn + " " + id.Name + "." + call.Sel.Name
			for _, k := range []string{key, filepath.Dir(rel) + "/*"} {
				if _, ok := fileCallsAllowed[k]; ok {
					used[k] = true
					return
				}
			}
			t.Errorf("%s: %s calls %s.%s: open inputs and write outputs through internal/files (or say why not in fileCallsAllowed)",
				fset.Position(call.Pos()), fn, id.Name, call.Sel.Name)
		})
	})
	for k := range fileCallsAllowed {
		if !used[k] {
			t.Errorf("fileCallsAllowed: %q matches no call any more; remove it", k)
		}
	}
}

// notProgram reports whether the directory d at p, under the module's
// root, holds none of the program: hidden ones, node_modules, test data,
// and the runs kept in store/.
func notProgram(root, p string, d fs.DirEntry) bool {
	return d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" ||
		d.Name() == "testdata" || filepath.Dir(p) == filepath.Join(root, "store"))
}

// repoText is the text of the module's file at rel (a slash path).
func repoText(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// walkGo parses each Go file of the program, not its tests nor the runs
// kept in store/ (a shrink's reproducer is a Go file).
func walkGo(t *testing.T, visit func(rel string, f *ast.File, fset *token.FileSet)) {
	t.Helper()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case notProgram(root, p, d):
			return fs.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		visit(filepath.ToSlash(rel), f, fset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// imported maps the names a file imports packages by to their paths.
func imported(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		m[name] = p
	}
	return m
}

// eachCall calls visit with each call of a selector (pkg.Func) in f and
// the name of the top-level function it is in.
func eachCall(f *ast.File, visit func(fn string, sel *ast.SelectorExpr)) {
	for _, decl := range f.Decls {
		fn := "(top level)"
		if d, ok := decl.(*ast.FuncDecl); ok {
			fn = d.Name.Name
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			// A reference counts as a call: f := os.ReadFile would hide one.
			if sel, ok := n.(*ast.SelectorExpr); ok {
				visit(fn, sel)
			}
			return true
		})
	}
}
