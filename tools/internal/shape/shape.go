// Package shape measures the size and complexity of the project's Go code,
// so that CI can hold the line: functions over a length, a cyclomatic
// complexity or a parameter count are allowed only as listed (allow.txt),
// and a listed function may shrink but not grow.
//
// Complexity is counted as gocyclo counts it: one for the function, one
// for each if, for, range, case and select case (default excepted), and one
// for each && and ||. A function literal counts toward the function it is
// written in. Length is the lines from the func keyword to the closing
// brace.
package shape

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// AllowlistPath is the allowlist, relative to the project's root.
const AllowlistPath = "tools/internal/shape/allow.txt"

// Limits a function may not pass unless the allowlist names it.
const (
	MaxComplexity = 20
	MaxLines      = 80
	MaxParams     = 6
)

// Func is one function or method of the source.
type Func struct {
	// Name is "path/to/file.go:Func", or ":Type.Method" for a method.
	Name       string
	Complexity int
	Lines      int
	Params     int
}

// Over reports whether the function passes one of the limits.
func (f Func) Over() bool {
	return f.Complexity > MaxComplexity || f.Lines > MaxLines || f.Params > MaxParams
}

// File is one Go source file.
type File struct {
	Path  string
	Lines int
	Test  bool
	// Sleeps counts calls of time.Sleep.
	Sleeps int
	// Imports are the file's import paths.
	Imports []string
}

// Tree is what Scan finds under the project's root.
type Tree struct {
	Funcs []Func // of non-test files
	Files []File
}

// Dirs are the project's Go source folders, relative to its root.
var Dirs = []string{"libs", "services", "tools", "integration"}

// Scan reads every Go file under root's Dirs, generated files excepted.
func Scan(root string) (*Tree, error) {
	t := &Tree{}
	fset := token.NewFileSet()
	for _, d := range Dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata" || e.Name() == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			return t.add(fset, path, filepath.ToSlash(rel))
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(t.Funcs, func(i, j int) bool { return t.Funcs[i].Name < t.Funcs[j].Name })
	return t, nil
}

// add parses one file into the tree.
func (t *Tree) add(fset *token.FileSet, path, rel string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		return fmt.Errorf("shape: %w", err)
	}
	if ast.IsGenerated(f) {
		return nil
	}
	file := File{Path: rel, Lines: fset.Position(f.End()).Line, Test: strings.HasSuffix(rel, "_test.go")}
	for _, im := range f.Imports {
		file.Imports = append(file.Imports, strings.Trim(im.Path.Value, `"`))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if isCall(n, "time", "Sleep") {
			file.Sleeps++
		}
		return true
	})
	t.Files = append(t.Files, file)
	if file.Test {
		return nil
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		t.Funcs = append(t.Funcs, Func{
			Name:       rel + ":" + funcName(fd),
			Complexity: Complexity(fd),
			Lines:      fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1,
			Params:     fd.Type.Params.NumFields(),
		})
	}
	return nil
}

