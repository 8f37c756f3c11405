package ops

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// configDoc is the configuration reference checked against the binaries.
const configDoc = "docs/configuration.md"

// docBinary is a binary whose flags configDoc lists. Its flags come from its
// -h output (Go's flag usage) when help is set, otherwise from the flag
// definitions in the source directories src: sluicectl and sluice-bench
// print a summary of their own for -h, and sluicectl's commands have flag
// sets of their own. sections are the `## ` headings under which its rows
// may be, its own first (a row there wins over a shared one).
type docBinary struct {
	name     string
	pkg      string
	help     bool
	commands []string // subcommands whose flags `name command -h` lists
	src      []string
	sections []string
}

// serviceCommands are the subcommands every service answers (service.Main).
var serviceCommands = []string{"healthcheck"}

var docBinaries = []docBinary{
	{name: "sluice-metadata", pkg: "github.com/sluicemq/sluice/services/metadata/cmd/sluice-metadata", help: true, commands: serviceCommands,
		sections: []string{"sluice-metadata", "Every service"}},
	{name: "sluice-storage", pkg: "github.com/sluicemq/sluice/services/storage/cmd/sluice-storage", help: true, commands: serviceCommands,
		sections: []string{"sluice-storage", "Every service", "Kafka listeners"}},
	{name: "sluice-frontend", pkg: "github.com/sluicemq/sluice/services/frontend/cmd/sluice-frontend", help: true, commands: serviceCommands,
		sections: []string{"sluice-frontend", "Every service", "Kafka listeners"}},
	{name: "sluice-offsets", pkg: "github.com/sluicemq/sluice/services/offsets/cmd/sluice-offsets", help: true, commands: append(serviceCommands, "check-state"),
		sections: []string{"sluice-offsets", "Every service"}},
	{name: "sluice-dev", pkg: "github.com/sluicemq/sluice/tools/cmd/sluice-dev", help: true,
		sections: []string{"sluice-dev"}},
	{name: "sluice-certs", pkg: "github.com/sluicemq/sluice/tools/cmd/sluice-certs", help: true,
		sections: []string{"sluice-certs"}},
	{name: "sluicectl", src: []string{"tools/cmd/sluicectl", "tools/internal/ctl"},
		sections: []string{"sluicectl"}},
	{name: "sluice-bench", src: []string{"tools/cmd/sluice-bench", "tools/internal/bench"},
		sections: []string{"sluice-bench"}},
}

// flagDef is one flag as a binary defines it. command is the flag set's
// name: the binary's own for its global flags, "topic create" and so on
// for sluicectl's commands. def is the default as Go's flag usage prints
// it ("" for a zero value); known is false when the source gives it as an
// expression the test does not evaluate.
type flagDef struct {
	command, name, def string
	known              bool
}

// TestConfigurationReferenceListsEveryFlag checks docs/configuration.md
// against the binaries: every flag of every binary (and of each sluicectl
// command) has a row in the binary's tables, the row's default is the one
// the binary has, and every row names a flag that exists.
func TestConfigurationReferenceListsEveryFlag(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, configDoc))
	if err != nil {
		t.Fatal(err)
	}
	doc := parseConfigDoc(string(text))

	var helpPkgs []string
	for _, b := range docBinaries {
		if b.help {
			helpPkgs = append(helpPkgs, b.pkg)
		}
	}
	bin := t.TempDir()
	build := exec.Command("go", append([]string{"build", "-o", bin + "/"}, helpPkgs...)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	defined := map[string][]flagDef{}
	for _, b := range docBinaries {
		var flags []flagDef
		if b.help {
			flags = helpFlags(t, filepath.Join(bin, b.name), b.name)
			for _, c := range b.commands {
				flags = append(flags, helpFlags(t, filepath.Join(bin, b.name), c, c)...)
			}
		} else {
			flags = sourceFlags(t, root, b)
		}
		defined[b.name] = flags
		for _, f := range flags {
			row, ok := doc.find(b, f.command)(f.name)
			what := b.name + " -" + f.name
			if f.command != b.name {
				what = b.name + " " + f.command + " -" + f.name
			}
			if !ok {
				where := "a table with no command column"
				if f.command != b.name {
					where = fmt.Sprintf("a table whose command cell names `%s`", f.command)
				}
				t.Errorf("%s: %s has no row in %s under ## %s", configDoc, what, where, strings.Join(b.sections, " or ## "))
				continue
			}
			if f.known && !defaultMatches(f.def, row.def) {
				t.Errorf("%s:%d: %s: the default column says %q; the binary's default is %q", configDoc, row.line, what, row.def, f.def)
			}
		}
	}

	// Every row names a flag some binary documented in its section has.
	for _, sec := range doc.sections {
		for _, row := range sec.rows {
			for _, name := range row.flags {
				if !rowDefined(sec.title, row, name, defined) {
					t.Errorf("%s:%d: ## %s lists -%s, which no binary documented there takes%s", configDoc, row.line, sec.title, name, commandNote(row))
				}
			}
		}
	}
}

