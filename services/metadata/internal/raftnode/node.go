package raftnode

import (
	"errors"
	"log/slog"
	"net"

	"github.com/sluicemq/sluice/libs/server/raftgroup"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

// Service is the metadata group's name in error messages and metric names.
const Service = "metadata"

// The group's configuration, options and peer list are raftgroup's.
type (
	Config = raftgroup.Config
	Peer   = raftgroup.Peer
	Option = raftgroup.Option
)

// Routes and headers of forwarding, shared with every raft group.
const (
	ApplyPath       = raftgroup.ApplyPath
	ForwardedHeader = raftgroup.ForwardedHeader
)

// Sentinel errors: raftgroup's, so errors.Is matches whichever package the
// caller names.
var (
	ErrNotLeader            = raftgroup.ErrNotLeader
	ErrNoLeader             = raftgroup.ErrNoLeader
	ErrLeaderAddressUnknown = raftgroup.ErrLeaderAddressUnknown
	ErrForward              = raftgroup.ErrForward
	ErrNotStarted           = raftgroup.ErrNotStarted
	ErrTimeout              = raftgroup.ErrTimeout
)

// errStateNotApplied: Ready's answer until the FSM has applied the entry that
// gives the cluster its id.
var errStateNotApplied = errors.New("replicated state not applied yet")

// DefaultConfig returns raftgroup's defaults with the metadata service's name,
// addresses and data directory.
func DefaultConfig() Config {
	c := raftgroup.DefaultConfig()
	c.Service = Service
	c.RaftAddr = "127.0.0.1:7071"
	c.HTTPAddr = "127.0.0.1:7070"
	c.DataDir = "./data/metadata"
	return c
}

// ParsePeers parses the -peers flag: comma-separated "id=raftaddr=httpaddr".
func ParsePeers(s string) ([]Peer, error) { return raftgroup.ParsePeers(s) }

// WithListener makes the transport serve on ln instead of listening on
// Config.RaftAddr (tests use it to learn every address before any node starts).
func WithListener(ln net.Listener) Option { return raftgroup.WithListener(ln) }

// Node is this member of the metadata Raft group: a raftgroup.Node running the
// metadata FSM, whose promoted methods (Start, Stop, IsLeader, Leader,
// OnLeadership, Forward, Linearize, Barrier, Snapshot, Ready, ...) the service
// uses as they are, with typed Apply, Propose and ApplyLocal on top.
type Node struct {
	*raftgroup.Node
	fsm *fsm.FSM
}

// New opens the stores and the transport for f. Start starts raft.
func New(cfg Config, f *fsm.FSM, log *slog.Logger, opts ...Option) (*Node, error) {
	applied := raftgroup.WithReady(func() error {
		if f.ClusterID() == "" {
			return errStateNotApplied
		}
		return nil
	})
	g, err := raftgroup.New(cfg, f, log, append([]Option{applied}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Node{Node: g, fsm: f}, nil
}
