package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

func setQuota(q cluster.Quota) Command { return Command{Type: TypeSetQuota, SetQuota: &q} }

func TestQuotas(t *testing.T) {
	h := newHarness()
	h.applyAll(t, setQuota(cluster.Quota{ClientID: "", ProduceBytesPerSec: 1000}), setQuota(cluster.Quota{ClientID: "etl", FetchBytesPerSec: 5}))
	v := h.Version()
	if r := h.apply(t, setQuota(cluster.Quota{ClientID: "etl", FetchBytesPerSec: 5})); r.Err != nil || h.Version() != v {
		t.Fatalf("setting the same quota again: %v, version %d -> %d", r.Err, v, h.Version())
	}
	want := []cluster.Quota{{ClientID: "", ProduceBytesPerSec: 1000}, {ClientID: "etl", FetchBytesPerSec: 5}}
	if got := h.View().Quotas; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("quotas %+v, want %+v", got, want)
	}
	if got := snapshotRoundTrip(t, h.FSM).View().Quotas; len(got) != 2 || got[1] != want[1] {
		t.Fatalf("quotas after a snapshot: %+v", got)
	}
	for _, bad := range []cluster.Quota{{ClientID: "x", ProduceBytesPerSec: -1}, {ClientID: strings.Repeat("x", 256), FetchBytesPerSec: 1}} {
		if r := h.apply(t, setQuota(bad)); !errors.Is(r.Err, ErrInvalidQuota) {
			t.Errorf("%+v: %v", bad, r.Err)
		}
	}
	h.applyAll(t, setQuota(cluster.Quota{ClientID: "etl"})) // both rates 0: removed
	if got := h.View().Quotas; len(got) != 1 || got[0].ClientID != "" {
		t.Fatalf("after removing etl's quota: %+v", got)
	}
}
