// Package codeshape holds tests of the code's own shape, which no other
// package's tests would see: every function short enough to read at once.
package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the longest a function of the program may be.
const maxLines = 80

// TestFunctionsShort: no function or method outside the tests is longer
// than maxLines lines, from its signature to its closing brace.
func TestFunctionsShort(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata"):
			return fs.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines > maxLines {
				t.Errorf("%s: %s is %d lines, more than %d", fset.Position(fn.Pos()), fn.Name.Name, lines, maxLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
