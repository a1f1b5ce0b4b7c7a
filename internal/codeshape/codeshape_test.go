// Package codeshape holds tests of the code's own shape, which no other
// package's tests would see: every function short enough to read at once,
// and every file opened or written one way.
package codeshape

import (
	"go/ast"
	"go/token"
	"testing"
)

// maxLines is the longest a function of the program may be.
const maxLines = 80

// TestFunctionsShort: no function or method outside the tests is longer
// than maxLines lines, from its signature to its closing brace.
func TestFunctionsShort(t *testing.T) {
	walkGo(t, func(_ string, f *ast.File, fset *token.FileSet) {
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
	})
}
