package localcluster

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// TestPauseReturnsOnceStopped: Pause returns only when every thread of the
// process is stopped, even one busy on a CPU when the signal is sent, and
// Resume runs it again.
func TestPauseReturnsOnceStopped(t *testing.T) {
	c, p := shellCluster(t, "while :; do :; done")
	if err := c.launch(p); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := c.Pause(p); err != nil {
			t.Fatal(err)
		}
		if n, err := runningThreads(p.Pid()); err != nil || n != 0 {
			t.Fatalf("pause %d: %d threads running after Pause returned (%v)", i, n, err)
		}
		if err := c.Resume(p); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the resumed busy loop running", func() bool {
		n, err := runningThreads(p.Pid())
		return err == nil && n > 0
	})
}
