// Command norace prints the arguments of make test's step without the race detector: the
// packages, in the order of the patterns it is given, that have a test the race step cannot
// check, and a -run pattern naming those tests (qualifying says which). Every other test ran
// already under the race step, and runs again only in the gate, go test ./....
//
//	go test -tags long $(go run ./internal/norace ./store/mongo ./...)
//
// It lists the packages with the go command that $GO names, go by default, as make's $(GO).
package main

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// racePath is the import path of the package whose Enabled a qualifying test reads.
const racePath = "github.com/postsedge/caddy-posts/internal/race"

func main() {
	listed, err := exec.Command(cmp.Or(os.Getenv("GO"), "go"), append([]string{"list", "-tags", "long", "-f", "{{.Dir}}\t{{.ImportPath}}"}, os.Args[1:]...)...).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "norace: go list:", err)
		os.Exit(1)
	}
	var packages, tests []string
	for line := range strings.Lines(string(listed)) {
		dir, path, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		found, err := qualifying(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "norace:", err)
			os.Exit(1)
		}
		if len(found) > 0 && !slices.Contains(packages, path) {
			packages = append(packages, path)
			tests = append(tests, found...)
		}
	}
	if len(packages) == 0 {
		fmt.Fprintln(os.Stderr, "norace: no test to run without the race detector")
		os.Exit(1)
	}
	slices.Sort(tests)
	tests = slices.Compact(tests)
	for i, name := range tests {
		tests[i] = regexp.QuoteMeta(name)
	}
	fmt.Printf("-run=^(%s)$ %s\n", strings.Join(tests, "|"), strings.Join(packages, " "))
}

// qualifying returns the names of the tests of the package in dir that only the step without
// the race detector checks: those of the files only it builds, and those of the files both steps
// build that depend on what differs between the two. What differs is race.Enabled, what the
// files built for one step only assign in an init (a backend added to a list), and what they
// declare once for each step (a bound's factor). A test depends on a name when it refers to it, or
// to a function, variable or constant of the package that does, at any depth: by name, so that a
// method or a declaration of either test package (pkg, pkg_test) of that name counts, which can
// only add.
func qualifying(dir string) ([]string, error) {
	withRace, withLong := build.Default, build.Default
	withRace.BuildTags, withLong.BuildTags = []string{"race"}, []string{"long"}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var tests, both []string        // the tests of the files only the second step builds, of those both build
	refers := map[string][]string{} // each declaration of the files both build, to the names it refers to
	differs := map[string]bool{}    // the names whose meaning differs between the two steps
	declared := map[bool][]string{} // the names declared in the files one step builds alone, by the step (first)
	for _, e := range entries {
		file := e.Name()
		if !strings.HasSuffix(file, "_test.go") {
			continue
		}
		first, err := withRace.MatchFile(dir, file)
		if err != nil {
			return nil, err
		}
		second, err := withLong.MatchFile(dir, file)
		if err != nil {
			return nil, err
		}
		if !first && !second {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, file), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		raceName := importName(f)
		record := func(name string, n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && raceName != "" && x.Name == raceName && n.Sel.Name == "Enabled" {
						differs[name] = true
					}
					refers[name] = append(refers[name], n.Sel.Name)
				case *ast.Ident:
					refers[name] = append(refers[name], n.Name)
				}
				return true
			})
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				switch {
				case first && second && isTest(d):
					both = append(both, name)
					record(name, d.Body)
				case first && second:
					record(name, d)
				case second && isTest(d):
					tests = append(tests, name)
				case d.Recv == nil && name == "init":
					for _, assigned := range assignedIn(d.Body) {
						differs[assigned] = true
					}
				default:
					declared[first] = append(declared[first], name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					var names []*ast.Ident
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						names = spec.Names
					case *ast.TypeSpec:
						names = []*ast.Ident{spec.Name}
					}
					for _, n := range names {
						if first && second {
							record(n.Name, spec)
						} else {
							declared[first] = append(declared[first], n.Name)
						}
					}
				}
			}
		}
	}
	// A name the files of both steps refer to, declared in those of one step alone, is declared
	// in those of the other too, once for each step (or the other step's build fails).
	for _, name := range declared[true] {
		if slices.Contains(declared[false], name) {
			differs[name] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for name, refs := range refers {
			if !differs[name] && slices.ContainsFunc(refs, func(r string) bool { return differs[r] }) {
				differs[name], changed = true, true
			}
		}
	}
	for _, name := range both {
		if differs[name] {
			tests = append(tests, name)
		}
	}
	return tests, nil
}

// assignedIn returns the names of the variables that body assigns to, or to an element or a
// field of, outside the functions it declares: an init's changes to the package's variables.
func assignedIn(body *ast.BlockStmt) []string {
	var names []string
	ast.Inspect(body, func(n ast.Node) bool {
		var targets []ast.Expr
		switch n := n.(type) {
		case *ast.FuncLit:
			return false // its own variables, and what it does when called later
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				return true
			}
			targets = n.Lhs
		case *ast.IncDecStmt:
			targets = []ast.Expr{n.X}
		}
		for _, x := range targets {
			if id := root(x); id != nil && id.Name != "_" {
				names = append(names, id.Name)
			}
		}
		return true
	})
	return names
}

// root is the variable that x, an assignment's target, is or is an element or a field of; nil
// for another expression.
func root(x ast.Expr) *ast.Ident {
	switch e := x.(type) {
	case *ast.Ident:
		return e
	case *ast.IndexExpr:
		return root(e.X)
	case *ast.SelectorExpr:
		return root(e.X)
	case *ast.StarExpr:
		return root(e.X)
	case *ast.ParenExpr:
		return root(e.X)
	}
	return nil
}

// isTest says whether fn is a test or a fuzz test, which go test runs.
func isTest(fn *ast.FuncDecl) bool {
	return fn.Recv == nil && (strings.HasPrefix(fn.Name.Name, "Test") || strings.HasPrefix(fn.Name.Name, "Fuzz")) && fn.Name.Name != "TestMain"
}

// importName is the name f gives the race package, or "" where it does not import it.
func importName(f *ast.File) string {
	for _, spec := range f.Imports {
		if path, _ := strconv.Unquote(spec.Path.Value); path == racePath {
			if spec.Name != nil {
				return spec.Name.Name
			}
			return "race"
		}
	}
	return ""
}
