// Package partkey names a partition in the offsets state machine, one way
// for all its rooms: Bytes is the key of a partition's record in a bucket
// of the state file (a group's committed offsets, a share group's
// partition states), String its key in replicated states and in memory (a
// consumer group member's GrantedAt, a share group's partitions). Both are
// stored: never change them.
package partkey

import (
	"encoding/binary"
	"strconv"

	"github.com/sluicemq/sluice/libs/groups"
)

// Bytes is topic NUL partition (4 bytes big endian); NUL cannot occur in a
// topic name, so the key of a partition has a NUL 5 bytes from its end.
func Bytes(topic string, partition int32) []byte {
	k := make([]byte, len(topic)+5)
	copy(k, topic)
	binary.BigEndian.PutUint32(k[len(topic)+1:], uint32(partition))
	return k
}

// Parse returns the topic and partition of a key Bytes made (ok false for
// any other key).
func Parse(k []byte) (topic string, partition int32, ok bool) {
	if len(k) < 6 || k[len(k)-5] != 0 {
		return "", 0, false
	}
	return string(k[:len(k)-5]), int32(binary.BigEndian.Uint32(k[len(k)-4:])), true
}

// String is "topic/partition".
func String(p groups.TP) string { return p.Topic + "/" + strconv.Itoa(int(p.Partition)) }