func commandNote(row docRow) string {
	if row.commands == nil {
		return ""
	}
	return " (commands " + strings.Join(row.commands, ", ") + ")"
}

// rowDefined reports whether a binary whose sections include title defines
// the flag name: as a global flag for a row without commands, for one of
// the row's commands otherwise.
func rowDefined(title string, row docRow, name string, defined map[string][]flagDef) bool {
	for _, b := range docBinaries {
		if !slices.Contains(b.sections, title) {
			continue
		}
		for _, f := range defined[b.name] {
			if f.name != name {
				continue
			}
			if row.commands == nil && f.command == b.name || row.commands != nil && commandMatches(row.commands, f.command) {
				return true
			}
		}
	}
	return false
}

// helpFlags runs `path args... -h` (without SLUICE_* variables, which some
// defaults come from) and reads Go's flag usage from its output, the flags
// of command.
func helpFlags(t *testing.T, path, command string, args ...string) []flagDef {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append(args, "-h")...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, _ := cmd.CombinedOutput() // sluice-dev and healthcheck exit 2 after their usage
	flags := parseFlagUsage(string(out), command)
	if len(flags) == 0 {
		t.Fatalf("%s -h listed no flags:\n%s", strings.Join(append([]string{filepath.Base(path)}, args...), " "), out)
	}
	return flags
}

// parseFlagUsage reads flag.PrintDefaults' format: "  -name type" (or
// "  -x\tusage" for a one-letter flag without a type), then usage lines
// indented with "    \t", the last ending in " (default X)" when the
// default is not the zero value (strings quoted).
func parseFlagUsage(out, command string) []flagDef {
	var flags []flagDef
	var usage []string
	flush := func() {
		if len(flags) == 0 {
			return
		}
		flags[len(flags)-1].def = usageDefault(strings.Join(usage, " "))
		usage = nil
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			flush()
			head, rest, _ := strings.Cut(line[3:], "\t")
			name, _, _ := strings.Cut(head, " ")
			flags = append(flags, flagDef{command: command, name: name, known: true})
			if rest != "" {
				usage = append(usage, rest)
			}
		case strings.HasPrefix(line, "    \t") && len(flags) > 0:
			usage = append(usage, line[5:])
		}
	}
	flush()
	return flags
}

// usageDefault returns the default at the end of a flag's usage text, ""
// when there is none.
func usageDefault(usage string) string {
	if !strings.HasSuffix(usage, ")") {
		return ""
	}
	i := strings.LastIndex(usage, " (default ")
	if i < 0 {
		return ""
	}
	v := usage[i+len(" (default ") : len(usage)-1]
	if s, err := strconv.Unquote(v); err == nil {
		return s
	}
	return v
}

// flagMethods are the flag.FlagSet methods that define a flag, with the
// index of the name argument (the default follows it, but for Var, Func
// and BoolFunc, which have none).
var flagMethods = map[string]int{
	"String": 0, "Bool": 0, "Int": 0, "Int64": 0, "Uint": 0, "Uint64": 0, "Float64": 0, "Duration": 0,
	"StringVar": 1, "BoolVar": 1, "IntVar": 1, "Int64Var": 1, "UintVar": 1, "Uint64Var": 1, "Float64Var": 1, "DurationVar": 1,
	"Var": 1, "TextVar": 1, "Func": 0, "BoolFunc": 0,
}

