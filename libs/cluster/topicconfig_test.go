package cluster

import (
	"math"
	"strings"
	"testing"
)

func TestCleanupPolicy(t *testing.T) {
	for _, tc := range []struct {
		value           string
		compact, delete bool
		canonical       string
	}{
		{"delete", false, true, "delete"},
		{"compact", true, false, "compact"},
		{"compact,delete", true, true, "compact,delete"},
		{"delete, compact", true, true, "compact,delete"},
	} {
		c, err := ParseTopicConfig(map[string]string{ConfigCleanupPolicy: tc.value}, 1)
		if err != nil {
			t.Fatalf("%q: %v", tc.value, err)
		}
		if c.Compact != tc.compact || c.Delete != tc.delete || c.CleanupPolicy() != tc.canonical {
			t.Errorf("%q: compact %v delete %v policy %q; want %v %v %q", tc.value, c.Compact, c.Delete, c.CleanupPolicy(), tc.compact, tc.delete, tc.canonical)
		}
	}
	for _, bad := range []string{"", "compacted", "delete,,compact", "none"} {
		_, err := ParseTopicConfig(map[string]string{ConfigCleanupPolicy: bad}, 1)
		if err == nil || !strings.Contains(err.Error(), ConfigCleanupPolicy) {
			t.Errorf("%q: error %v, want one naming %s", bad, err, ConfigCleanupPolicy)
		}
	}
}

func TestCompactionConfigs(t *testing.T) {
	d := DefaultTopicConfig()
	if d.Compact || !d.Delete || d.MinCleanableDirtyRatio != 0.5 || d.MinCompactionLagMs != 0 ||
		d.MaxCompactionLagMs != math.MaxInt64 || d.DeleteRetentionMs != 86400000 {
		t.Fatalf("defaults %+v differ from Kafka's", d)
	}
	c, err := ParseTopicConfig(map[string]string{
		ConfigMinCleanableDirtyRatio: "0.01", ConfigMinCompactionLagMs: "100",
		ConfigMaxCompactionLagMs: "2000", ConfigDeleteRetentionMs: "0",
	}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c.MinCleanableDirtyRatio != 0.01 || c.MinCompactionLagMs != 100 || c.MaxCompactionLagMs != 2000 || c.DeleteRetentionMs != 0 {
		t.Fatalf("parsed %+v", c)
	}
	for k, v := range map[string]string{
		ConfigMinCleanableDirtyRatio: "1.5", ConfigMinCompactionLagMs: "-1",
		ConfigMaxCompactionLagMs: "0", ConfigDeleteRetentionMs: "-5",
	} {
		if _, err := ParseTopicConfig(map[string]string{k: v}, 1); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
	_, err = ParseTopicConfig(map[string]string{ConfigMinCompactionLagMs: "10", ConfigMaxCompactionLagMs: "5"}, 1)
	if err == nil || !strings.Contains(err.Error(), ConfigMaxCompactionLagMs) {
		t.Fatalf("max below min: %v", err)
	}
}
