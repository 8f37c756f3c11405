package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Tiered storage: each partition's remote log (cluster.RemoteLog), the
// segments its leaders uploaded to the object store.
//
// Invariants:
//   - A remote log is in offset order without gaps: each segment starts
//     where the one before ends, and every segment is well formed
//     (checkRemoteSegment). Only partitions that exist have one.
//   - Only the partition's current leader changes it (AddRemoteSegment,
//     DropRemoteSegments), with the checks AlterPartition makes of its
//     sender (checkLeader): a deposed or fenced leader can neither add nor
//     drop.
//   - The log grows at its end and shrinks from its front. Adding a segment
//     that is already there (same object, same fields) is a retry and
//     changes nothing.
//   - Partition.Remote is the summary of the log (nil when it is empty) and
//     part of the cluster model, so a change of the log moves Version and
//     wakes watchers. It moves neither the partition epoch nor the leader
//     epoch: those fence the leader's ISR changes, which a remote log change
//     must not disturb.
//   - Deleting a topic moves its partitions' remote logs to the remote
//     garbage, where their segments stay until a ClearRemoteGarbage says the
//     objects were deleted. Garbage is not part of the cluster model.

// Sentinel errors of the remote log commands (see also the leader checks'
// ErrStaleNodeEpoch, ErrUnknownNode, ErrUnknownTopic, ErrUnknownPartition,
// ErrFencedLeaderEpoch, ErrNotPartitionLeader).
var (
	// ErrRemoteLogGap: an AddRemoteSegment whose segment does not start at
	// the remote log's end; the leader must read the remote log again.
	ErrRemoteLogGap = errors.New("remote segment does not continue the remote log")
	// ErrInvalidRemoteSegment: an AddRemoteSegment whose segment is not well
	// formed, or names an object the log holds with other fields.
	ErrInvalidRemoteSegment = fmt.Errorf("%w: invalid remote segment", ErrMalformedCommand)
)

// maxRemoteObjectLen bounds a segment's object key: S3's limit on keys.
const maxRemoteObjectLen = 1024

// partitionKey names a partition in the remote maps.
type partitionKey struct {
	topic     string
	partition int32
}

func (k partitionKey) compare(o partitionKey) int {
	return cmp.Or(strings.Compare(k.topic, o.topic), cmp.Compare(k.partition, o.partition))
}

// checkRemoteSegment checks a segment on its own: an object key, offsets
// [BaseOffset, EndOffset) not empty, batches (LogBytes) at the object's
// start and every section after them, within Bytes (an empty section may
// also sit at 0, meaning absent), a timestamp of -1 or more, and the
// uploader's leader epoch at most leaderEpoch, the one of the request.
func checkRemoteSegment(seg *cluster.RemoteSegment, leaderEpoch int32) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: object %q: %s", ErrInvalidRemoteSegment, seg.Object, fmt.Sprintf(format, args...))
	}
	switch {
	case seg.Object == "" || len(seg.Object) > maxRemoteObjectLen:
		return bad("the object key has %d bytes (1..%d)", len(seg.Object), maxRemoteObjectLen)
	case seg.BaseOffset < 0:
		return bad("base offset %d is negative", seg.BaseOffset)
	case seg.EndOffset <= seg.BaseOffset:
		return bad("end offset %d is not above base offset %d", seg.EndOffset, seg.BaseOffset)
	case seg.LogBytes <= 0:
		return bad("log bytes %d is not positive", seg.LogBytes)
	case seg.Bytes < seg.LogBytes:
		return bad("%d bytes is below the log bytes %d", seg.Bytes, seg.LogBytes)
	case seg.MaxTimestamp < -1:
		return bad("max timestamp %d is below -1", seg.MaxTimestamp)
	case seg.LeaderEpoch < 0 || seg.LeaderEpoch > leaderEpoch:
		return bad("leader epoch %d is outside 0..%d", seg.LeaderEpoch, leaderEpoch)
	}
	x := seg.Sections
	for _, sec := range []struct {
		name     string
		pos, len int64
	}{
		{"index", x.IndexPos, x.IndexLen}, {"aborted transactions", x.AbortedPos, x.AbortedLen},
		{"leader epochs", x.EpochsPos, x.EpochsLen},
	} {
		absent := sec.len == 0 && sec.pos == 0
		// pos <= Bytes-len rather than pos+len <= Bytes: no overflow.
		if !absent && (sec.len < 0 || sec.pos < seg.LogBytes || sec.pos > seg.Bytes-sec.len) {
			return bad("%s section [%d, +%d) is not within [%d, %d)", sec.name, sec.pos, sec.len, seg.LogBytes, seg.Bytes)
		}
	}
	return checkRemoteEpochs(seg, bad)
}

