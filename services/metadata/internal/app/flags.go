package app

import (
	"fmt"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// ParseConfig reads the flags (and their SLUICE_* fallbacks) into a validated
// Config. Errors name the flag.
func ParseConfig(args []string) (Config, error) {
	cfg := DefaultConfig()
	fs := service.NewFlagSet(Name)
	var peers string
	cfg.Common.Register(fs, cfg.Common.AdminAddr)
	fs.String(&cfg.Raft.ID, "id", cfg.Raft.ID, "this member's raft server id")
	fs.String(&cfg.API.Addr, "http-addr", cfg.API.Addr, "listen address of the HTTP API")
	fs.String(&cfg.Raft.RaftAddr, "raft-addr", cfg.Raft.RaftAddr, "listen address of the raft transport")
	fs.String(&cfg.Raft.DataDir, "data-dir", cfg.Raft.DataDir, "directory of the raft log, stable store and snapshots")
	fs.Bool(&cfg.Raft.Bootstrap, "bootstrap", false, "bootstrap the raft group when there is no existing state")
	fs.String(&peers, "peers", "", "voters as id=raftaddr=httpaddr,... (this member included); empty: a single voter")
	fs.Duration(&cfg.Controller.SessionTimeout, "session-timeout", cfg.Controller.SessionTimeout, "storage node session timeout")
	fs.Duration(&cfg.Controller.PreferredLeaderInterval, "preferred-leader-interval", cfg.Controller.PreferredLeaderInterval,
		"how often leadership moves back to preferred replicas that are alive and in the ISR; 0 disables")
	fs.Int64(&cfg.Controller.ProducerIDBlockSize, "producer-id-block-size", cfg.Controller.ProducerIDBlockSize,
		"producer ids the leader reserves per raft entry and hands out from memory; unused ones are skipped after a leader change")
	fs.String(&cfg.Raft.LogLevel, "raft-log-level", cfg.Raft.LogLevel, "lowest level of raft's own log lines passed on: trace, debug, info, warn or error")
	snapshotEntries := int64(cfg.Raft.SnapshotThreshold)
	fs.Int64(&snapshotEntries, "raft-snapshot-entries", snapshotEntries, "log entries after which the member takes a snapshot and compacts its raft log")
	fs.Duration(&cfg.Raft.SnapshotInterval, "raft-snapshot-interval", cfg.Raft.SnapshotInterval, "how often the member checks whether to take a snapshot")
	cfg.API.Authz.Register(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if snapshotEntries < 1 {
		return cfg, fmt.Errorf("-raft-snapshot-entries %d: must be at least 1", snapshotEntries)
	}
	cfg.Raft.SnapshotThreshold = uint64(snapshotEntries)
	p, err := raftnode.ParsePeers(peers)
	if err != nil {
		return cfg, err
	}
	cfg.Raft.Peers = p
	cfg.Raft.HTTPAddr = cfg.API.Addr
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	server, client, err := cfg.API.Authz.TLSConfigs(&cfg.Common)
	if err != nil {
		return cfg, err
	}
	cfg.Raft.ServerTLS, cfg.Raft.ClientTLS, cfg.API.TLS = server, client, server
	return cfg, nil
}
