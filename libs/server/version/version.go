// Package version names the build a binary came from: the release, the
// commit and the Go version. Every Sluice binary prints them with -version
// (sluicectl also with `sluicectl version`).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
)

// Version is the release, set when building with
// -ldflags "-X github.com/sluicemq/sluice/libs/server/version.Version=v1.2.3"
// (the Makefile sets it from `git describe`); "dev" otherwise.
var Version = "dev"

// Commit is the commit the binary was built from, as the Go toolchain
// recorded it ("-dirty" when the work tree had changes), or "unknown" when
// it was built outside a git checkout.
func Commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// String is the line -version prints for the named binary.
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, %s %s/%s)", binary, Version, Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Asked reports whether a command line asks for the version: -version or
// --version among its arguments.
func Asked(args []string) bool {
	return slices.Contains(args, "-version") || slices.Contains(args, "--version")
}
