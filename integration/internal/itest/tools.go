package itest

import (
	"os/exec"
	"testing"
)

// NeedTool returns the path of a program the tests drive that no one here
// wrote (kcat, chromium) or trace with (strace, curl). A missing one fails
// the test, never skips it, naming the package: `make test` installs every
// one first (tools/scripts/test-deps.sh), so a missing one means the tests
// were started some other way.
func NeedTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make test-deps` (as root), or `sudo apt-get install -y %s`", name, pkg)
	}
	return path
}

// debianPython is the interpreter that sees Debian's python3-* packages
// (a python3 earlier in PATH, from pyenv or a virtualenv, does not).
const debianPython = "/usr/bin/python3"

// NeedPython returns Debian's python3 once it can import module (from
// Debian's package pkg); otherwise it fails the test as NeedTool does.
func NeedPython(t *testing.T, module, pkg string) string {
	t.Helper()
	if err := exec.Command(debianPython, "-c", "import "+module).Run(); err != nil {
		t.Fatalf("%s cannot import %s: run `make test-deps` (as root), or `sudo apt-get install -y %s`", debianPython, module, pkg)
	}
	return debianPython
}
