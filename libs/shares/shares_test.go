package shares

import (
	"net/http"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/record"
)

func TestConfigSetAndValidate(t *testing.T) {
	for _, c := range []struct {
		key, value string
		ok         bool
	}{
		{ConfigAutoOffsetReset, "earliest", true},
		{ConfigAutoOffsetReset, "middle", false}, // caught by Validate
		{ConfigLockDurationMs, "999", false},
		{ConfigLockDurationMs, "15000", true},
		{ConfigDeliveryLimit, "1", false},
		{ConfigDeliveryLimit, "10", true},
		{ConfigMaxFetchRecords, "3000", false}, // above the default 2000 record locks
		{ConfigMaxFetchRecords, "x", false},
		{ConfigMaxRecordLocks, "50", false},
		{ConfigDeadLetterTopic, "dlt", true},
		{ConfigDeadLetterTopic, "bad/topic", false},
		{"share.nope", "1", false},
	} {
		cfg := DefaultConfig()
		err := cfg.Set(c.key, c.value)
		if err == nil {
			err = cfg.Validate()
		}
		if (err == nil) != c.ok {
			t.Errorf("%s=%s: %v, want ok=%v", c.key, c.value, err, c.ok)
		}
		if c.ok && cfg.Map()[c.key] != c.value {
			t.Errorf("%s=%s: Map gives %q", c.key, c.value, cfg.Map()[c.key])
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("the default configuration: %v", err)
	}
}

func TestParseAckType(t *testing.T) {
	for _, s := range []string{"accept", "1", "release", "reject", "gap"} {
		if _, err := ParseAckType(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if r, err := ParseAckType("renew"); err != nil || r != AckRenew {
		t.Errorf("renew: %v, %v", r, err)
	}
	for _, bad := range []string{"5", "9", "renewal"} {
		if _, err := ParseAckType(bad); err == nil {
			t.Errorf("ack type %q parsed", bad)
		}
	}
	if d, err := ParseAckType("10"); err != nil || d != AckDefer {
		t.Errorf("ack type 10: %v, %v", d, err)
	}
}

func TestDeliverAt(t *testing.T) {
	at := func(v string) []record.RecordHeader {
		return []record.RecordHeader{{Key: HeaderDeliverAt, Value: []byte(v)}}
	}
	for _, c := range []struct {
		headers []record.RecordHeader
		ts      int64
		delay   int64
		want    int64
	}{
		{nil, 1000, 0, 0},
		{nil, 1000, 500, 1500},
		{at("5000"), 1000, 0, 5000},
		{at("5000"), 1000, 9000, 10_000},
		{at("2026-12-03T10:00:00Z"), 0, 0, 1796292000000},
		{at("2026-12-03T10:00:00.250+01:00"), 0, 0, 1796288400250},
		{at("tomorrow"), 1000, 0, 0},
		{[]record.RecordHeader{{Key: "other", Value: []byte("5000")}}, 1000, 0, 0},
	} {
		if got := DeliverAt(c.headers, c.ts, c.delay); got != c.want {
			t.Errorf("DeliverAt(%v, %d, %d) = %d, want %d", c.headers, c.ts, c.delay, got, c.want)
		}
	}
}

func TestNeedOf(t *testing.T) {
	for _, c := range []struct {
		method, path, body string
		want               cluster.Need
	}{
		{http.MethodPost, "/v1/share-groups/g/acquire", `{"topic":"t"}`, cluster.Need{Op: cluster.OpConsume, Group: true, Topics: []string{"t"}}},
		{http.MethodPost, "/v1/share-groups/g/acks", `{"acks":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}`, cluster.Need{Op: cluster.OpConsume, Group: true, Topics: []string{"a", "b"}}},
		{http.MethodPost, "/v1/share-groups/g/reset-offsets", `{"topic":"t"}`, cluster.Need{Op: cluster.OpConsume, Group: true, Topics: []string{"t"}}},
		{http.MethodPost, "/v1/share-groups/g/delete-offsets", `{"topic":"t"}`, cluster.Need{Op: cluster.OpConsume, Group: true, Topics: []string{"t"}}},
		{http.MethodPost, "/v1/share-groups/g/config", `{}`, cluster.Need{Admin: true}},
		{http.MethodDelete, "/v1/share-groups/g", ``, cluster.Need{Admin: true}},
		{http.MethodGet, "/v1/share-groups/g", ``, cluster.Need{Describe: true, Group: true, GroupName: "g"}},
		{http.MethodGet, "/v1/share-groups", ``, cluster.Need{Describe: true, Group: true}},
		{http.MethodPost, "/v1/share-groups/g/acquire", `{not json`, cluster.Need{Op: cluster.OpConsume, Group: true}},
	} {
		got := NeedOf(c.method, c.path, []byte(c.body))
		if got.Op != c.want.Op || got.Admin != c.want.Admin || got.Group != c.want.Group || !slices.Equal(got.Topics, c.want.Topics) ||
			got.Describe != c.want.Describe || c.want.Describe && got.GroupName != c.want.GroupName {
			t.Errorf("%s %s: %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
}