// checkRemoteEpochs checks a segment's epochs: in order, within the
// segment, none above the uploader's.
func checkRemoteEpochs(seg *cluster.RemoteSegment, bad func(string, ...any) error) error {
	for i, e := range seg.Epochs {
		switch {
		case e.Epoch < 0 || e.Epoch > seg.LeaderEpoch:
			return bad("epoch %d is outside 0..%d", e.Epoch, seg.LeaderEpoch)
		case e.StartOffset < seg.BaseOffset || e.StartOffset >= seg.EndOffset:
			return bad("epoch %d starts at %d, outside [%d, %d)", e.Epoch, e.StartOffset, seg.BaseOffset, seg.EndOffset)
		case i > 0 && (e.Epoch <= seg.Epochs[i-1].Epoch || e.StartOffset < seg.Epochs[i-1].StartOffset):
			return bad("epoch %d at %d does not follow epoch %d at %d", e.Epoch, e.StartOffset, seg.Epochs[i-1].Epoch, seg.Epochs[i-1].StartOffset)
		}
	}
	return nil
}

// applyRemote applies a remote-log command (ApplyCommand) into res and
// reports whether the cluster model changed.
func (s *state) applyRemote(cmd Command, res *Result) (changed bool) {
	switch cmd.Type {
	case TypeAddRemoteSegment:
		res.Partition, changed, res.Err = s.addRemoteSegment(cmd.AddRemoteSegment)
	case TypeDropRemoteSegments:
		res.Partition, res.Dropped, res.Err = s.dropRemoteSegments(cmd.DropRemoteSegments)
		changed = len(res.Dropped) > 0
	case TypeClearRemoteGarbage:
		// Garbage is not part of the cluster model: watchers have nothing to see.
		s.clearRemoteGarbage(cmd.ClearRemoteGarbage)
	}
	return changed
}

// sameRemoteSegment reports whether a and b are the same upload, every
// field alike.
func sameRemoteSegment(a, b cluster.RemoteSegment) bool {
	return a.Object == b.Object && a.BaseOffset == b.BaseOffset && a.EndOffset == b.EndOffset && a.LogBytes == b.LogBytes &&
		a.Bytes == b.Bytes && a.MaxTimestamp == b.MaxTimestamp && a.LeaderEpoch == b.LeaderEpoch && a.Sections == b.Sections &&
		slices.Equal(a.Epochs, b.Epochs)
}

// summarize returns the summary of a remote log, nil when it is empty.
func summarize(log []cluster.RemoteSegment, start int64) *cluster.RemoteSummary {
	if len(log) == 0 {
		return nil
	}
	l := cluster.RemoteLog{Segments: log, LogStart: start}
	s := l.Summary()
	return &s
}

func (s *state) addRemoteSegment(c *cluster.AddRemoteSegmentRequest) (*cluster.Partition, bool, error) {
	p, present, err := s.checkAddRemoteSegment(c)
	if err != nil {
		return nil, false, err
	}
	if !present {
		k := partitionKey{c.Topic, c.Partition}
		s.remote[k] = append(s.remote[k], c.Segment)
		p.Remote = summarize(s.remote[k], s.remoteStart[k])
	}
	out := copyPartition(*p)
	return &out, !present, nil
}

