package substate_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateArchitecture = flag.Bool("update-architecture", false, "rewrite the import table of docs/architecture.md from the code")

const (
	module      = "github.com/substatehq/substate"
	archDoc     = "docs/architecture.md"
	importsFrom = "<!-- imports:begin (go test . -run TestArchitecture -update-architecture) -->"
	importsTo   = "<!-- imports:end -->"
)

// TestArchitecture holds docs/architecture.md to the code: every package
// of the module is named in its package table and every package the table
// names exists; the import table between its markers is the module's
// import graph (regenerate it with -update-architecture); and no package
// imports one the layers put above it; and the packages that act on
// executions whichever provider runs them name no provider.
func TestArchitecture(t *testing.T) {
	pkgs := modulePackages(t)
	doc, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("PackageTable", func(t *testing.T) { checkPackageTable(t, string(doc), pkgs) })
	t.Run("Imports", func(t *testing.T) { checkImportTable(t, doc, pkgs) })
	t.Run("Layers", func(t *testing.T) { checkLayers(t, pkgs) })
	t.Run("ProviderAgnostic", checkProviderAgnostic)
}

// modulePackages maps each package directory of the module (relative,
// "." for the root) to the module packages its non-test files import.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		imports := pkgs[dir]
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if p == module || !strings.HasPrefix(p, module+"/") {
				continue
			}
			if p = strings.TrimPrefix(p, module+"/"); !slices.Contains(imports, p) {
				imports = append(imports, p)
			}
		}
		slices.Sort(imports)
		pkgs[dir] = imports
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// tableRow matches a row of the package table: its first cell and the rest.
var tableRow = regexp.MustCompile("(?m)^\\| (`[^|]*`) \\|(.*)\\|$")

// named matches a backticked package path in a cell.
var named = regexp.MustCompile("`([a-z0-9_…]+(?:/[a-z0-9_…]*)*)`")

func checkPackageTable(t *testing.T, doc string, pkgs map[string][]string) {
	var mentioned, listed []string
	for _, row := range tableRow.FindAllStringSubmatch(doc, -1) {
		for _, m := range named.FindAllStringSubmatch(row[1], -1) {
			listed = append(listed, strings.TrimSuffix(m[1], "/"))
		}
		for _, m := range named.FindAllStringSubmatch(row[1]+row[2], -1) {
			mentioned = append(mentioned, strings.TrimSuffix(m[1], "/"))
		}
	}
	for dir := range pkgs {
		if dir == "." {
			continue
		}
		if !slices.ContainsFunc(mentioned, func(name string) bool { return matchPackage(name, dir) }) {
			t.Errorf("%s: package %s is in no row of the package table", archDoc, dir)
		}
	}
	for _, name := range listed {
		if !containsFunc(pkgs, func(dir string) bool { return matchPackage(name, dir) }) {
			t.Errorf("%s: the package table names %s, which is no package", archDoc, name)
		}
	}
}

// matchPackage reports whether a name of the table (where "…" stands for
// any run of characters within a path element) is the package dir.
func matchPackage(name, dir string) bool {
	if !strings.Contains(name, "…") {
		return name == dir
	}
	pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(name), "…", "[^/]*") + "$"
	return regexp.MustCompile(pattern).MatchString(dir)
}

func containsFunc(pkgs map[string][]string, f func(string) bool) bool {
	for dir := range pkgs {
		if f(dir) {
			return true
		}
	}
	return false
}

// importTable is the markdown table of the module's imports between its
// packages, the root and internal/ left out: every package imports the
// root, and internal/ holds the leaf helpers.
func importTable(pkgs map[string][]string) []byte {
	var b bytes.Buffer
	b.WriteString(importsFrom + "\n\n| package | imports of this module (besides the root and `internal/`) |\n| --- | --- |\n")
	dirs := make([]string, 0, len(pkgs))
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		if dir == "." || strings.HasPrefix(dir, "internal/") {
			continue
		}
		var imps []string
		for _, p := range pkgs[dir] {
			if !strings.HasPrefix(p, "internal/") {
				imps = append(imps, "`"+p+"`")
			}
		}
		if len(imps) == 0 {
			imps = []string{"—"}
		}
		b.WriteString("| `" + dir + "` | " + strings.Join(imps, ", ") + " |\n")
	}
	b.WriteString("\n" + importsTo)
	return b.Bytes()
}

