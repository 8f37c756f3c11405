package shape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestComplexity counts as gocyclo does: the function, each branch and
// loop, each case but default, each && and ||; a literal counts toward its
// function.
func TestComplexity(t *testing.T) {
	src := `package p
func f(a, b int, c string) int {
	if a > 0 && b > 0 || c == "" {
		return 1
	}
	for i := range a {
		switch i {
		case 1, 2:
		case 3:
		default:
		}
	}
	g := func() {
		select {
		case <-make(chan int):
		default:
		}
	}
	g()
	return 0
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.Decls[0].(*ast.FuncDecl)
	// 1 + if + && + || + range + 2 cases + 1 comm case
	if got := Complexity(fd); got != 8 {
		t.Fatalf("complexity %d, want 8", got)
	}
}

// TestCheck: a function over the limits must be listed and may not grow;
// a listing of a function gone or back within the limits must go.
func TestCheck(t *testing.T) {
	tree := &Tree{Funcs: []Func{
		{Name: "a.go:Listed", Complexity: 25, Lines: 90, Params: 2},
		{Name: "a.go:Shrunk", Complexity: 22, Lines: 10, Params: 2},
		{Name: "a.go:Grown", Complexity: 31, Lines: 10, Params: 2},
		{Name: "a.go:New", Complexity: 3, Lines: 10, Params: 9},
		{Name: "a.go:Fixed", Complexity: 5, Lines: 10, Params: 2},
		{Name: "a.go:Fine", Complexity: 5, Lines: 10, Params: 2},
	}}
	allow := map[string]Allowance{
		"a.go:Listed": {25, 90, 2},
		"a.go:Shrunk": {30, 10, 2},
		"a.go:Grown":  {30, 10, 2},
		"a.go:Fixed":  {30, 10, 2},
		"a.go:Gone":   {30, 10, 2},
	}
	got := strings.Join(Check(tree, allow), "\n")
	for _, want := range []string{"a.go:Grown grew", "a.go:New: complexity 3, 10 lines, 9 parameters", "a.go:Fixed is within the limits",
		"a.go:Gone is listed but no longer exists"} {
		if !strings.Contains(got, want) {
			t.Errorf("no violation %q in\n%s", want, got)
		}
	}
	for _, ok := range []string{"a.go:Listed", "a.go:Shrunk", "a.go:Fine"} {
		if strings.Contains(got, ok+" ") || strings.Contains(got, ok+":") {
			t.Errorf("%s reported:\n%s", ok, got)
		}
	}
}

// TestLayout: a file of the SDK (libs/, outside libs/server and libs/dev)
// importing a package of libs/server or libs/dev is a violation; tests,
// and the services' own rooms, may import them.
func TestLayout(t *testing.T) {
	tree := &Tree{Files: []File{
		{Path: "libs/client/a.go", Imports: []string{"context", module + "libs/record", module + "libs/server/kafka"}},
		{Path: "libs/groups/b.go", Imports: []string{module + "libs/dev/testkit"}},
		{Path: "libs/groups/b_test.go", Test: true, Imports: []string{module + "libs/dev/testkit"}},
		{Path: "libs/server/kafka/c.go", Imports: []string{module + "libs/server/service"}},
		{Path: "services/frontend/d.go", Imports: []string{module + "libs/server/kafka"}},
	}}
	got := Layout(tree)
	if len(got) != 2 || !strings.HasPrefix(got[0], "libs/client/a.go imports "+module+"libs/server/kafka") ||
		!strings.HasPrefix(got[1], "libs/groups/b.go imports "+module+"libs/dev/testkit") {
		t.Fatalf("violations:\n%s", strings.Join(got, "\n"))
	}
}

// TestAllowlistRefusesBadLines: a line that is not "name complexity lines
// params", or a name listed twice, is an error naming the line.
func TestAllowlistRefusesBadLines(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"a.go:F 1 2\n", "a.go:F x 2 3\n", "a.go:F 1 2 3\na.go:F 1 2 3\n"} {
		p := filepath.Join(dir, "allow.txt")
		if err := os.WriteFile(p, []byte("# comment\n"+bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadAllowlist(p); err == nil || !strings.Contains(err.Error(), "allow.txt:") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestProjectHoldsTheLine is the gate: no function of the project's
// non-test code passes the limits unless the allowlist lets it, as it was
// when listed. `go run ./tools/cmd/sluice-shape -over` lists them.
func TestProjectHoldsTheLine(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	tree, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Funcs) < 1000 {
		t.Fatalf("found %d functions under %s: not the project's root", len(tree.Funcs), root)
	}
	allow, err := ReadAllowlist(filepath.Join(root, AllowlistPath))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Check(tree, allow) {
		t.Error(v)
	}
	for _, v := range Layout(tree) {
		t.Error(v)
	}
	// Unit tests wait for what they need (testkit.WaitFor, Eventually, a
	// signal of the code or its fake), not for time to pass: none calls
	// time.Sleep. Under synctest, let the bubble's clock move by blocking
	// on a timer (<-time.After) after synctest.Wait.
	const unitSleeps = 0
	if c := Count(tree); c.UnitSleeps > unitSleeps {
		t.Errorf("%d time.Sleep calls in unit tests (outside integration/), more than %d: wait with the test kit instead", c.UnitSleeps, unitSleeps)
	}
}