// checkAddRemoteSegment validates c (see AddRemoteSegment for the order)
// and returns the live partition and whether the segment is in its remote
// log already. It changes nothing.
func (s *state) checkAddRemoteSegment(c *cluster.AddRemoteSegmentRequest) (*cluster.Partition, bool, error) {
	seg := c.Segment
	if err := checkRemoteSegment(&seg, c.LeaderEpoch); err != nil {
		return nil, false, err
	}
	p, err := s.checkLeader(c.Topic, c.Partition, c.LeaderID, c.NodeEpoch, c.LeaderEpoch)
	if err != nil {
		return nil, false, err
	}
	log := s.remote[partitionKey{c.Topic, c.Partition}]
	for _, have := range log {
		if have.Object != seg.Object {
			continue
		}
		if !sameRemoteSegment(have, seg) {
			return nil, false, fmt.Errorf("%w: %s-%d: object %q is in the remote log as [%d, %d) with other fields",
				ErrInvalidRemoteSegment, c.Topic, c.Partition, seg.Object, have.BaseOffset, have.EndOffset)
		}
		return p, true, nil
	}
	if n := len(log); n > 0 && seg.BaseOffset != log[n-1].EndOffset {
		return nil, false, fmt.Errorf("%w: %s-%d: segment %q starts at offset %d, the remote log ends at %d",
			ErrRemoteLogGap, c.Topic, c.Partition, seg.Object, seg.BaseOffset, log[n-1].EndOffset)
	}
	return p, false, nil
}

func (s *state) dropRemoteSegments(c *cluster.DropRemoteSegmentsRequest) (*cluster.Partition, []cluster.RemoteSegment, error) {
	p, n, start, err := s.checkDropRemoteSegments(c)
	if err != nil {
		return nil, nil, err
	}
	k := partitionKey{c.Topic, c.Partition}
	var dropped []cluster.RemoteSegment
	if n > 0 {
		log := s.remote[k]
		dropped = slices.Clone(log[:n])
		if n == len(log) {
			delete(s.remote, k)
		} else {
			s.remote[k] = slices.Clone(log[n:]) // let the dropped ones go
		}
	}
	if start > 0 {
		s.remoteStart[k] = start
	} else if len(s.remote[k]) == 0 || s.remoteStart[k] <= s.remote[k][0].BaseOffset {
		delete(s.remoteStart, k)
	}
	p.Remote = summarize(s.remote[k], s.remoteStart[k])
	out := copyPartition(*p)
	return &out, dropped, nil
}

// checkDropRemoteSegments validates c and returns the live partition, how
// many segments from the front of its remote log the drop removes, and the
// log start it moves to inside the first segment left (0: none). It
// changes nothing.
func (s *state) checkDropRemoteSegments(c *cluster.DropRemoteSegmentsRequest) (*cluster.Partition, int, int64, error) {
	p, err := s.checkLeader(c.Topic, c.Partition, c.LeaderID, c.NodeEpoch, c.LeaderEpoch)
	if err != nil {
		return nil, 0, 0, err
	}
	k := partitionKey{c.Topic, c.Partition}
	log := s.remote[k]
	n := 0
	for n < len(log) && log[n].EndOffset <= c.Below {
		n++
	}
	var start int64
	if n < len(log) && c.Below > max(log[n].BaseOffset, s.remoteStart[k]) {
		start = c.Below
	}
	return p, n, start, nil
}

// discardRemoteLog moves a partition's remote log, if it has one, to the
// remote garbage (its topic is being deleted).
func (s *state) discardRemoteLog(topic string, partition int32) {
	k := partitionKey{topic, partition}
	if log, ok := s.remote[k]; ok {
		s.remoteGarbage[k] = append(s.remoteGarbage[k], log...)
		delete(s.remote, k)
	}
	delete(s.remoteStart, k)
}

// clearRemoteGarbage removes c's objects from the partition's garbage.
func (s *state) clearRemoteGarbage(c *cluster.ClearRemoteGarbageRequest) {
	k := partitionKey{c.Topic, c.Partition}
	if len(s.remoteGarbage[k]) == 0 || len(c.Objects) == 0 {
		return
	}
	kept := slices.DeleteFunc(slices.Clone(s.remoteGarbage[k]), func(seg cluster.RemoteSegment) bool {
		return slices.Contains(c.Objects, seg.Object)
	})
	if len(kept) == 0 {
		delete(s.remoteGarbage, k)
		return
	}
	s.remoteGarbage[k] = kept
}