// sourceFlags reads the flags a binary defines from its source: in each
// function, the flag sets made by flag.NewFlagSet("command", ...) and the
// flags defined on them, and -version where version.Asked looks for it. A
// function that defines flags on a flag set it was given (addWaitFlags) or
// made under a name it was given (parseOutputCommand) is a helper: its
// flags count for the functions that call it, under the names those give
// it.
func sourceFlags(t *testing.T, root string, b docBinary) []flagDef {
	t.Helper()
	src := parseSource(t, root, b.src)
	info := map[string]*funcFlags{}
	key := func(fd *ast.FuncDecl) string {
		if fd.Recv != nil {
			return "." + fd.Name.Name // a method: never called as a helper
		}
		return fd.Name.Name
	}
	for _, fd := range src.funcs {
		info[key(fd)] = src.funcFlags(t, fd)
	}
	var out []flagDef
	for _, fd := range src.funcs {
		ff := info[key(fd)]
		names := slices.Clone(ff.names)
		flags := slices.Clone(ff.flags)
		for _, call := range ff.calls {
			id, ok := call.Fun.(*ast.Ident)
			if !ok || info[id.Name] == nil || !info[id.Name].helper() {
				continue
			}
			h := info[id.Name]
			flags = append(flags, h.flags...)
			if h.namesBy >= 0 && h.namesBy < len(call.Args) {
				if s, ok := stringLit(call.Args[h.namesBy]); ok {
					names = append(names, s)
				}
			}
		}
		for _, cmd := range names {
			for _, f := range flags {
				f.command = cmd
				out = append(out, f)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no flag definitions found in %v; has its flag code moved?", b.name, b.src)
	}
	if src.asksVersion && !slices.ContainsFunc(out, func(f flagDef) bool { return f.command == b.name && f.name == "version" }) {
		out = append(out, flagDef{command: b.name, name: "version", known: true})
	}
	return out
}

// goSource is the non-test Go code of some directories.
type goSource struct {
	fset        *token.FileSet
	funcs       []*ast.FuncDecl
	consts      map[string]ast.Expr // package-level constants with one value each
	asksVersion bool                // version.Asked(args): -version or --version anywhere
}

func parseSource(t *testing.T, root string, dirs []string) goSource {
	t.Helper()
	src := goSource{fset: token.NewFileSet(), consts: map[string]ast.Expr{}}
	for _, dir := range dirs {
		names, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(src.fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					sel, ok := call.Fun.(*ast.SelectorExpr)
					src.asksVersion = src.asksVersion || ok && sel.Sel.Name == "Asked" && isIdent(sel.X, "version")
				}
				return true
			})
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					src.funcs = append(src.funcs, d)
				case *ast.GenDecl:
					if d.Tok != token.CONST {
						continue
					}
					for _, s := range d.Specs {
						vs := s.(*ast.ValueSpec)
						for i, n := range vs.Names {
							if i < len(vs.Values) {
								src.consts[n.Name] = vs.Values[i]
							}
						}
					}
				}
			}
		}
	}
	return src
}

// funcFlags is what one function does with flags.
type funcFlags struct {
	names   []string  // flag sets named here with a literal
	flags   []flagDef // defined here, closures included (no command yet)
	calls   []*ast.CallExpr
	namesBy int // -1, or the parameter naming the flag set made here
}

// helper reports whether the function defines flags on a flag set it did
// not name.
func (ff *funcFlags) helper() bool { return len(ff.names) == 0 && len(ff.flags) > 0 }

