package node

import (
	"strings"
	"testing"
)

// TestCleanerFlags: the cleaner's flags are checked with a reason naming
// the flag.
func TestCleanerFlags(t *testing.T) {
	if _, err := Parse([]string{"-cleaner-backoff", "2s", "-cleaner-io-bytes-per-sec", "1048576", "-cleaner-nice", "0",
		"-cleaner-dedupe-buffer-bytes", "33554432", "-test-cleaner-pause", "swap-ready"}); err != nil {
		t.Fatal(err)
	}
	for flag, value := range map[string]string{
		"-cleaner-backoff": "0s", "-cleaner-io-bytes-per-sec": "-1", "-cleaner-nice": "20",
		"-cleaner-dedupe-buffer-bytes": "1024", "-test-cleaner-pause": "halfway",
	} {
		_, err := Parse([]string{flag, value})
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s %s: %v, want an error naming the flag", flag, value, err)
		}
	}
}
