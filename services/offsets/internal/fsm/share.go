package fsm

import (
	"sort"

	"github.com/sluicemq/sluice/services/offsets/internal/fsm/sharefsm"
)

// Share returns a share group's state (ok false when there is none). The
// state is shared: the caller must not change it.
func (f *FSM) Share(name string) (*sharefsm.Group, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g, ok := f.shares[name]
	return g, ok
}

// ShareNames lists the share groups.
func (f *FSM) ShareNames() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.shares))
	for name := range f.shares {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
