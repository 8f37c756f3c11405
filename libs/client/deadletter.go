package client

import (
	"slices"

	"github.com/sluicemq/sluice/libs/shares"
)

// DeadLetter returns the record to write to a dead-letter topic for a
// record a regular group's consumer gives up on: its key, value, timestamp
// and headers, plus the sluice.dlt.* headers share groups write (source
// topic, partition and offset, delivery count, group, reason), so
// `sluicectl dead-letter replay` brings it back to its partition. Send it
// with a Producer at acks=all before committing past the record; to make
// the dead letter and the group's progress one step, send it in a
// transaction (TxnSession), whose commit carries the group's offsets.
func DeadLetter(rec ConsumerRecord, dlt, group, reason string, deliveryCount int) ProducerRecord {
	headers := append(slices.Clip(rec.Headers), shares.DeadLetterHeaders(rec.Topic, rec.Partition, rec.Offset, deliveryCount, group, reason)...)
	return ProducerRecord{Topic: dlt, Partition: -1, Key: rec.Key, Value: rec.Value, Headers: headers, Timestamp: rec.Timestamp}
}