// remoteLogs returns copies of m's logs, with their starts (nil: none),
// ordered by topic and partition; nil when m is empty.
func remoteLogs(m map[partitionKey][]cluster.RemoteSegment, starts map[partitionKey]int64) []cluster.RemoteLog {
	if len(m) == 0 {
		return nil
	}
	out := make([]cluster.RemoteLog, 0, len(m))
	for _, k := range slices.SortedFunc(maps.Keys(m), partitionKey.compare) {
		out = append(out, cluster.RemoteLog{Topic: k.topic, Partition: k.partition, Segments: slices.Clone(m[k]), LogStart: starts[k]})
	}
	return out
}

// restoreRemote loads a snapshot's remote logs and garbage into st, whose
// topics are loaded already, and sets every partition's summary from its
// log (whatever the snapshot's topics said). A remote log of a partition
// that does not exist, named twice, or with a gap makes the snapshot
// corrupt.
func restoreRemote(st *state, logs, garbage []cluster.RemoteLog) error {
	for _, l := range logs {
		if _, err := st.partition(l.Topic, l.Partition); err != nil {
			return fmt.Errorf("%w: remote log: %w", ErrCorruptSnapshot, err)
		}
		k := partitionKey{l.Topic, l.Partition}
		if _, dup := st.remote[k]; dup {
			return fmt.Errorf("%w: remote log of %s-%d given twice", ErrCorruptSnapshot, l.Topic, l.Partition)
		}
		for i := 1; i < len(l.Segments); i++ {
			if l.Segments[i].BaseOffset != l.Segments[i-1].EndOffset {
				return fmt.Errorf("%w: remote log of %s-%d has a gap at offset %d", ErrCorruptSnapshot, l.Topic, l.Partition, l.Segments[i-1].EndOffset)
			}
		}
		if len(l.Segments) > 0 {
			st.remote[k] = slices.Clone(l.Segments)
			if first := l.Segments[0]; l.LogStart > first.BaseOffset {
				if l.LogStart >= first.EndOffset {
					return fmt.Errorf("%w: remote log of %s-%d starts at %d, past its first segment", ErrCorruptSnapshot, l.Topic, l.Partition, l.LogStart)
				}
				st.remoteStart[k] = l.LogStart
			}
		}
	}
	for _, t := range st.topics {
		for i := range t.Partitions {
			k := partitionKey{t.Name, int32(i)}
			t.Partitions[i].Remote = summarize(st.remote[k], st.remoteStart[k])
		}
	}
	for _, l := range garbage {
		if len(l.Segments) > 0 {
			k := partitionKey{l.Topic, l.Partition}
			st.remoteGarbage[k] = append(st.remoteGarbage[k], l.Segments...)
		}
	}
	return nil
}

// RemoteLog returns a copy of a partition's remote log (no segments, not
// nil, when nothing was uploaded). Errors: ErrUnknownTopic,
// ErrUnknownPartition.
func (f *FSM) RemoteLog(topic string, partition int32) (cluster.RemoteLog, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if _, err := f.st.partition(topic, partition); err != nil {
		return cluster.RemoteLog{}, err
	}
	k := partitionKey{topic, partition}
	segs := slices.Clone(f.st.remote[k])
	if segs == nil {
		segs = []cluster.RemoteSegment{}
	}
	return cluster.RemoteLog{Topic: topic, Partition: partition, Segments: segs, LogStart: f.st.remoteStart[k]}, nil
}

// RemoteGarbage returns copies of the remote garbage (segments of deleted
// topics whose objects are still to be deleted) by topic and partition;
// nil when there is none.
func (f *FSM) RemoteGarbage() []cluster.RemoteLog {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return remoteLogs(f.st.remoteGarbage, nil)
}

// CheckAddRemoteSegment reports whether c would be applied now, with the
// error Apply would return, without changing anything (a retry of a
// segment in the log already is no error).
func (f *FSM) CheckAddRemoteSegment(c cluster.AddRemoteSegmentRequest) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, _, err := f.st.checkAddRemoteSegment(&c)
	return err
}

// CheckDropRemoteSegments reports whether c would be applied now and how
// many segments it would drop, without changing anything.
func (f *FSM) CheckDropRemoteSegments(c cluster.DropRemoteSegmentsRequest) (bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, n, start, err := f.st.checkDropRemoteSegments(&c)
	return n > 0 || start > 0, err
}
