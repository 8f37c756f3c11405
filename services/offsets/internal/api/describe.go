package api

import (
	"context"
	"net/http"
	"sort"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

// lookupParallelism bounds the concurrent log-offset look-ups of a describe.
const lookupParallelism = 8

func (s *Server) describe(c context.Context, ctx *fasthttp.RequestCtx, group string) error {
	if err := s.node.Linearize(c); err != nil {
		return protocol.NotCoordinator.Err("%v", err)
	}
	g, hasState := s.fsm.Group(group)
	committed, err := s.fsm.Offsets(group, "")
	if err != nil {
		return err
	}
	if !hasState && len(committed) == 0 {
		return protocol.GroupIDNotFound.Err("no group %q", group)
	}
	if !hasState {
		g = &fsm.Group{Name: group}
	}
	d := groups.Description{Group: group, State: s.stateOf(g), GroupEpoch: g.Epoch, Assignor: g.Assignor, Members: []groups.MemberDescription{},
		Isolation: isolationOf(g),
		Protocol:  g.ProtocolLabel(), ProtocolType: g.ProtocolType, ProtocolName: g.ProtocolName}
	for _, m := range g.SortedMembers() {
		md := groups.MemberDescription{MemberID: m.ID, ClientID: m.ClientID, MemberEpoch: m.Epoch, Topics: m.Topics, Assignment: groups.Group(m.Assigned),
			InstanceID: m.InstanceID, ClientHost: m.ClientHost, Metadata: m.Metadata, AssignmentBytes: m.Assignment}
		if len(m.Revoking) > 0 {
			md.Revoking = groups.Group(m.Revoking)
		}
		d.Members = append(d.Members, md)
	}
	d.Partitions = s.lags(c, g, committed, true)
	for _, p := range d.Partitions {
		if p.Lag > 0 {
			d.TotalLag += p.Lag
		}
	}
	service.WriteJSON(ctx, http.StatusOK, d)
	return nil
}

// isolationOf is what a group reads: read_committed when every member that
// says what it reads (SDK consumers; Kafka clients do not say) says so,
// and one does.
func isolationOf(g *fsm.Group) string {
	committed := false
	for _, m := range g.Members {
		switch m.Isolation {
		case groups.ReadCommitted:
			committed = true
		case groups.ReadUncommitted:
			return groups.ReadUncommitted
		}
	}
	if committed {
		return groups.ReadCommitted
	}
	return groups.ReadUncommitted
}

// stateOf is a group's state: a classic group's rebalance state as the
// coordinator holds it, else the written one.
func (s *Server) stateOf(g *fsm.Group) string {
	if state, _, ok := s.coord.ClassicState(g.Name); ok && g.Classic() {
		return state
	}
	return g.State()
}

// lags lists every partition the group committed or subscribes to, with its
// owner, committed offset, log range and lag. The last stable offsets are
// looked up for a read_committed group (its lag counts to them) and, with
// stable, for any group.
func (s *Server) lags(c context.Context, g *fsm.Group, committed []groups.Committed, stable bool) []groups.PartitionLag {
	byTP := map[groups.TP]*groups.PartitionLag{}
	add := func(tp groups.TP) *groups.PartitionLag {
		if p := byTP[tp]; p != nil {
			return p
		}
		p := &groups.PartitionLag{Topic: tp.Topic, Partition: tp.Partition, Committed: -1, LogStart: -1, LogEnd: -1, LastStable: -1, Lag: -1, Owner: g.Owner(tp)}
		byTP[tp] = p
		return p
	}
	ids := s.topicIDs()
	for _, c := range committed {
		if c.Stale(ids[c.Topic]) {
			continue // of a deleted topic's log: the new one has nothing committed
		}
		add(groups.TP{Topic: c.Topic, Partition: c.Partition}).Committed = c.Offset
	}
	for _, m := range g.Members {
		for _, t := range m.Topics {
			n, _ := s.ends.Topic(t)
			for p := int32(0); p < n; p++ {
				add(groups.TP{Topic: t, Partition: p})
			}
		}
	}
	readCommitted := isolationOf(g) == groups.ReadCommitted
	out := make([]groups.PartitionLag, 0, len(byTP))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, lookupParallelism)
	for _, p := range byTP {
		wg.Add(1)
		sem <- struct{}{}
		go func(p groups.PartitionLag) {
			defer wg.Done()
			defer func() { <-sem }()
			s.fillLag(c, &p, readCommitted, stable || readCommitted)
			mu.Lock()
			out = append(out, p)
			mu.Unlock()
		}(*p)
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool {
		return groups.TP{Topic: out[i].Topic, Partition: out[i].Partition}.Less(groups.TP{Topic: out[j].Topic, Partition: out[j].Partition})
	})
	return out
}

// fillLag looks up the partition's log range (and with stable its last
// stable offset) and computes the lag: records still to read from the
// committed offset, or from the log start when retention passed the commit
// or nothing was committed, to the log end (to the last stable offset for
// a read_committed group: it reads no further until the transaction there
// ends; readCommitted implies stable).
func (s *Server) fillLag(c context.Context, p *groups.PartitionLag, readCommitted, stable bool) {
	start, err := s.ends.ListOffset(c, p.Topic, p.Partition, protocol.TimestampEarliest)
	if err == nil {
		p.LogStart = start
		p.LogEnd, err = s.ends.ListOffset(c, p.Topic, p.Partition, protocol.TimestampLatest)
	}
	if err == nil && stable {
		p.LastStable, err = s.ends.LastStable(c, p.Topic, p.Partition)
	}
	if err != nil {
		p.LogStart, p.LogEnd, p.LastStable, p.Error = -1, -1, -1, err.Error()
		return
	}
	end := p.LogEnd
	if readCommitted {
		end = min(end, p.LastStable)
	}
	p.Lag = Lag(p.Committed, p.LogStart, end)
}

// Lag is the number of records a group still has to read of a partition
// holding [start, end) with committed offset committed (-1 for none).
func Lag(committed, start, end int64) int64 {
	from := max(committed, start)
	return max(end-from, 0)
}
