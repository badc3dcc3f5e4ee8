// Command norace prints the arguments of make test's step without the race detector: the
// packages, in the order of the patterns it is given, that have a test the race step cannot
// check, and a -run pattern naming those tests. A test qualifies when its file is built with
// the tag long or without the race detector but not with it (//go:build long, !race), or when
// it reads race.Enabled (internal/race), directly or through a function of its package it
// calls: it checks a bound on time, or more steps, only without the detector. Every other test
// ran already under the race step, and runs again only in the gate, go test ./....
//
//	go test -tags long $(go run ./internal/norace ./store/mongo ./...)
package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// racePath is the import path of the package whose Enabled a qualifying test reads.
const racePath = "github.com/postsedge/caddy-posts/internal/race"

func main() {
	listed, err := exec.Command("go", append([]string{"list", "-tags", "long", "-f", "{{.Dir}} {{.ImportPath}}"}, os.Args[1:]...)...).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "norace: go list:", err)
		os.Exit(1)
	}
	var packages, tests []string
	for line := range strings.Lines(string(listed)) {
		dir, path, _ := strings.Cut(strings.TrimSpace(line), " ")
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
// the race detector checks.
func qualifying(dir string) ([]string, error) {
	withRace, withLong := build.Default, build.Default
	withRace.BuildTags, withLong.BuildTags = []string{"race"}, []string{"long"}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var tests []string
	calls := map[string][]string{} // each function's name, to the names its body refers to
	reads := map[string]bool{}     // the functions that read race.Enabled
	var both []string              // the tests of the files built for both steps
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, "_test.go") {
			continue
		}
		second, err := withLong.MatchFile(dir, name)
		if err != nil || !second {
			continue
		}
		first, err := withRace.MatchFile(dir, name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		raceName := importName(f)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			switch {
			case !first && isTest(fn):
				tests = append(tests, name)
			case first && isTest(fn):
				both = append(both, name)
			}
			if !first {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && raceName != "" && x.Name == raceName && n.Sel.Name == "Enabled" {
						reads[name] = true
					}
					calls[name] = append(calls[name], n.Sel.Name)
				case *ast.Ident:
					calls[name] = append(calls[name], n.Name)
				}
				return true
			})
		}
	}
	// A function that calls one that reads race.Enabled reads it too: by name, so a method or a
	// function of either test package (pkg, pkg_test) of that name counts, which can only add.
	for changed := true; changed; {
		changed = false
		for name, refs := range calls {
			if !reads[name] && slices.ContainsFunc(refs, func(r string) bool { return reads[r] }) {
				reads[name], changed = true, true
			}
		}
	}
	for _, name := range both {
		if reads[name] {
			tests = append(tests, name)
		}
	}
	return tests, nil
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