// funcName is a declaration's name, "Type.Method" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// Complexity is the cyclomatic complexity of a function.
func Complexity(fd *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if x.List != nil {
				c++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// isCall reports whether n calls pkg.name.
func isCall(n ast.Node, pkg, name string) bool {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// Allowance is what the allowlist lets one function reach.
type Allowance struct {
	Complexity, Lines, Params int
}

// ReadAllowlist reads an allowlist: a line per function, "name complexity
// lines params"; # starts a comment.
func ReadAllowlist(path string) (map[string]Allowance, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]Allowance{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var name string
		var a Allowance
		if _, err := fmt.Sscanf(line, "%s %d %d %d", &name, &a.Complexity, &a.Lines, &a.Params); err != nil {
			return nil, fmt.Errorf("%s:%d: %q is not \"name complexity lines params\": %v", path, n, line, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", path, n, name)
		}
		out[name] = a
	}
	return out, sc.Err()
}

// WriteAllowlist lists the functions over a limit as they are now.
func WriteAllowlist(path string, t *Tree) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Functions allowed past the limits (complexity %d, %d lines, %d parameters),\n", MaxComplexity, MaxLines, MaxParams)
	b.WriteString("# at most as they were when listed: name complexity lines params.\n")
	b.WriteString("# The list may only shrink: split a function and take its line out.\n")
	for _, f := range t.Funcs {
		if f.Over() {
			fmt.Fprintf(&b, "%s %d %d %d\n", f.Name, f.Complexity, f.Lines, f.Params)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Check compares the tree with the allowlist: a function over a limit that
// is not listed, or grown past its listing, is a violation, and so is a
// listing whose function is gone or back within the limits (the list only
// shrinks).
func Check(t *Tree, allow map[string]Allowance) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range t.Funcs {
		a, listed := allow[f.Name]
		seen[f.Name] = listed
		switch {
		case !f.Over() && listed:
			out = append(out, fmt.Sprintf("%s is within the limits now: take it out of the allowlist", f.Name))
		case !f.Over():
		case !listed:
			out = append(out, fmt.Sprintf("%s: complexity %d, %d lines, %d parameters: over the limits (%d, %d, %d); split it", f.Name,
				f.Complexity, f.Lines, f.Params, MaxComplexity, MaxLines, MaxParams))
		case f.Complexity > max(a.Complexity, MaxComplexity) || f.Lines > max(a.Lines, MaxLines) || f.Params > max(a.Params, MaxParams):
			out = append(out, fmt.Sprintf("%s grew to complexity %d, %d lines, %d parameters (allowed %d, %d, %d); split it", f.Name,
				f.Complexity, f.Lines, f.Params, a.Complexity, a.Lines, a.Params))
		}
	}
	for name := range allow {
		if _, ok := seen[name]; !ok {
			out = append(out, fmt.Sprintf("%s is listed but no longer exists: take it out of the allowlist", name))
		}
	}
	sort.Strings(out)
	return out
}

// The rooms of libs/: the SDK a user imports (the client and everything
// its API names: records, the partitioner, the services' wire contracts
// and clients) at the top, what only the services use under libs/server,
// the development harness under libs/dev.
const (
	ServerLibs = "libs/server/"
	DevLibs    = "libs/dev/"
	module     = "github.com/sluicemq/sluice/"
)

// Layout checks the rooms of libs/: no non-test file of the SDK imports a
// package of libs/server or libs/dev, so what a user imports stands alone.
func Layout(t *Tree) []string {
	var out []string
	for _, f := range t.Files {
		if f.Test || !strings.HasPrefix(f.Path, "libs/") || strings.HasPrefix(f.Path, ServerLibs) || strings.HasPrefix(f.Path, DevLibs) {
			continue
		}
		for _, im := range f.Imports {
			if p := strings.TrimPrefix(im, module); p != im && (strings.HasPrefix(p, ServerLibs) || strings.HasPrefix(p, DevLibs)) {
				out = append(out, fmt.Sprintf("%s imports %s: the SDK may not depend on what only the services (libs/server) or the harness (libs/dev) use", f.Path, im))
			}
		}
	}
	return out
}

// Counters are the figures the project's shape is reported by.
type Counters struct {
	Files, FilesOver400                        int
	Funcs, FuncsOver60, FuncsOver100           int
	ComplexityOver15, ComplexityOver20         int
	AverageComplexity                          float64
	Params7                                    int
	SourceLines, TestLines, Sleeps, UnitSleeps int
	Allowed                                    int
}

// Count sums the tree's counters: files and functions of non-test code,
// test lines against source lines, sleeps in tests (all, and outside
// integration/).
func Count(t *Tree) Counters {
	var c Counters
	for _, f := range t.Files {
		if f.Test {
			c.TestLines += f.Lines
			c.Sleeps += f.Sleeps
			if !strings.HasPrefix(f.Path, "integration/") {
				c.UnitSleeps += f.Sleeps
			}
			continue
		}
		c.Files++
		c.SourceLines += f.Lines
		if f.Lines > 400 {
			c.FilesOver400++
		}
	}
	total := 0
	for _, f := range t.Funcs {
		c.Funcs++
		total += f.Complexity
		if f.Lines > 60 {
			c.FuncsOver60++
		}
		if f.Lines > 100 {
			c.FuncsOver100++
		}
		if f.Complexity > 15 {
			c.ComplexityOver15++
		}
		if f.Complexity > 20 {
			c.ComplexityOver20++
		}
		if f.Params >= 7 {
			c.Params7++
		}
		if f.Over() {
			c.Allowed++
		}
	}
	if c.Funcs > 0 {
		c.AverageComplexity = float64(total) / float64(c.Funcs)
	}
	return c
}