func checkImportTable(t *testing.T, doc []byte, pkgs map[string][]string) {
	begin, end := bytes.Index(doc, []byte(importsFrom)), bytes.Index(doc, []byte(importsTo))
	if begin < 0 || end < begin {
		t.Fatalf("%s has no import table between %q and %q", archDoc, importsFrom, importsTo)
	}
	want := importTable(pkgs)
	got := doc[begin : end+len(importsTo)]
	if bytes.Equal(got, want) {
		return
	}
	if *updateArchitecture {
		out := slices.Concat(doc[:begin], want, doc[end+len(importsTo):])
		if err := os.WriteFile(archDoc, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the import table is not the code's; run go test . -run TestArchitecture -update-architecture and read the diff", archDoc)
}

// layers are the floors of the module, lowest first: a package may import
// only packages of its own floor or below, and on its own floor only those
// the import table shows.
var layers = [][]string{
	{".", "internal/"},
	{"redact", "mapping", "slofile"},
	{"state", "bus", "publishers", "engine", "contract", "operate"},
	{"consumers", "ingress", "reconcile", "replay", "providers/", "actions"},
	{"httpapi"},
	{"worker"},
	{"testkit/", "tools/", "examples/"},
	{"cmd/"},
}

func floor(dir string) int {
	best, n := -1, -1
	for i, layer := range layers {
		for _, prefix := range layer {
			if dir == prefix || strings.HasPrefix(dir, strings.TrimSuffix(prefix, "/")+"/") {
				if len(prefix) > n {
					best, n = i, len(prefix)
				}
			}
		}
	}
	return best
}

func checkLayers(t *testing.T, pkgs map[string][]string) {
	for dir, imps := range pkgs {
		f := floor(dir)
		if f < 0 {
			t.Errorf("package %s is on no floor of the layers in architecture_test.go", dir)
			continue
		}
		for _, p := range imps {
			if g := floor(p); g > f {
				t.Errorf("%s (floor %d) imports %s (floor %d), a package above it", dir, f, p, g)
			}
		}
	}
}

// providerAgnostic are packages that know no provider: what a provider
// allows and costs reaches them as its substate.ProviderRules, from its
// package under providers/ by way of worker/.
var providerAgnostic = []string{"actions", "operate"}

// providerText matches a string literal with a provider's name or API in
// it.
var providerText = regexp.MustCompile(`(?i)restate|step ?functions|\baws\b|\b(Describe|Stop|Redrive|Start)Execution\b|GetExecutionHistory`)

// checkProviderAgnostic fails when a non-test file of a providerAgnostic
// package names a provider other than the built-in engine
// (substate.Provider…) or has a string literal with a provider's name or
// API in it: such a rule belongs in the provider's package.
func checkProviderAgnostic(t *testing.T) {
	for _, dir := range providerAgnostic {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if pkg, ok := n.X.(*ast.Ident); ok && pkg.Name == "substate" && strings.HasPrefix(n.Sel.Name, "Provider") &&
						n.Sel.Name != "Provider" && n.Sel.Name != "ProviderEngine" && n.Sel.Name != "ProviderRules" {
						t.Errorf("%s: %s names a provider; take its rules from its ProviderRules", fset.Position(n.Pos()), n.Sel.Name)
					}
				case *ast.BasicLit:
					if n.Kind == token.STRING && providerText.MatchString(n.Value) {
						t.Errorf("%s: %s is a provider's text; it belongs in the provider's package", fset.Position(n.Pos()), n.Value)
					}
				}
				return true
			})
		}
	}
}
