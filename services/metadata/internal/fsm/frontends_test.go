package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

func registerFrontend(name, addr string) Command {
	return Command{Type: TypeRegisterFrontend, RegisterFrontend: &RegisterFrontend{Name: name, KafkaAddr: addr}}
}

// TestFrontendRegistry checks frontend ids (from cluster.FrontendIDBase, kept
// by name, the lowest free one for a new name), removal at the current
// epoch only, validation and snapshots.
func TestFrontendRegistry(t *testing.T) {
	h := newHarness()
	a := h.apply(t, registerFrontend("fe-a@h:9092", "h:9092"))
	b := h.apply(t, registerFrontend("fe-b@h:9094", "h:9094"))
	if a.Err != nil || b.Err != nil || a.Frontend.ID != cluster.FrontendIDBase || b.Frontend.ID != cluster.FrontendIDBase+1 {
		t.Fatalf("registrations: %+v %+v", a, b)
	}
	again := h.apply(t, registerFrontend("fe-a@h:9092", "h:9092"))
	if again.Frontend.ID != a.Frontend.ID || again.Frontend.Epoch <= a.Frontend.Epoch {
		t.Fatalf("a frontend registering again got %+v, want id %d at a newer epoch", again.Frontend, a.Frontend.ID)
	}
	if r := h.apply(t, Command{Type: TypeRemoveFrontend, RemoveFrontend: &RemoveFrontend{ID: a.Frontend.ID, Epoch: a.Frontend.Epoch}}); !errors.Is(r.Err, ErrStaleNodeEpoch) {
		t.Fatalf("removal at the old epoch: %v, want ErrStaleNodeEpoch", r.Err)
	}
	h.applyAll(t, Command{Type: TypeRemoveFrontend, RemoveFrontend: &RemoveFrontend{ID: a.Frontend.ID, Epoch: again.Frontend.Epoch}})
	c := h.apply(t, registerFrontend("fe-c@h:9096", "h:9096"))
	if c.Frontend.ID != cluster.FrontendIDBase {
		t.Fatalf("a new frontend got id %d, want the freed %d", c.Frontend.ID, cluster.FrontendIDBase)
	}
	v := h.View()
	if len(v.Frontends) != 2 || v.Frontends[0].ID != cluster.FrontendIDBase || v.Frontends[1].Name != "fe-b@h:9094" {
		t.Fatalf("frontends in the model: %+v", v.Frontends)
	}
	if got := snapshotRoundTrip(t, h.FSM).View(); len(got.Frontends) != 2 || got.Frontends[1].KafkaAddr != "h:9094" {
		t.Fatalf("after a snapshot: %+v", got.Frontends)
	}
	for name, cmd := range map[string]Command{
		"no name":      registerFrontend("", "h:1"),
		"long name":    registerFrontend(strings.Repeat("x", 300), "h:1"),
		"bad address":  registerFrontend("fe", "nowhere"),
		"empty port":   registerFrontend("fe", "h:"),
		"unknown body": {Type: TypeRegisterFrontend},
	} {
		if r := h.apply(t, cmd); r.Err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestClusterConfig checks the cluster-wide settings: validated when
// applied, changed by set and delete, kept in snapshots.
func TestClusterConfig(t *testing.T) {
	h := newHarness()
	set := func(kv map[string]string, del ...string) *Result {
		return h.apply(t, Command{Type: TypeSetClusterConfig, SetClusterConfig: &SetClusterConfig{Set: kv, Delete: del}})
	}
	if r := set(map[string]string{"auto.create.topics.enable": "true", "num.partitions": "6"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if s := h.View().Settings(); !s.AutoCreateTopics || s.NumPartitions != 6 || s.ReplicationFactor != 3 || s.MinInsyncReplicas != 2 {
		t.Fatalf("settings %+v", s)
	}
	for _, bad := range []map[string]string{{"num.partitions": "0"}, {"auto.create.topics.enable": "maybe"}, {"log.dirs": "/tmp"}} {
		if r := set(bad); !errors.Is(r.Err, ErrInvalidConfig) {
			t.Errorf("%v: %v, want ErrInvalidConfig", bad, r.Err)
		}
	}
	if r := set(nil, "num.partitions"); r.Err != nil {
		t.Fatal(r.Err)
	}
	got := snapshotRoundTrip(t, h.FSM).View()
	if s := got.Settings(); !s.AutoCreateTopics || s.NumPartitions != 1 || len(got.Config) != 1 {
		t.Fatalf("after a snapshot: %+v %v", s, got.Config)
	}
}
