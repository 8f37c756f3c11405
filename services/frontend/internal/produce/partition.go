package produce

import (
	"sync"

	"github.com/sluicemq/sluice/libs/partitioner"
	"github.com/sluicemq/sluice/libs/protocol"
)

// group is the records of one request bound for one partition, in request
// order.
type group struct {
	partition int32
	index     []int // positions in the request
}

// plan is where each record of a request goes.
type plan struct {
	groups []group // in the order partitions first appear in the request
	// rejected maps a record position to its error, for records that go
	// nowhere (an explicit partition the topic does not have).
	rejected map[int]error
}

// assign picks each record's partition, a pure function of the records, the
// partition count and the keyless choice:
//   - an explicit partition is used as given when it exists, and rejects the
//     record otherwise;
//   - a keyed record goes to murmur2(key) mod partitions, Kafka's choice, so
//     keys land where a Kafka producer would put them (an empty key is a key;
//     only a null key is keyless, as in Kafka);
//   - keyless records all go to one partition, keyless(), asked for once per
//     request and only when the request has a keyless record (the sticky
//     partitioner: one batch per request).
//
// Records keep their request order inside each group.
func assign(recs []Input, partitions int, keyless func() int32) plan {
	var pl plan
	pos := make(map[int32]int, 4) // partition -> index in pl.groups
	stickyDone := false
	var sticky int32
	for i := range recs {
		r := &recs[i]
		var p int32
		switch {
		case r.Explicit:
			if r.Partition < 0 || int(r.Partition) >= partitions {
				if pl.rejected == nil {
					pl.rejected = make(map[int]error)
				}
				pl.rejected[i] = protocol.UnknownTopicOrPartition.Err("partition %d does not exist (the topic has %d)", r.Partition, partitions)
				continue
			}
			p = r.Partition
		case r.Key != nil:
			p = int32(partitioner.ForKey(r.Key, partitions))
		default:
			if !stickyDone {
				sticky, stickyDone = keyless(), true
			}
			p = sticky
		}
		g, ok := pos[p]
		if !ok {
			g = len(pl.groups)
			pos[p] = g
			pl.groups = append(pl.groups, group{partition: p})
		}
		pl.groups[g].index = append(pl.groups[g].index, i)
	}
	return pl
}

// stickyTable holds one sticky partitioner per topic, as libs/partitioner
// asks. A request takes the topic's current partition for all its keyless
// records and moves the topic on, so the next request fills another
// partition. Entries of deleted topics stay (a few words each) until restart.
type stickyTable struct {
	m sync.Map // topic name -> *partitioner.Sticky
}

// pick returns the keyless partition of one request to topic.
func (t *stickyTable) pick(topic string, partitions int) int32 {
	v, ok := t.m.Load(topic)
	if !ok {
		v, _ = t.m.LoadOrStore(topic, partitioner.NewSticky(partitions))
	}
	s := v.(*partitioner.Sticky)
	if s.Partitions() != partitions {
		s.SetPartitions(partitions) // the topic grew
	}
	p := s.Partition()
	// Only the first of concurrent requests that saw p moves the topic on.
	s.NextAfter(p)
	return int32(p)
}
