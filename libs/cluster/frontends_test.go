package cluster

import "testing"

// TestKafkaLeaderSpreads checks that a topic's partitions go to the
// frontends in turn, and that there is no leader without a frontend.
func TestKafkaLeaderSpreads(t *testing.T) {
	s := &Snapshot{}
	if _, ok := s.KafkaLeader("t", 0); ok {
		t.Fatal("a leader without any frontend")
	}
	s.Frontends = []Frontend{{ID: FrontendIDBase}, {ID: FrontendIDBase + 1}, {ID: FrontendIDBase + 2}}
	count := map[int32]int{}
	for p := int32(0); p < 30; p++ {
		f, ok := s.KafkaLeader("orders", p)
		if !ok {
			t.Fatal("no leader")
		}
		count[f.ID]++
		if next, _ := s.KafkaLeader("orders", p+1); next.ID == f.ID {
			t.Fatalf("partitions %d and %d share frontend %d", p, p+1, f.ID)
		}
	}
	for id, n := range count {
		if n != 10 {
			t.Fatalf("frontend %d leads %d of 30 partitions", id, n)
		}
	}
}

// TestParseClusterConfig checks the cluster-wide settings' validation.
func TestParseClusterConfig(t *testing.T) {
	c, err := ParseClusterConfig(map[string]string{SettingAutoCreateTopics: "true", SettingReplicationFactor: " 3 "})
	if err != nil || !c.AutoCreateTopics || c.ReplicationFactor != 3 || c.NumPartitions != 1 {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []map[string]string{{SettingNumPartitions: "0"}, {SettingNumPartitions: "20000"}, {SettingReplicationFactor: "17"},
		{SettingAutoCreateTopics: "yes please"}, {"log.retention.hours": "1"}} {
		if _, err := ParseClusterConfig(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	if s := (&Snapshot{Config: map[string]string{"bogus": "1"}}).Settings(); s != DefaultClusterConfig() {
		t.Fatalf("unreadable settings gave %+v, want the defaults", s)
	}
}
