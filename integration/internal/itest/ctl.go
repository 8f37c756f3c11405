package itest

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ServiceURLs is a cluster as sluicectl reaches it.
type ServiceURLs interface {
	FrontendURL() string
	MetadataURL() string
	OffsetsURL() string
}

// Sluicectl runs the real binary against the cluster and returns stdout,
// stderr and the exit status.
func Sluicectl(t *testing.T, c ServiceURLs, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(BuildBinaries(t), "sluicectl"),
		append([]string{"--frontend", c.FrontendURL(), "--metadata", c.MetadataURL(), "--offsets", c.OffsetsURL()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	return RunBinary(t, cmd)
}

// RunBinary runs cmd and returns its stdout, stderr and exit status; a
// command that could not run fails the test.
func RunBinary(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// DescribedTopicJSON is what the test reads of `topic describe -o json`.
type DescribedTopicJSON struct {
	Replicas []struct {
		Partition     int32 `json:"partition"`
		Node          int32 `json:"node"`
		Leader        bool  `json:"leader"`
		InSync        bool  `json:"in_sync"`
		LogEndOffset  int64 `json:"log_end_offset"`
		HighWatermark int64 `json:"high_watermark"`
		Lag           int64 `json:"lag"`
	} `json:"replicas"`
}

// MustSluicectl runs sluicectl, which must succeed, and returns its output.
func MustSluicectl(t *testing.T, c ServiceURLs, args ...string) string {
	t.Helper()
	out, errOut, code := Sluicectl(t, c, "", args...)
	if code != 0 {
		t.Fatalf("sluicectl %v: exit %d: %s", args, code, errOut)
	}
	return out
}
