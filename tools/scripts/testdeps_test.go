// Package scripts tests the shell scripts the Makefile and CI run.
package scripts

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeBin writes executable shell scripts named after the keys into a new
// directory and returns it.
func fakeBin(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pathWithout returns a directory holding links to every command of the
// current PATH but the named ones (the first of each name, as PATH finds it).
func pathWithout(t *testing.T, drop ...string) string {
	t.Helper()
	dir := t.TempDir()
	seen := map[string]bool{}
	for _, name := range drop {
		seen[name] = true
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			if err := os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// driven are the commands test-deps.sh looks for in PATH.
var driven = []string{"kcat", "chromium", "strace", "ip", "curl"}

// tools returns the PATH of a machine that has every command the script
// looks for but missing, and whose Python clients are installed (a fake
// interpreter, SLUICE_PYTHON, that imports anything): the tests do not
// depend on what this machine has installed.
func tools(t *testing.T, missing ...string) []string {
	t.Helper()
	fakes := map[string]string{}
	for _, name := range driven {
		if !slices.Contains(missing, name) {
			fakes[name] = "exit 0"
		}
	}
	dir := fakeBin(t, fakes)
	t.Setenv("SLUICE_PYTHON", filepath.Join(fakeBin(t, map[string]string{"python3": "exit 0"}), "python3"))
	return []string{dir, pathWithout(t, driven...)}
}

// runDeps runs test-deps.sh with PATH set to the given directories and
// returns its exit status, standard output and standard error.
func runDeps(t *testing.T, path []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"test-deps.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+strings.Join(path, string(filepath.ListSeparator)))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("test-deps.sh: %v", err)
	return 0, "", ""
}

// recorder fakes apt-get and sudo: each call appends its arguments to a
// log file, which the test reads back.
func recorder(t *testing.T, uid string) (dir, log string) {
	log = filepath.Join(t.TempDir(), "calls")
	rec := `echo "$(basename "$0") $*" >>` + log
	return fakeBin(t, map[string]string{"apt-get": rec, "sudo": rec, "id": "echo " + uid}), log
}

func calls(t *testing.T, log string) string {
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestTestDepsDoesNothingWhenAllIsThere: with every program present (make
// test runs the script first, so it is) the script prints nothing, calls no
// apt-get and succeeds, whoever runs it.
func TestTestDepsDoesNothingWhenAllIsThere(t *testing.T) {
	for _, uid := range []string{"0", "1000"} {
		fake, log := recorder(t, uid)
		code, out, errOut := runDeps(t, append([]string{fake}, tools(t)...))
		if code != 0 || out != "" || errOut != "" {
			t.Fatalf("uid %s: exit %d, stdout %q, stderr %q; want a silent success (run make test-deps to install what is missing)", uid, code, out, errOut)
		}
		if c := calls(t, log); c != "" {
			t.Fatalf("uid %s: called %q with everything installed", uid, c)
		}
	}
}

// TestTestDepsFailsFastWithTheInstallLine: without kcat, a user who is not
// root is stopped at once with the one command that installs it, and
// nothing is installed.
func TestTestDepsFailsFastWithTheInstallLine(t *testing.T) {
	fake, log := recorder(t, "1000")
	code, out, errOut := runDeps(t, append([]string{fake}, tools(t, "kcat")...))
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing on stdout (stderr %q)", code, out, errOut)
	}
	for _, want := range []string{"not installed: kcat\n", "sudo sh -c 'apt-get update && apt-get install -y kcat'"} {
		if !strings.Contains(errOut, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if c := calls(t, log); c != "" {
		t.Fatalf("called %q as a user who is not root", c)
	}
	// --check does the same for root.
	fake, log = recorder(t, "0")
	if code, _, errOut := runDeps(t, append([]string{fake}, tools(t, "kcat")...), "--check"); code != 1 || !strings.Contains(errOut, "apt-get install -y kcat'") {
		t.Fatalf("--check as root: exit %d, stderr %q", code, errOut)
	}
	if c := calls(t, log); c != "" {
		t.Fatalf("--check called %q", c)
	}
}

// TestTestDepsInstallsAsRoot: as root the script installs exactly what is
// missing with apt-get, and fails naming what is still missing when the
// install did not bring it (this fake apt-get installs nothing).
func TestTestDepsInstallsAsRoot(t *testing.T) {
	fake, log := recorder(t, "0")
	code, _, errOut := runDeps(t, append([]string{fake}, tools(t, "kcat", "strace")...))
	if want := "apt-get update -qq\napt-get install -y -qq kcat strace\n"; calls(t, log) != want {
		t.Fatalf("apt-get calls %q, want %q", calls(t, log), want)
	}
	if code != 1 || !strings.Contains(errOut, "still missing after apt-get install: kcat strace") {
		t.Fatalf("exit %d, stderr %q; want 1 naming what is still missing", code, errOut)
	}
}

// TestTestDepsRefusesUnknownArguments: a typo is a usage error, not a run.
func TestTestDepsRefusesUnknownArguments(t *testing.T) {
	if code, _, errOut := runDeps(t, filepath.SplitList(os.Getenv("PATH")), "--chek"); code != 2 || !strings.Contains(errOut, "usage:") {
		t.Fatalf("exit %d, stderr %q; want 2 with the usage", code, errOut)
	}
}
