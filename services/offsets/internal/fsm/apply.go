package fsm

import (
	"encoding/json"
	"errors"
	"slices"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm/partkey"
)

// applyTx applies one command inside the batch's transaction. A rejection is
// returned in the Result; an error means the transaction failed.
func (f *FSM) applyTx(tx *bolt.Tx, st *stage, index uint64, cmd Command) (*Result, error) {
	res := &Result{Index: index}
	var err error
	switch cmd.Type {
	case TypePutGroup:
		res.Err, err = f.applyPutGroup(tx, st, index, cmd.PutGroup)
	case TypeCommit:
		res.Err, err = f.applyCommit(tx, st, index, cmd.Commit)
	case TypeReset:
		res.Err, err = f.applyReset(tx, st, index, cmd.Reset)
	case TypeDeleteGroup:
		res.Err, err = f.applyDeleteGroup(tx, st, cmd.DeleteGroup)
	case TypeDeleteOffsets:
		res.Err, err = f.applyDeleteOffsets(tx, st, cmd.DeleteOffsets)
	case TypePutTxn:
		res.Err, err = f.applyPutTxn(tx, st, index, cmd.PutTxn)
	case TypeShare:
		res.Share, res.Err, err = st.shares.Apply(tx, cmd.Share)
	case TypeBatch:
		res.Batch, err = f.applyBatch(tx, st, index, cmd.Batch)
	default:
		res.Err = protocol.InvalidRequest.Err("unknown command %q", cmd.Type)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// The functions below apply one command each inside the batch's bbolt
// transaction: a refusal (the command's answer) changes nothing; an error
// fails the transaction.

// applyPutGroup replaces a group's membership state (CheckPut's rules). A
// state whose name the file cannot key (empty, or too long) is refused: the
// coordinator proposes valid group ids only, and the write would fail and
// break the replica.
func (f *FSM) applyPutGroup(tx *bolt.Tx, st *stage, index uint64, c *PutGroup) (refusal, err error) {
	if n := len(c.Group.Name); n == 0 || n > bolt.MaxKeySize {
		return protocol.InvalidGroupID.Err("a group's state needs a name of 1 to %d bytes, not %d", bolt.MaxKeySize, n), nil
	}
	if refusal = CheckPut(f.groupLocked(st.groups, c.Group.Name), c); refusal != nil {
		return refusal, nil
	}
	g := c.Group.Clone()
	g.Version, g.Position = index, st.position(index)
	v, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	st.groups[g.Name] = g
	return nil, tx.Bucket(bucketGroups).Put([]byte(g.Name), v)
}

// applyCommit stores a commit's offsets (CheckCommit's rules).
func (f *FSM) applyCommit(tx *bolt.Tx, st *stage, index uint64, c *Commit) (refusal, err error) {
	if refusal = CheckCommit(f.groupLocked(st.groups, c.Group), c); refusal != nil {
		return refusal, nil
	}
	return nil, putOffsets(tx, st, index, c.Group, c.Offsets, c.TimeMs)
}

// applyReset stores a reset's offsets: the group must be empty.
func (f *FSM) applyReset(tx *bolt.Tx, st *stage, index uint64, c *Reset) (refusal, err error) {
	if refusal = checkEmpty(f.groupLocked(st.groups, c.Group), c.Group); refusal == nil {
		refusal = ValidateOffsets(c.Group, c.Offsets)
	}
	if refusal != nil {
		return refusal, nil
	}
	return nil, putOffsets(tx, st, index, c.Group, c.Offsets, c.TimeMs)
}

// applyDeleteGroup removes an empty group and its offsets; with
// IdleBeforeMs, only one idle since before then (an expiry).
func (f *FSM) applyDeleteGroup(tx *bolt.Tx, st *stage, c *DeleteGroup) (refusal, err error) {
	name := c.Group
	g := f.groupLocked(st.groups, name)
	if refusal = checkEmpty(g, name); refusal != nil {
		return refusal, nil
	}
	offs := tx.Bucket(bucketOffsets)
	if g == nil && offs.Bucket([]byte(name)) == nil {
		return protocol.GroupIDNotFound.Err("no group %q", name), nil
	}
	if before := c.IdleBeforeMs; before > 0 {
		idle, err := idleSinceTx(tx, g, name)
		if err != nil {
			return nil, err
		}
		if idle == 0 || idle >= before {
			return protocol.NonEmptyGroup.Err("group %s was active at %d ms, not before %d ms: it does not expire", name, idle, before), nil
		}
	}
	st.groups[name] = nil
	if err := tx.Bucket(bucketGroups).Delete([]byte(name)); err != nil {
		return nil, err
	}
	if err := offs.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return nil, err
	}
	return nil, nil
}

// applyDeleteOffsets removes a group's offsets of a topic no member reads.
func (f *FSM) applyDeleteOffsets(tx *bolt.Tx, st *stage, c *DeleteOffsets) (refusal, err error) {
	if refusal = checkUnread(f.groupLocked(st.groups, c.Group), c.Group, c.Topic); refusal != nil {
		return refusal, nil
	}
	b := tx.Bucket(bucketOffsets).Bucket([]byte(c.Group))
	if b == nil {
		return protocol.GroupIDNotFound.Err("group %s has no committed offsets", c.Group), nil
	}
	var keys [][]byte
	err = b.ForEach(func(k, _ []byte) error {
		topic, p, ok := partkey.Parse(k)
		if ok && topic == c.Topic && (len(c.Partitions) == 0 || slices.Contains(c.Partitions, p)) {
			keys = append(keys, slices.Clone(k))
		}
		return nil
	})
	for _, k := range keys {
		if err == nil {
			err = b.Delete(k)
		}
	}
	return nil, err
}

// applyBatch applies a batch entry's commands in order, each with its own
// result; a command that does not decode, or a batch inside the batch, is
// refused alone.
func (f *FSM) applyBatch(tx *bolt.Tx, st *stage, index uint64, batch []json.RawMessage) ([]*Result, error) {
	out := make([]*Result, len(batch))
	for i, b := range batch {
		sub, err := DecodeCommand(b)
		if err == nil && sub.Type == TypeBatch {
			err = errors.New("offsets command: a batch inside a batch")
		}
		if err != nil {
			out[i] = &Result{Index: index, Err: protocol.InvalidRequest.Err("%v", err)}
			continue
		}
		if out[i], err = f.applyTx(tx, st, index, sub); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func putOffsets(tx *bolt.Tx, st *stage, index uint64, group string, offs []groups.Offset, timeMs int64) error {
	b, err := tx.Bucket(bucketOffsets).CreateBucketIfNotExists([]byte(group))
	if err != nil {
		return err
	}
	for _, o := range offs {
		v, err := json.Marshal(groups.Committed{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, CommitTimeMs: timeMs, TopicID: o.TopicID,
			LeaderEpoch: o.LeaderEpoch, Position: st.position(index)})
		if err != nil {
			return err
		}
		if err := b.Put(partkey.Bytes(o.Topic, o.Partition), v); err != nil {
			return err
		}
	}
	return nil
}

// CheckPut is the compare-and-set rule of PutGroup.
func CheckPut(cur *Group, c *PutGroup) error {
	var have uint64
	if cur != nil {
		have = cur.Version
	}
	if have != c.ExpectVersion {
		return protocol.InvalidUpdateVersion.Err("group %s changed meanwhile (version %d, expected %d)", c.Group.Name, have, c.ExpectVersion)
	}
	return nil
}

// ValidateOffsets checks a commit's or reset's offsets.
func ValidateOffsets(group string, offs []groups.Offset) error {
	if err := groups.ValidateGroupID(group); err != nil {
		return protocol.InvalidGroupID.Err("%v", err)
	}
	for _, o := range offs {
		if err := cluster.ValidateTopicName(o.Topic); err != nil {
			return protocol.InvalidTopic.Err("%v", err)
		}
		if o.Partition < 0 || o.Offset < 0 {
			return protocol.InvalidRequest.Err("%s-%d: negative partition or offset %d", o.Topic, o.Partition, o.Offset)
		}
	}
	return nil
}

// CheckCommit is the fencing rule of commits: a commit without a member is
// accepted only while the group has no members; a member's commit only from a
// current member, at an epoch the coordinator gave it, for partitions it holds.
func CheckCommit(g *Group, c *Commit) error {
	if err := ValidateOffsets(c.Group, c.Offsets); err != nil {
		return err
	}
	if c.MemberID == "" {
		if g != nil && len(g.Members) > 0 {
			return protocol.UnknownMemberID.Err("group %s has %d active members: commit as one of them", c.Group, len(g.Members))
		}
		return nil
	}
	var m *Member
	if g != nil {
		m = g.Members[c.MemberID]
	}
	if m == nil {
		return protocol.UnknownMemberID.Err("member %s is not in group %s (it left or its session expired): commit rejected", c.MemberID, c.Group)
	}
	if g.Classic() {
		// Kafka's classic rule: a member of the current generation may
		// commit any partition (its assignment is the leader's, opaque
		// to the coordinator for other protocol types than consumer).
		if c.MemberEpoch != g.Epoch {
			return protocol.IllegalGeneration.Err("member %s of group %s committed in generation %d; the group is in generation %d", c.MemberID, c.Group, c.MemberEpoch, g.Epoch)
		}
		return nil
	}
	if c.MemberEpoch > m.Epoch || c.MemberEpoch <= 0 {
		return protocol.FencedMemberEpoch.Err("member %s of group %s committed at epoch %d; its epoch is %d", c.MemberID, c.Group, c.MemberEpoch, m.Epoch)
	}
	for _, o := range c.Offsets {
		p := groups.TP{Topic: o.Topic, Partition: o.Partition}
		if !m.Holds(p) {
			return protocol.StaleMemberEpoch.Err("member %s of group %s does not own %s (epoch %d): commit rejected", c.MemberID, c.Group, p, m.Epoch)
		}
		if at := m.GrantedAt[partkey.String(p)]; c.MemberEpoch < at {
			return protocol.StaleMemberEpoch.Err("member %s of group %s committed %s at epoch %d, before it was given the partition again at epoch %d: commit rejected",
				c.MemberID, c.Group, p, c.MemberEpoch, at)
		}
	}
	return nil
}

// CheckFetch is Kafka's rule for a member reading its group's offsets
// (OffsetFetch v9+): in a consumer-protocol group the member must be there
// at its current epoch; classic groups are read unchecked, as Kafka's are.
// g is the group's state, nil when it has none.
func CheckFetch(g *Group, group, id string, epoch int32) error {
	if g.Classic() {
		return nil
	}
	var m *Member
	if g != nil {
		m = g.Members[id]
	}
	switch {
	case m == nil:
		return protocol.UnknownMemberID.Err("member %s is not in group %s", id, group)
	case epoch != m.Epoch:
		return protocol.StaleMemberEpoch.Err("member %s of group %s read offsets at epoch %d; its epoch is %d", id, group, epoch, m.Epoch)
	}
	return nil
}

// checkUnread refuses to delete the offsets of a topic that a member of the
// group reads (Kafka's GROUP_SUBSCRIBED_TO_TOPIC).
func checkUnread(g *Group, name, topic string) error {
	if g == nil {
		return nil
	}
	for _, m := range g.Members {
		if slices.Contains(m.Topics, topic) {
			return protocol.GroupSubscribedToTopic.Err("member %s of group %s reads topic %s: its offsets stay", m.ID, name, topic)
		}
	}
	return nil
}

func checkEmpty(g *Group, name string) error {
	if g != nil && len(g.Members) > 0 {
		return protocol.NonEmptyGroup.Err("group %s has %d active members; stop them first", name, len(g.Members))
	}
	return nil
}

// idleSinceTx is IdleSince within a transaction, g being the group's state.
func idleSinceTx(tx *bolt.Tx, g *Group, name string) (int64, error) {
	if g != nil && len(g.Members) > 0 {
		return 0, nil
	}
	var last int64
	if g != nil {
		last = g.EmptySinceMs
	}
	err := forEachCommitted(tx, name, func(_ []byte, c groups.Committed) { last = max(last, c.CommitTimeMs) })
	return last, err
}
