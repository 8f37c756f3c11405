// Command sluice-shape reports the size and complexity of the project's Go
// code and checks it against the allowlist CI holds it to
// (tools/internal/shape/allow.txt).
//
//	sluice-shape                   the counters and any violation (exit 1)
//	sluice-shape -write-allowlist  list today's functions over the limits
//	sluice-shape -over             every function over the limits
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicemq/sluice/tools/internal/shape"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-shape:", err)
		os.Exit(1)
	}
}

func run() error {
	root := flag.String("root", "", "the project's root (default: the folder holding go.work, from the current one up)")
	write := flag.Bool("write-allowlist", false, "rewrite the allowlist with the functions over the limits today")
	over := flag.Bool("over", false, "list every function over the limits")
	flag.Parse()
	if *root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		*root = r
	}
	t, err := shape.Scan(*root)
	if err != nil {
		return err
	}
	list := filepath.Join(*root, shape.AllowlistPath)
	if *write {
		return shape.WriteAllowlist(list, t)
	}
	c := shape.Count(t)
	fmt.Printf("non-test Go files            %d (%d lines), over 400 lines: %d\n", c.Files, c.SourceLines, c.FilesOver400)
	fmt.Printf("functions                    %d, over 60 lines: %d, over 100: %d\n", c.Funcs, c.FuncsOver60, c.FuncsOver100)
	fmt.Printf("complexity                   over 15: %d, over 20: %d, average %.2f\n", c.ComplexityOver15, c.ComplexityOver20, c.AverageComplexity)
	fmt.Printf("7 or more parameters         %d\n", c.Params7)
	fmt.Printf("test lines / source lines    %d / %d = %.2f\n", c.TestLines, c.SourceLines, float64(c.TestLines)/float64(max(c.SourceLines, 1)))
	fmt.Printf("time.Sleep in tests          %d (outside integration/: %d)\n", c.Sleeps, c.UnitSleeps)
	fmt.Printf("functions over the limits    %d (complexity %d, %d lines, %d parameters)\n", c.Allowed, shape.MaxComplexity, shape.MaxLines, shape.MaxParams)
	if *over {
		for _, f := range t.Funcs {
			if f.Over() {
				fmt.Printf("  %s complexity %d, %d lines, %d parameters\n", f.Name, f.Complexity, f.Lines, f.Params)
			}
		}
	}
	allow, err := shape.ReadAllowlist(list)
	if err != nil {
		return err
	}
	if v := shape.Check(t, allow); len(v) > 0 {
		for _, s := range v {
			fmt.Println(s)
		}
		return errors.New("the code passes the limits the allowlist holds it to")
	}
	if v := shape.Layout(t); len(v) > 0 {
		for _, s := range v {
			fmt.Println(s)
		}
		return errors.New("the SDK in libs/ depends on libs/server or libs/dev")
	}
	return nil
}

// findRoot is the nearest folder from the current one up that holds go.work.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work in this folder or above: pass -root")
		}
		dir = parent
	}
}
