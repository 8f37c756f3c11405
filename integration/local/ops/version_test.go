package ops

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/sluicemq/sluice/integration/internal/itest"
)

// TestEveryBinaryPrintsItsVersion: each binary answers -version (sluicectl
// also `version`) with its name, the release, the commit and the Go
// version, and exits 0 without starting anything.
func TestEveryBinaryPrintsItsVersion(t *testing.T) {
	t.Parallel()
	bin := itest.BuildBinaries(t)
	for _, args := range [][]string{
		{"sluice-metadata", "-version"}, {"sluice-storage", "-version"}, {"sluice-frontend", "-version"},
		{"sluice-offsets", "-version"}, {"sluice-dev", "-version"}, {"sluice-bench", "--version"},
		{"sluicectl", "--version"}, {"sluicectl", "version"},
	} {
		out, err := exec.Command(filepath.Join(bin, args[0]), args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", args, err, out)
		}
		want := regexp.MustCompile(`^` + args[0] + ` \S+ \(commit \S+, go1\.\d+\S* \w+/\w+\)\n$`)
		if !want.Match(out) {
			t.Fatalf("%s printed %q", args, out)
		}
	}
}
