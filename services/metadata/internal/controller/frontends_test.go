package controller

import (
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
)

// TestExpireFrontends is the frontend session rule: a new registration gets
// a session starting now, a silent frontend is removed at its epoch, a
// re-registration restarts the clock, and sessions of frontends gone from
// the model are dropped.
func TestExpireFrontends(t *testing.T) {
	now := time.Unix(1000, 0)
	timeout := 3 * time.Second
	sessions := map[int32]session{}
	fronts := []cluster.Frontend{{ID: cluster.FrontendIDBase, Epoch: 5}, {ID: cluster.FrontendIDBase + 1, Epoch: 7}}
	if gone := expireFrontends(fronts, sessions, now, timeout); len(gone) != 0 || len(sessions) != 2 {
		t.Fatalf("first check: removed %v, sessions %v", gone, sessions)
	}
	sessions[cluster.FrontendIDBase+1] = session{epoch: 7, lastSeen: now.Add(3 * time.Second), heard: true}
	gone := expireFrontends(fronts, sessions, now.Add(4*time.Second), timeout)
	if len(gone) != 1 || gone[0].ID != cluster.FrontendIDBase || gone[0].Epoch != 5 {
		t.Fatalf("after 4s: removed %+v, want the silent frontend at epoch 5", gone)
	}
	fronts[0].Epoch = 9 // it registered again meanwhile
	if gone := expireFrontends(fronts, sessions, now.Add(5*time.Second), timeout); len(gone) != 0 {
		t.Fatalf("a re-registered frontend was removed: %+v", gone)
	}
	if gone := expireFrontends(fronts[:1], sessions, now.Add(5*time.Second), timeout); len(gone) != 0 || len(sessions) != 1 {
		t.Fatalf("a frontend gone from the model kept its session: %v", sessions)
	}
}
