package raftgroup

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sluicemq/sluice/libs/server/service"
)

// Peer is one voter of the group.
type Peer struct {
	// ID is the member's raft server id (the -id flag of that member).
	ID string
	// RaftAddr is the address other members dial for raft traffic.
	RaftAddr string
	// HTTPAddr is the member's HTTP API address, used to forward writes.
	HTTPAddr string
}

// String formats p as a -peers item.
func (p Peer) String() string { return p.ID + "=" + p.RaftAddr + "=" + p.HTTPAddr }

// Config configures a Node.
type Config struct {
	// Service names the group's service ("metadata", "offsets"): it appears in
	// error messages and in metric names (sluice_<service>_raft_state, ...).
	// Lowercase letters, digits and '_', starting with a letter.
	Service string
	// ID is this member's raft server id.
	ID string
	// RaftAddr is the listen address of the raft transport.
	RaftAddr string
	// HTTPAddr is this member's HTTP API address as other members and clients
	// reach it (reported as the leader's address and used when it is in no peer).
	HTTPAddr string
	// DataDir holds the Raft log (wal/) and snapshots/.
	DataDir string
	// Bootstrap bootstraps the group when there is no existing state.
	Bootstrap bool
	// Peers are the voters, this member included; empty means a single voter.
	Peers []Peer

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotInterval is how often raft checks whether to snapshot, and
	// SnapshotThreshold how many new entries make it do so.
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64
	// SnapshotRetain is how many snapshot files to keep.
	SnapshotRetain int
	// NoSnapshotRestoreOnStart stops raft from restoring the latest snapshot
	// into the FSM at start (raft.Config's field of the same name), for FSMs
	// that persist their own state and only need the log after it replayed.
	NoSnapshotRestoreOnStart bool
	// ApplyTimeout bounds a proposal when the caller's context has no deadline.
	ApplyTimeout time.Duration
	// ForwardTimeout bounds a request forwarded to the leader.
	ForwardTimeout time.Duration
	// LogLevel is the lowest hclog level passed on to the service's logger.
	LogLevel string
	// TLS, when set, secures the Raft transport (ServerTLS for accepted
	// connections, ClientTLS for dialed ones and for requests forwarded to
	// the leader's HTTP API, which then uses https).
	ServerTLS, ClientTLS *tls.Config
	// NoSync skips fsync in the log store: tests only.
	NoSync bool
}

// DefaultConfig returns hashicorp/raft's timing defaults and the flag
// defaults shared by every service. The service fills in Service, RaftAddr,
// HTTPAddr and DataDir, which differ per service.
func DefaultConfig() Config {
	return Config{
		ID:                 "1",
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotInterval:   2 * time.Minute,
		SnapshotThreshold:  8192,
		SnapshotRetain:     2,
		ApplyTimeout:       10 * time.Second,
		ForwardTimeout:     10 * time.Second,
		LogLevel:           "warn",
	}
}

// Validate checks the fields and their relations. Messages name the flags.
func (c Config) Validate() error {
	if !validService(c.Service) {
		return fmt.Errorf("raft service name %q must be lowercase letters, digits or '_', starting with a letter", c.Service)
	}
	if c.ID == "" || strings.ContainsAny(c.ID, "=, \t") {
		return fmt.Errorf("flag -id: %q must be non-empty without '=', ',' or spaces", c.ID)
	}
	if err := service.ValidateAddr("raft-addr", c.RaftAddr); err != nil {
		return err
	}
	if err := service.ValidateAddr("http-addr", c.HTTPAddr); err != nil {
		return err
	}
	if c.DataDir == "" {
		return errors.New("flag -data-dir: must not be empty")
	}
	if c.SnapshotInterval < 5*time.Millisecond {
		return fmt.Errorf("flag -raft-snapshot-interval: %v is below the 5ms raft allows", c.SnapshotInterval)
	}
	if len(c.Peers) > 0 {
		seen := map[string]bool{}
		self := false
		for _, p := range c.Peers {
			if seen[p.ID] {
				return fmt.Errorf("flag -peers: id %q appears twice", p.ID)
			}
			seen[p.ID] = true
			self = self || p.ID == c.ID
		}
		if !self {
			return fmt.Errorf("flag -peers: this member's -id %q is not listed", c.ID)
		}
	} else if host, _, _ := net.SplitHostPort(c.RaftAddr); host == "" || net.ParseIP(host).IsUnspecified() {
		return fmt.Errorf("flag -raft-addr: %q is not an address other members can dial; list this member in -peers to advertise one", c.RaftAddr)
	}
	for name, d := range map[string]time.Duration{"heartbeat timeout": c.HeartbeatTimeout, "election timeout": c.ElectionTimeout,
		"leader lease timeout": c.LeaderLeaseTimeout, "commit timeout": c.CommitTimeout, "snapshot interval": c.SnapshotInterval,
		"apply timeout": c.ApplyTimeout, "forward timeout": c.ForwardTimeout} {
		if d <= 0 {
			return fmt.Errorf("raft %s must be positive, got %v", name, d)
		}
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return fmt.Errorf("raft leader lease timeout %v must not exceed the heartbeat timeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.SnapshotRetain < 1 {
		return fmt.Errorf("raft snapshot retain must be at least 1, got %d", c.SnapshotRetain)
	}
	if hclog.LevelFromString(c.LogLevel) == hclog.NoLevel {
		return fmt.Errorf("flag -raft-log-level: %q is not trace, debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// validService reports whether s can be part of a Prometheus metric name.
func validService(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// self returns this member's peer entry: from Peers, or built from the
// listen addresses for a single voter.
func (c Config) self() Peer {
	for _, p := range c.Peers {
		if p.ID == c.ID {
			return p
		}
	}
	return Peer{ID: c.ID, RaftAddr: c.RaftAddr, HTTPAddr: c.HTTPAddr}
}

// ParsePeers parses the -peers flag: comma-separated "id=raftaddr=httpaddr".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, "=")
		if len(parts) != 3 || parts[0] == "" {
			return nil, fmt.Errorf("flag -peers: %q is not id=raftaddr=httpaddr", item)
		}
		p := Peer{ID: parts[0], RaftAddr: parts[1], HTTPAddr: parts[2]}
		if err := service.ValidateAddr("peers", p.RaftAddr); err != nil {
			return nil, err
		}
		if err := service.ValidateAddr("peers", p.HTTPAddr); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
