package fsm

import (
	"cmp"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// OffsetsLog returns partition partition of the groups' change log from
// position from: the committed offsets and group states of the groups in
// that partition whose position is at least from, in position order, at
// most limit of them. Records written before positions were kept (0) are
// numbered below every real position, in group, topic and partition order.
func (f *FSM) OffsetsLog(partition int32, from int64, limit int) (*groups.OffsetsLogPage, error) {
	if limit <= 0 || limit > groups.MaxOffsetsLogRecords {
		limit = groups.MaxOffsetsLogRecords
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var recs, legacy []groups.OffsetsLogRecord
	keep := func(r groups.OffsetsLogRecord, pos int64) {
		switch {
		case pos == 0:
			legacy = append(legacy, r)
		case pos >= from:
			r.Position = pos
			recs = append(recs, r)
		}
	}
	for name, g := range f.groups {
		if groups.OffsetsLogPartition(name) == partition {
			keep(groups.OffsetsLogRecord{Group: name, State: stateOf(g)}, g.Position)
		}
	}
	var end int64
	err := f.db.View(func(tx *bolt.Tx) error {
		end = int64(readApplied(tx)+1) << groups.OffsetsLogIndexShift
		return tx.Bucket(bucketOffsets).ForEachBucket(func(k []byte) error {
			name := string(k)
			if groups.OffsetsLogPartition(name) != partition {
				return nil
			}
			return forEachCommitted(tx, name, func(_ []byte, c groups.Committed) {
				keep(groups.OffsetsLogRecord{Group: name, Offset: &c}, c.Position)
			})
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(legacy, func(a, b groups.OffsetsLogRecord) int { return strings.Compare(legacyKey(a), legacyKey(b)) })
	for i := range legacy {
		if pos := int64(i); pos >= from {
			legacy[i].Position = pos
			recs = append(recs, legacy[i])
		}
	}
	slices.SortFunc(recs, func(a, b groups.OffsetsLogRecord) int { return cmp.Compare(a.Position, b.Position) })
	if len(recs) > limit {
		recs = recs[:limit]
	}
	if recs == nil {
		recs = []groups.OffsetsLogRecord{}
	}
	return &groups.OffsetsLogPage{Records: recs, End: end}, nil
}

// legacyKey orders the records without a position: a group's state before
// its offsets, offsets by topic and partition.
func legacyKey(r groups.OffsetsLogRecord) string {
	if r.Offset == nil {
		return r.Group + "\x00"
	}
	return r.Group + "\x00" + string(partkey.Bytes(r.Offset.Topic, r.Offset.Partition))
}

// stateOf is a group's membership as the change log shows it.
func stateOf(g *Group) *groups.GroupState {
	s := &groups.GroupState{Protocol: g.Protocol, ProtocolType: g.ProtocolType, ProtocolName: g.ProtocolName, Assignor: g.Assignor,
		Epoch: g.Epoch, Leader: g.Leader, Members: []groups.GroupStateMember{}}
	for _, m := range g.SortedMembers() {
		s.Members = append(s.Members, groups.GroupStateMember{MemberID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SessionTimeoutMs: m.SessionTimeoutMs, RebalanceTimeoutMs: m.RebalanceTimeoutMs, Metadata: m.Metadata, AssignmentBytes: m.Assignment,
			Topics: m.Topics, Assignment: groups.Group(m.Assigned)})
	}
	return s
}
