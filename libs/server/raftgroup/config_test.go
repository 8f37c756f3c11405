package raftgroup

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	ok := testConfig("d")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no service", func(c *Config) { c.Service = "" }, "service"},
		{"service not a metric name", func(c *Config) { c.Service = "Meta-data" }, "service"},
		{"empty id", func(c *Config) { c.ID = "" }, "-id"},
		{"id with =", func(c *Config) { c.ID = "a=b" }, "-id"},
		{"bad raft addr", func(c *Config) { c.RaftAddr = "x" }, "-raft-addr"},
		{"bad http addr", func(c *Config) { c.HTTPAddr = "x" }, "-http-addr"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "-data-dir"},
		{"unspecified raft addr alone", func(c *Config) { c.RaftAddr = "0.0.0.0:1" }, "-raft-addr"},
		{"self not in peers", func(c *Config) { c.Peers = []Peer{{ID: "2", RaftAddr: "h:1", HTTPAddr: "h:2"}} }, "-peers"},
		{"peer twice", func(c *Config) {
			c.Peers = []Peer{{ID: "1", RaftAddr: "h:1", HTTPAddr: "h:2"}, {ID: "1", RaftAddr: "h:3", HTTPAddr: "h:4"}}
		}, "twice"},
		{"zero apply timeout", func(c *Config) { c.ApplyTimeout = 0 }, "apply timeout"},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = time.Hour }, "lease"},
		{"no snapshot retained", func(c *Config) { c.SnapshotRetain = 0 }, "retain"},
		{"bad log level", func(c *Config) { c.LogLevel = "shout" }, "-raft-log-level"},
	}
	for _, tc := range tests {
		c := testConfig("d")
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v; want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestParsePeers(t *testing.T) {
	got, err := ParsePeers(" a=h1:1=h1:2 ,b=h2:1=h2:2,")
	if err != nil || len(got) != 2 || got[1] != (Peer{ID: "b", RaftAddr: "h2:1", HTTPAddr: "h2:2"}) || got[0].String() != "a=h1:1=h1:2" {
		t.Fatalf("ParsePeers = %+v, %v", got, err)
	}
	for _, bad := range []string{"a", "a=h:1", "=h:1=h:2", "a=h=h:2", "a=h:1=h"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("ParsePeers(%q) accepted", bad)
		}
	}
}
