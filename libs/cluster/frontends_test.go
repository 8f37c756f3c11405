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
	if d := DefaultClusterConfig(); d.ReplicationFactor != 3 || d.MinInsyncReplicas != 2 || d.AutoCreateTopics {
		t.Fatalf("defaults %+v: want 3 replicas, 2 in sync, no auto-creation", d)
	}
	c, err := ParseClusterConfig(map[string]string{SettingAutoCreateTopics: "true", SettingReplicationFactor: " 5 ", SettingMinInsyncReplicas: "3"})
	if err != nil || !c.AutoCreateTopics || c.ReplicationFactor != 5 || c.MinInsyncReplicas != 3 || c.NumPartitions != 1 {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []map[string]string{{SettingNumPartitions: "0"}, {SettingNumPartitions: "20000"}, {SettingReplicationFactor: "17"},
		{SettingReplicationFactor: "0"}, {SettingMinInsyncReplicas: "0"}, {SettingMinInsyncReplicas: "17"},
		{SettingAutoCreateTopics: "yes please"}, {"log.retention.hours": "1"}} {
		if _, err := ParseClusterConfig(bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	if s := (&Snapshot{Config: map[string]string{"bogus": "1"}}).Settings(); s != DefaultClusterConfig() {
		t.Fatalf("unreadable settings gave %+v, want the defaults", s)
	}
}

// TestDurableDefaults: a topic created without a replication factor gets
// the setting, or the live nodes when fewer (reported as short); a topic
// without its own min.insync.replicas gets the cluster's where it has 3
// replicas or more, capped at its replication factor, and 1 below 3.
func TestDurableDefaults(t *testing.T) {
	d := DefaultClusterConfig()
	for _, tc := range []struct {
		live, rf int
		short    bool
	}{{5, 3, false}, {3, 3, false}, {2, 2, true}, {1, 1, true}, {0, 3, false}} {
		if rf, short := d.DefaultReplicationFactor(tc.live); rf != tc.rf || short != tc.short {
			t.Errorf("%d live nodes: rf %d short %v, want %d %v", tc.live, rf, short, tc.rf, tc.short)
		}
	}
	for _, tc := range []struct{ setting, rf, want int }{
		{2, 1, 1}, {2, 2, 1}, {2, 3, 2}, {2, 5, 2}, {3, 3, 3}, {4, 3, 3}, {1, 3, 1},
	} {
		c := d
		c.MinInsyncReplicas = tc.setting
		if got := c.MinInsyncFor(tc.rf); got != tc.want {
			t.Errorf("setting %d, rf %d: min.insync.replicas %d, want %d", tc.setting, tc.rf, got, tc.want)
		}
	}
	snap := &Snapshot{Config: map[string]string{SettingMinInsyncReplicas: "3"}}
	for _, tc := range []struct {
		topic Topic
		want  int
	}{
		{Topic{ReplicationFactor: 3}, 3},
		{Topic{ReplicationFactor: 5}, 3},
		{Topic{ReplicationFactor: 2}, 1},
		{Topic{ReplicationFactor: 3, Config: map[string]string{ConfigMinInsyncReplicas: "1"}}, 1}, // the topic's own wins
	} {
		cfg, err := snap.TopicConfig(&tc.topic)
		if err != nil || cfg.MinInsyncReplicas != tc.want {
			t.Errorf("%+v: min.insync.replicas %d (%v), want %d", tc.topic, cfg.MinInsyncReplicas, err, tc.want)
		}
	}
	if cfg, _ := (&Snapshot{}).TopicConfig(&Topic{ReplicationFactor: 3}); cfg.MinInsyncReplicas != 2 {
		t.Fatalf("an RF=3 topic on a cluster nobody configured: min.insync.replicas %d, want 2", cfg.MinInsyncReplicas)
	}
}
