package node

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/server/service"
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

// TestWiringStartsAndStops: the node's parts are wired (every dependency
// provided, the hooks in order: server, membership, Kafka listener), start
// against a metadata service, register, and stop.
func TestWiringStartsAndStops(t *testing.T) {
	md := fakecluster.NewMetadata()
	t.Cleanup(md.Close)
	opts, err := Parse([]string{"-addr", "127.0.0.1:0", "-kafka-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-data-dir", filepath.Join(t.TempDir(), "s"), "-metadata", md.URL()})
	if err != nil {
		t.Fatal(err)
	}
	app := fxtest.New(t, append(opts, service.Module(), fx.NopLogger)...)
	app.RequireStart()
	testkit.WaitFor(t, 10*time.Second, "the node to register with metadata", func() bool { return md.Registrations() > 0 })
	app.RequireStop()
}