func (src goSource) funcFlags(t *testing.T, fd *ast.FuncDecl) *funcFlags {
	ff := &funcFlags{namesBy: -1}
	params := paramNames(fd.Type)
	sets := map[string]bool{} // identifiers holding a *flag.FlagSet
	ast.Inspect(fd, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncType:
			for _, f := range n.Params.List {
				if isFlagSetType(f.Type) {
					for _, id := range f.Names {
						sets[id.Name] = true
					}
				}
			}
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if id, ok := n.Lhs[min(i, len(n.Lhs)-1)].(*ast.Ident); ok && isNewFlagSet(rhs) {
					sets[id.Name] = true
				}
			}
		case *ast.CallExpr:
			ff.calls = append(ff.calls, n)
			if isNewFlagSet(n) && len(n.Args) > 0 {
				if s, ok := stringLit(n.Args[0]); ok {
					ff.names = append(ff.names, s)
				} else if id, ok := n.Args[0].(*ast.Ident); ok {
					ff.namesBy = slices.Index(params, id.Name)
				}
			}
		}
		return true
	})
	// Flags are defined in a second pass: a flag set may be declared after
	// the closure that uses it appears in the source.
	ast.Inspect(fd, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		recv, ok := sel.X.(*ast.Ident)
		idx, isFlag := flagMethods[sel.Sel.Name]
		if !ok || !isFlag || !sets[recv.Name] || len(call.Args) <= idx {
			return true
		}
		name, ok := stringLit(call.Args[idx])
		if !ok {
			t.Errorf("%s: a flag whose name is not a string literal", src.fset.Position(call.Pos()))
			return true
		}
		f := flagDef{name: name}
		if m := sel.Sel.Name; m != "Var" && m != "TextVar" && m != "Func" && m != "BoolFunc" {
			f.def, f.known = evalDefault(call.Args[idx+1], src.consts)
		}
		ff.flags = append(ff.flags, f)
		return true
	})
	return ff
}

func paramNames(ft *ast.FuncType) []string {
	var names []string
	for _, f := range ft.Params.List {
		for _, id := range f.Names {
			names = append(names, id.Name)
		}
	}
	return names
}

func isFlagSetType(e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "FlagSet" && isIdent(sel.X, "flag")
}

func isNewFlagSet(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "NewFlagSet" && isIdent(sel.X, "flag")
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// evalDefault renders a default given in the source as Go's flag usage
// prints it: literals, package constants, true and false, and integer or
// time.Duration arithmetic (30*time.Minute, 128<<20). known is false for
// anything else (a variable, a function's result).
func evalDefault(e ast.Expr, consts map[string]ast.Expr) (def string, known bool) {
	v, ok := evalConst(e, consts, 0)
	if !ok {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		if !v {
			return "", true
		}
		return "true", true
	case time.Duration:
		if v == 0 {
			return "", true
		}
		return v.String(), true
	case int64:
		if v == 0 {
			return "", true
		}
		return strconv.FormatInt(v, 10), true
	case float64:
		if v == 0 {
			return "", true
		}
		return strconv.FormatFloat(v, 'g', -1, 64), true
	}
	return "", false
}

var durationUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

func evalConst(e ast.Expr, consts map[string]ast.Expr, depth int) (any, bool) {
	if depth > 8 {
		return nil, false
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return evalConst(e.X, consts, depth+1)
	case *ast.BasicLit:
		switch e.Kind {
		case token.STRING:
			return stringLit(e)
		case token.INT:
			n, err := strconv.ParseInt(e.Value, 0, 64)
			return n, err == nil
		case token.FLOAT:
			f, err := strconv.ParseFloat(strings.ReplaceAll(e.Value, "_", ""), 64)
			return f, err == nil
		}
	case *ast.Ident:
		switch e.Name {
		case "true":
			return true, true
		case "false":
			return false, true
		}
		if c, ok := consts[e.Name]; ok {
			return evalConst(c, consts, depth+1)
		}
	case *ast.SelectorExpr:
		if isIdent(e.X, "time") {
			d, ok := durationUnits[e.Sel.Name]
			return d, ok
		}
	case *ast.UnaryExpr:
		if e.Op == token.SUB {
			switch v, _ := evalConst(e.X, consts, depth+1); v := v.(type) {
			case int64:
				return -v, true
			case float64:
				return -v, true
			case time.Duration:
				return -v, true
			}
		}
	case *ast.BinaryExpr:
		x, okx := evalConst(e.X, consts, depth+1)
		y, oky := evalConst(e.Y, consts, depth+1)
		if !okx || !oky {
			return nil, false
		}
		xd, xIsD := x.(time.Duration)
		yd, yIsD := y.(time.Duration)
		xi, xIsI := x.(int64)
		yi, yIsI := y.(int64)
		switch {
		case e.Op == token.MUL && xIsI && yIsD:
			return time.Duration(xi) * yd, true
		case e.Op == token.MUL && xIsD && yIsI:
			return xd * time.Duration(yi), true
		case e.Op == token.MUL && xIsI && yIsI:
			return xi * yi, true
		case e.Op == token.SHL && xIsI && yIsI:
			return xi << yi, true
		case e.Op == token.ADD && xIsI && yIsI:
			return xi + yi, true
		}
	}
	return nil, false
}

// configDocument is configDoc's flag tables, by `## ` section.
type configDocument struct{ sections []docSection }

type docSection struct {
	title string
	rows  []docRow
}

// docRow is one row of a table with a "flag" column: the flags it names
// (code spans, without their dashes), the commands of its "command"
// column (nil for a table without one), its "default" cell, and its line.
type docRow struct {
	flags    []string
	commands []string
	def      string
	line     int
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// splitCells splits a table line into its trimmed cells; `\|` is a pipe
// inside a cell.
func splitCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	parts := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(strings.ReplaceAll(p, "\x00", "|"))
	}
	return parts
}

