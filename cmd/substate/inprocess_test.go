package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// TestNoWorkerInProcess: no test of this package builds a worker in its
// own process (workertest.Start or Open, worker.New). The commands under
// test reach a worker started with startProcess or startWorkerProcess, a
// child process as an operator's worker is; a test of the worker itself
// belongs in worker/e2e. A command that runs a worker of its own (the
// demo) is driven through Main, as a user runs it.
func TestNoWorkerInProcess(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	builds := map[string][]string{"workertest": {"Start", "Open"}, "worker": {"New"}}
	var found []string
	for _, name := range files {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && slices.Contains(builds[pkg.Name], sel.Sel.Name) {
					found = append(found, fset.Position(sel.Pos()).String()+": "+pkg.Name+"."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	for _, f := range found {
		t.Errorf("%s builds a worker in process: start one with startWorkerProcess, or move the test to worker/e2e", f)
	}
}
