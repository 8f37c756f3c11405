package client

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func validConfig() ConsumerConfig {
	cfg := DefaultConsumerConfig()
	cfg.Metadata = []string{"127.0.0.1:7070"}
	cfg.Offsets = []string{"127.0.0.1:7080"}
	cfg.Group = "g"
	cfg.Topics = []string{"t"}
	return cfg
}

func TestConsumerConfigValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	zero := ConsumerConfig{Metadata: []string{"m"}, Offsets: []string{"o"}, Group: "g", Topics: []string{"t"}}
	if err := zero.Validate(); err != nil {
		t.Errorf("zero values take defaults: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*ConsumerConfig)
		names string // the field the message must name
	}{
		{"no metadata", func(c *ConsumerConfig) { c.Metadata = []string{" "} }, "Metadata"},
		{"no offsets", func(c *ConsumerConfig) { c.Offsets = nil }, "Offsets"},
		{"no group", func(c *ConsumerConfig) { c.Group = "" }, "Group"},
		{"bad group", func(c *ConsumerConfig) { c.Group = "a/b" }, "Group"},
		{"no topics", func(c *ConsumerConfig) { c.Topics = nil }, "Topics"},
		{"bad topic", func(c *ConsumerConfig) { c.Topics = []string{"ok", "no spaces"} }, "Topics"},
		{"bad reset", func(c *ConsumerConfig) { c.AutoOffsetReset = "smallest" }, "AutoOffsetReset"},
		{"bad isolation", func(c *ConsumerConfig) { c.IsolationLevel = "read_committed " }, "IsolationLevel"},
		{"negative interval", func(c *ConsumerConfig) { c.AutoCommitInterval = -time.Second }, "AutoCommitInterval"},
		{"session too short", func(c *ConsumerConfig) { c.SessionTimeout = time.Millisecond }, "SessionTimeout"},
		{"rebalance too long", func(c *ConsumerConfig) { c.RebalanceTimeout = 1000 * time.Hour }, "RebalanceTimeout"},
		{"bad assignor", func(c *ConsumerConfig) { c.Assignor = "cooperative-sticky" }, "Assignor"},
		{"negative fetch bytes", func(c *ConsumerConfig) { c.FetchMaxBytes = -1 }, "FetchMaxBytes"},
		{"negative fetch wait", func(c *ConsumerConfig) { c.FetchMaxWait = -1 }, "FetchMaxWait"},
		{"negative prefetch", func(c *ConsumerConfig) { c.Prefetch = -1 }, "Prefetch"},
		{"negative max poll", func(c *ConsumerConfig) { c.MaxPollRecords = -5 }, "MaxPollRecords"},
	} {
		cfg := validConfig()
		tc.edit(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConsumerConfig) || !strings.Contains(err.Error(), tc.names+":") {
			t.Errorf("%s: %v", tc.name, err)
		}
		if _, nerr := NewConsumer(cfg); !errors.Is(nerr, ErrInvalidConsumerConfig) {
			t.Errorf("%s: NewConsumer accepted it: %v", tc.name, nerr)
		}
	}
	// Every problem is reported at once.
	err := ConsumerConfig{}.Validate()
	for _, field := range []string{"Metadata", "Offsets", "Group", "Topics"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("empty config: %v does not name %s", err, field)
		}
	}
}

func TestConsumerConfigDefaults(t *testing.T) {
	d := DefaultConsumerConfig()
	if !d.AutoCommit || d.AutoOffsetReset != OffsetResetLatest || d.AutoCommitInterval != 5*time.Second ||
		d.SessionTimeout != 10*time.Second || d.RebalanceTimeout != 30*time.Second || d.Prefetch != 2 {
		t.Errorf("defaults %+v", d)
	}
	cfg := ConsumerConfig{Metadata: []string{" m ", ""}, Offsets: []string{"o"}, Group: "g", Topics: []string{"b", "a", "b"}}.withDefaults()
	if cfg.AutoCommit {
		t.Error("withDefaults turned AutoCommit on; only DefaultConsumerConfig does")
	}
	if cfg.ClientID == "" || cfg.AutoOffsetReset != OffsetResetLatest || cfg.SessionTimeout != d.SessionTimeout ||
		cfg.FetchMaxBytes != d.FetchMaxBytes || cfg.MaxPollRecords != d.MaxPollRecords || cfg.Logger == nil {
		t.Errorf("zero fields not defaulted: %+v", cfg)
	}
	if !slices.Equal(cfg.Topics, []string{"a", "b"}) || !slices.Equal(cfg.Metadata, []string{"m"}) {
		t.Errorf("topics %v metadata %v", cfg.Topics, cfg.Metadata)
	}
	kept := validConfig()
	kept.SessionTimeout, kept.Prefetch = 4*time.Second, 7
	if got := kept.withDefaults(); got.SessionTimeout != 4*time.Second || got.Prefetch != 7 {
		t.Errorf("set fields overwritten: %+v", got)
	}
}