func parseConfigDoc(text string) configDocument {
	var doc configDocument
	var cur *docSection
	flagCol, defCol, cmdCol := -1, -1, -1
	inTable, separator := false, false
	for i, line := range strings.Split(text, "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			doc.sections = append(doc.sections, docSection{title: strings.TrimSpace(title)})
			cur = &doc.sections[len(doc.sections)-1]
			inTable = false
			continue
		}
		if !strings.HasPrefix(strings.TrimSpace(line), "|") {
			inTable = false
			continue
		}
		cells := splitCells(line)
		if separator { // the |---|---| line under the header
			separator = false
			continue
		}
		if !inTable { // the header
			inTable, separator = true, true
			flagCol, defCol, cmdCol = -1, -1, -1
			for j, c := range cells {
				switch strings.ToLower(c) {
				case "flag":
					flagCol = j
				case "default":
					defCol = j
				case "command":
					cmdCol = j
				}
			}
			continue
		}
		if cur == nil || flagCol < 0 || flagCol >= len(cells) {
			continue // not a flag table
		}
		row := docRow{line: i + 1}
		for _, s := range codeSpans(cells[flagCol]) {
			if name := strings.TrimLeft(strings.TrimSpace(s), "-"); name != "" {
				row.flags = append(row.flags, name)
			}
		}
		if defCol >= 0 && defCol < len(cells) {
			row.def = cells[defCol]
		}
		if cmdCol >= 0 {
			row.commands = []string{}
			if cmdCol < len(cells) {
				row.commands = append(row.commands, codeSpans(cells[cmdCol])...)
			}
		}
		cur.rows = append(cur.rows, row)
	}
	return doc
}

// find returns a lookup of the row documenting a flag of b's command:
// among tables without a command column for the binary's own flags, among
// rows naming the command otherwise; in b's sections in order.
func (d configDocument) find(b docBinary, command string) func(string) (docRow, bool) {
	return func(name string) (docRow, bool) {
		for _, title := range b.sections {
			for _, sec := range d.sections {
				if sec.title != title {
					continue
				}
				for _, row := range sec.rows {
					if !slices.Contains(row.flags, name) {
						continue
					}
					if command == b.name && row.commands == nil || command != b.name && commandMatches(row.commands, command) {
						return row, true
					}
				}
			}
		}
		return docRow{}, false
	}
}

// commandMatches reports whether a command cell's spans name a flag set's
// command: exactly, or as its subcommand ("acl add" for the flag set
// "acl").
func commandMatches(spans []string, command string) bool {
	for _, s := range spans {
		if s == command || strings.HasPrefix(s, command+" ") {
			return true
		}
	}
	return false
}

// defaultMatches compares a binary's default with a default cell, whose
// first code span holds the value. A zero default ("") matches a cell
// without a code span ("none", "the host name"), a zero value, or a flag
// or environment variable named as the fallback (`-addr`,
// `$SLUICE_TOKEN`). Durations compare as durations (`168h`
// is 168h0m0s).
func defaultMatches(want, cell string) bool {
	spans := codeSpans(cell)
	if want == "" {
		if len(spans) == 0 {
			return true
		}
		s := spans[0]
		return s == "" || s == `""` || s == "0" || s == "false" || s == "0s" || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "$")
	}
	if len(spans) == 0 {
		return false
	}
	got := spans[0]
	if got == want {
		return true
	}
	gd, err1 := time.ParseDuration(got)
	wd, err2 := time.ParseDuration(want)
	return err1 == nil && err2 == nil && gd == wd
}
