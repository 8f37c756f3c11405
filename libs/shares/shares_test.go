package shares

import (
	"net/http"
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
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
		{"errors.deadletter.topic", "dlt", false},
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
	if _, err := ParseAckType("4"); err == nil {
		t.Error("ack type 4 parsed")
	}
}

func TestNeedOf(t *testing.T) {
	for _, c := range []struct {
		method, path, body string
		want               cluster.Need
	}{
		{http.MethodPost, "/v1/share-groups/g/acquire", `{"topic":"t"}`, cluster.Need{Op: cluster.OpConsume, Group: true, Topics: []string{"t"}}},
		{http.MethodPost, "/v1/share-groups/g/acks", `{"acks":[{"topic":"a"},{"topic":"b"},{"topic":"a"}]}`, cluster.Need{Op: cluster.OpConsume, Group: true, Topics: []string{"a", "b"}}},
		{http.MethodPost, "/v1/share-groups/g/config", `{}`, cluster.Need{Admin: true}},
		{http.MethodDelete, "/v1/share-groups/g", ``, cluster.Need{Admin: true}},
		{http.MethodGet, "/v1/share-groups/g", ``, cluster.Need{Op: cluster.OpConsume, Group: true}},
		{http.MethodPost, "/v1/share-groups/g/acquire", `{not json`, cluster.Need{Op: cluster.OpConsume, Group: true}},
	} {
		got := NeedOf(c.method, c.path, []byte(c.body))
		if got.Op != c.want.Op || got.Admin != c.want.Admin || got.Group != c.want.Group || !slices.Equal(got.Topics, c.want.Topics) {
			t.Errorf("%s %s: %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
}
