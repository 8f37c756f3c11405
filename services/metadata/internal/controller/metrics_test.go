package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCountChange: each committed partition change is counted as what it
// is: an election (a new live leader), going offline, an ISR shrink or
// expansion, or several at once.
func TestCountChange(t *testing.T) {
	m := newMetrics()
	m.countChange(1, 2, 3, 2)  // failover: election and shrink
	m.countChange(2, 2, 2, 3)  // the old leader rejoins: expansion
	m.countChange(2, 1, 3, 3)  // preferred leader back: election only
	m.countChange(1, -1, 1, 1) // last ISR member gone: offline
	m.countChange(-1, -1, 1, 1)
	for name, want := range map[string]float64{"elections": 2, "offline": 1, "shrinks": 1, "expands": 1} {
		c := map[string]float64{"elections": testutil.ToFloat64(m.elections), "offline": testutil.ToFloat64(m.offline),
			"shrinks": testutil.ToFloat64(m.shrinks), "expands": testutil.ToFloat64(m.expands)}[name]
		if c != want {
			t.Errorf("%s = %v, want %v", name, c, want)
		}
	}
}
