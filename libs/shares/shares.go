// Package shares is the contract of share groups (queues on the log, Kafka's
// KIP-932): the JSON wire types of the offsets service's share-group API, the
// group configuration and its Client.
//
// A share group reads a topic with any number of consumers. A consumer
// acquires records (offset ranges) under a lock of the group's
// share.record.lock.duration.ms; it then reads them from the partition
// leaders and acknowledges each one: ACCEPT (done), RELEASE (give it to
// someone now) or REJECT (never deliver again). GAP acknowledges an offset
// that holds no record (a compacted one, a transaction marker). A record
// whose lock expires, or whose consumer leaves, becomes available again.
// Every acquisition counts one delivery; a record released or expired after
// share.delivery.count.limit deliveries is archived, not delivered again.
//
// Acquisitions and acknowledgements are entries of the offsets Raft group, so
// the state survives the loss of any replica: an accepted record is never
// delivered again, and a record is only delivered again when its consumer
// released it, left, or let its lock expire.
package shares

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/record"
)

// AckType is an acknowledgement's kind; the values are Kafka's
// (ShareAcknowledge's AcknowledgeTypes).
type AckType uint8

// The acknowledgement kinds.
const (
	AckGap     AckType = 0 // the offset holds no record
	AckAccept  AckType = 1 // processed: never deliver again
	AckRelease AckType = 2 // deliver again, to anyone, now
	AckReject  AckType = 3 // unprocessable: archive it
	AckRenew   AckType = 4 // still working on it: the lock starts again
	// AckDefer is Sluice's own (numbered apart from Kafka's kinds, which
	// may grow): a reader found the record's delivery time (DeliverAt) in
	// the future. The record waits until Ack.NotBeforeMs, and the delivery
	// does not count.
	AckDefer AckType = 10
)

// Valid reports whether t is a known kind.
func (t AckType) Valid() bool { return t <= AckRenew || t == AckDefer }

// HeaderDeliverAt delays a record for share groups: its value is an RFC 3339
// time or Unix milliseconds before which no share consumer gets it.
const HeaderDeliverAt = "sluice-deliver-at"

// DeliverAt returns when share groups may hand a record out, in Unix
// milliseconds (0: at once): the later of its sluice-deliver-at header
// and its timestamp plus the topic's delivery.delay.ms. A header that is
// neither form is ignored.
func DeliverAt(headers []record.RecordHeader, timestampMs, delayMs int64) int64 {
	var at int64
	if delayMs > 0 {
		at = timestampMs + delayMs
	}
	for _, h := range headers {
		if h.Key != HeaderDeliverAt {
			continue
		}
		v := string(h.Value)
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			at = max(at, ms)
		} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			at = max(at, t.UnixMilli())
		}
	}
	return at
}

// String names the kind as the HTTP API spells it.
func (t AckType) String() string {
	switch t {
	case AckGap:
		return "gap"
	case AckAccept:
		return "accept"
	case AckRelease:
		return "release"
	case AckReject:
		return "reject"
	case AckRenew:
		return "renew"
	case AckDefer:
		return "defer"
	}
	return "ack_type_" + strconv.Itoa(int(t))
}

// ParseAckType parses accept, release, reject, gap, renew or defer (or
// their numbers).
func ParseAckType(s string) (AckType, error) {
	for _, t := range []AckType{AckGap, AckAccept, AckRelease, AckReject, AckRenew, AckDefer} {
		if s == t.String() || s == strconv.Itoa(int(t)) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("acknowledgement type %q: want accept, release, reject, gap, renew or defer", s)
}

// The group configuration's keys, Kafka's names where Kafka has them.
const (
	ConfigAutoOffsetReset = "share.auto.offset.reset"
	ConfigLockDurationMs  = "share.record.lock.duration.ms"
	ConfigDeliveryLimit   = "share.delivery.count.limit"
	ConfigMaxFetchRecords = "share.max.fetch.records"
	ConfigMaxRecordLocks  = "share.partition.max.record.locks"
	ConfigDeadLetterTopic = "errors.deadletter.topic"
)

// ConfigKeys lists the group configuration's keys, in Map's order of
// presentation, each with what it means.
var ConfigKeys = []struct{ Key, Doc string }{
	{ConfigAutoOffsetReset, "where a partition's state starts when the group first reads it: latest or earliest"},
	{ConfigLockDurationMs, "how long an acquired record stays with its consumer without an acknowledgement (ms)"},
	{ConfigDeliveryLimit, "how many times a record is delivered before it is archived"},
	{ConfigMaxFetchRecords, "the most records one acquisition takes"},
	{ConfigMaxRecordLocks, "the most records of a partition in flight, from the oldest not yet acknowledged on"},
	{ConfigDeadLetterTopic, "the topic rejected records and those past the delivery limit are written to before they are archived (empty: none)"},
}

// The headers a record written to a dead-letter topic carries besides its
// own; every one starts with HeaderPrefix.
const (
	HeaderPrefix          = "sluice.dlt."
	HeaderSourceTopic     = "sluice.dlt.topic"
	HeaderSourcePartition = "sluice.dlt.partition"
	HeaderSourceOffset    = "sluice.dlt.offset"
	HeaderDeliveryCount   = "sluice.dlt.delivery.count"
	HeaderGroup           = "sluice.dlt.group"
	HeaderReason          = "sluice.dlt.reason"
)

// Config is a share group's configuration.
type Config struct {
	// AutoOffsetReset is where a partition's state starts when the group
	// first reads it: "latest" (default, as Kafka's) or "earliest".
	AutoOffsetReset string `json:"auto_offset_reset"`
	// LockDurationMs is how long an acquired record stays with its
	// consumer without an acknowledgement (30 s).
	LockDurationMs int64 `json:"lock_duration_ms"`
	// DeliveryLimit is how many times a record is delivered before it is
	// archived (5).
	DeliveryLimit int32 `json:"delivery_limit"`
	// MaxFetchRecords bounds one acquisition (500).
	MaxFetchRecords int32 `json:"max_fetch_records"`
	// MaxRecordLocks bounds a partition's in-flight window: the records
	// from the oldest not yet acknowledged on (2000).
	MaxRecordLocks int32 `json:"max_record_locks"`
	// DeadLetterTopic, when set, names the topic a record is written to
	// (once, with acks=all) when it is rejected or reaches the delivery
	// limit, before it counts as archived.
	DeadLetterTopic string `json:"dead_letter_topic,omitempty"`
}

// DefaultConfig returns the configuration of a group nobody configured.
func DefaultConfig() Config {
	return Config{AutoOffsetReset: "latest", LockDurationMs: 30_000, DeliveryLimit: 5, MaxFetchRecords: 500, MaxRecordLocks: 2000}
}

// Validate checks ranges.
func (c Config) Validate() error {
	switch {
	case c.AutoOffsetReset != "latest" && c.AutoOffsetReset != "earliest":
		return fmt.Errorf("%s=%q: want latest or earliest", ConfigAutoOffsetReset, c.AutoOffsetReset)
	case c.LockDurationMs < 1000 || c.LockDurationMs > int64(time.Hour/time.Millisecond):
		return fmt.Errorf("%s=%d: want 1000 to 3600000", ConfigLockDurationMs, c.LockDurationMs)
	case c.DeliveryLimit < 2 || c.DeliveryLimit > 10:
		return fmt.Errorf("%s=%d: want 2 to 10 (Kafka's range)", ConfigDeliveryLimit, c.DeliveryLimit)
	case c.MaxFetchRecords < 1 || c.MaxFetchRecords > c.MaxRecordLocks:
		return fmt.Errorf("%s=%d: want 1 to %s (%d)", ConfigMaxFetchRecords, c.MaxFetchRecords, ConfigMaxRecordLocks, c.MaxRecordLocks)
	case c.MaxRecordLocks < 100 || c.MaxRecordLocks > 10_000:
		return fmt.Errorf("%s=%d: want 100 to 10000", ConfigMaxRecordLocks, c.MaxRecordLocks)
	}
	if c.DeadLetterTopic != "" {
		if err := cluster.ValidateTopicName(c.DeadLetterTopic); err != nil {
			return fmt.Errorf("%s: %w", ConfigDeadLetterTopic, err)
		}
	}
	return nil
}

// Set sets one configuration value by its key.
func (c *Config) Set(key, value string) error {
	num := func(lo, hi int64) (int64, error) {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%s=%q: want an integer from %d to %d", key, value, lo, hi)
		}
		return n, nil
	}
	var err error
	var n int64
	switch key {
	case ConfigAutoOffsetReset:
		c.AutoOffsetReset = value
	case ConfigLockDurationMs:
		c.LockDurationMs, err = num(1000, int64(time.Hour/time.Millisecond))
	case ConfigDeliveryLimit:
		n, err = num(2, 10)
		c.DeliveryLimit = int32(n)
	case ConfigMaxFetchRecords:
		n, err = num(1, 10_000)
		c.MaxFetchRecords = int32(n)
	case ConfigMaxRecordLocks:
		n, err = num(100, 10_000)
		c.MaxRecordLocks = int32(n)
	case ConfigDeadLetterTopic:
		c.DeadLetterTopic = value
	default:
		known := make([]string, len(ConfigKeys))
		for i, k := range ConfigKeys {
			known[i] = k.Key
		}
		return fmt.Errorf("unknown share group configuration %q (known: %s)", key, strings.Join(known, ", "))
	}
	return err
}

// Map returns the configuration by key, as Set takes it.
func (c Config) Map() map[string]string {
	return map[string]string{
		ConfigAutoOffsetReset: c.AutoOffsetReset,
		ConfigLockDurationMs:  strconv.FormatInt(c.LockDurationMs, 10),
		ConfigDeliveryLimit:   strconv.Itoa(int(c.DeliveryLimit)),
		ConfigMaxFetchRecords: strconv.Itoa(int(c.MaxFetchRecords)),
		ConfigMaxRecordLocks:  strconv.Itoa(int(c.MaxRecordLocks)),
		ConfigDeadLetterTopic: c.DeadLetterTopic,
	}
}

// AcquireRequest asks for records of a topic for a consumer.
type AcquireRequest struct {
	// MemberID names the consumer; its acknowledgements must carry it.
	MemberID string `json:"member_id"`
	Topic    string `json:"topic"`
	// MaxRecords bounds the answer (0: the group's share.max.fetch.records,
	// which also caps it).
	MaxRecords int32 `json:"max_records,omitempty"`
	// WaitMs is how long to wait for records when none are available.
	WaitMs int32 `json:"wait_ms,omitempty"`
	// Partitions limits the acquisition to these partitions (none: every
	// partition of the topic).
	Partitions []int32 `json:"partitions,omitempty"`
	// Acks are the consumer's acknowledgements, applied (as an AckRequest
	// would) before the acquisition, in the same step: a consumer that
	// acknowledges what it took and asks for more makes one request.
	Acks []Ack `json:"acks,omitempty"`
}

// Acquired is a range of offsets of one partition acquired by a consumer,
// each delivered DeliveryCount times with this delivery.
type Acquired struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	FirstOffset   int64  `json:"first_offset"`
	LastOffset    int64  `json:"last_offset"`
	DeliveryCount int16  `json:"delivery_count"`
}

// AcquireResponse is what a consumer holds until LockUntilMs (Unix
// milliseconds; the coordinator's clock).
type AcquireResponse struct {
	Acquired    []Acquired `json:"acquired"`
	LockUntilMs int64      `json:"lock_until_ms,omitempty"`
	// AckResults are the outcomes of the request's Acks, a result per
	// partition (as AckResponse's Results).
	AckResults []AckResult `json:"ack_results,omitempty"`
}

// Ack acknowledges a range of offsets of one partition.
type Ack struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	FirstOffset int64   `json:"first_offset"`
	LastOffset  int64   `json:"last_offset"`
	Type        AckType `json:"type"`
	// Reason says why a record was rejected (for the dead-letter topic).
	Reason string `json:"reason,omitempty"`
	// NotBeforeMs is when a deferred record may be delivered (AckDefer).
	NotBeforeMs int64 `json:"not_before_ms,omitempty"`
}

// Extends reports whether b continues a: the next offsets of a's partition,
// acknowledged alike, so that the two make one range.
func (a Ack) Extends(b Ack) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && a.LastOffset+1 == b.FirstOffset && a.Type == b.Type && a.Reason == b.Reason &&
		a.NotBeforeMs == b.NotBeforeMs
}

// AckRequest acknowledges records of a consumer. Each partition's
// acknowledgements apply all or none.
type AckRequest struct {
	MemberID string `json:"member_id"`
	Acks     []Ack  `json:"acks"`
}

// AckResult is one partition's outcome.
type AckResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	ErrorCode int16  `json:"error_code,omitempty"`
	Error     string `json:"error,omitempty"`
}

// AckResponse has one result per partition acknowledged, and the group's
// lock duration (what a renewal gave).
type AckResponse struct {
	Results        []AckResult `json:"results"`
	LockDurationMs int64       `json:"lock_duration_ms,omitempty"`
}

// LeaveRequest releases every record a consumer holds.
type LeaveRequest struct {
	MemberID string `json:"member_id"`
}

// ConfigRequest sets configuration values of a group (creating it).
type ConfigRequest struct {
	Set map[string]string `json:"set"`
}

// ResetRequest moves a group's partitions of a topic (all when Partitions
// is empty) to the earliest, latest, by-time or given offset, dropping
// their in-flight state; it is the consumer groups' request. A group with
// records of the topic under lock refuses (NON_EMPTY_GROUP).
type ResetRequest = groups.ResetRequest

// DeleteOffsetsRequest is the body of POST
// /v1/share-groups/{group}/delete-offsets: the group's state of the topic's
// partitions is removed (Kafka's DeleteShareGroupOffsets), so that their
// next acquisition starts them again as share.auto.offset.reset says.
type DeleteOffsetsRequest struct {
	Topic string `json:"topic"`
}

// PartitionReset is one partition's new start offset.
type PartitionReset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// PartitionState describes a group's share-partition.
type PartitionState struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// StartOffset: every record before it is acknowledged or archived.
	StartOffset int64 `json:"start_offset"`
	// EndOffset: no record at or after it was delivered yet.
	EndOffset     int64 `json:"end_offset"`
	HighWatermark int64 `json:"high_watermark"`
	// Lag counts the records not yet acknowledged or archived: those in
	// flight and those from EndOffset to the high watermark.
	Lag int64 `json:"lag"`
	// Acquired are under a live lock; Available wait for a consumer.
	Acquired  int64 `json:"acquired"`
	Available int64 `json:"available"`
	// Delayed wait for their delivery time.
	Delayed int64 `json:"delayed,omitempty"`
	// Running totals since the partition's state was created.
	Accepted   int64 `json:"accepted"`
	Archived   int64 `json:"archived"`
	Deliveries int64 `json:"deliveries"`
	// DeadLetterPending are archived but not yet written to the
	// dead-letter topic.
	DeadLetterPending int64 `json:"dead_letter_pending,omitempty"`
}

// Description describes a share group.
type Description struct {
	Group      string            `json:"group"`
	Config     map[string]string `json:"config"`
	Members    []string          `json:"members"`
	Partitions []PartitionState  `json:"partitions"`
}

// Listing is one group of a list.
type Listing struct {
	Group   string `json:"group"`
	Topics  int    `json:"topics"`
	Members int    `json:"members"`
}

// ListResponse lists share groups.
type ListResponse struct {
	Groups []Listing `json:"groups"`
}

// TopicDelayMs returns a topic's delivery.delay.ms in a metadata snapshot
// (0 when it has none, or the topic is not there).
func TopicDelayMs(snap *cluster.Snapshot, topic string) int64 {
	if snap == nil {
		return 0
	}
	t, ok := snap.Topic(topic)
	if !ok {
		return 0
	}
	ms, err := strconv.ParseInt(t.Config[cluster.ConfigDeliveryDelayMs], 10, 64)
	if err != nil || ms < 0 {
		return 0
	}
	return ms
}

// DeadLetterHeaders are the headers a dead letter carries besides the
// record's own: where it came from, how often it was delivered, the group
// that gave up on it and why.
func DeadLetterHeaders(topic string, partition int32, offset int64, deliveryCount int, group, reason string) []record.RecordHeader {
	return []record.RecordHeader{
		{Key: HeaderSourceTopic, Value: []byte(topic)},
		{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(partition), 10)},
		{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, offset, 10)},
		{Key: HeaderDeliveryCount, Value: strconv.AppendInt(nil, int64(deliveryCount), 10)},
		{Key: HeaderGroup, Value: []byte(group)},
		{Key: HeaderReason, Value: []byte(reason)},
	}
}

// ByPartition groups acquired ranges by partition, in the order the
// partitions first appear, each partition's ranges in offset order.
func ByPartition(acquired []Acquired) [][]Acquired {
	var out [][]Acquired
	at := map[groups.TP]int{}
	for _, a := range acquired {
		k := groups.TP{Topic: a.Topic, Partition: a.Partition}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], a)
	}
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b Acquired) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	}
	return out
}

// Releases are acknowledgements giving every offset of the ranges back.
func Releases(ranges []Acquired) []Ack {
	out := make([]Ack, 0, len(ranges))
	for _, r := range ranges {
		out = append(out, Ack{Topic: r.Topic, Partition: r.Partition, FirstOffset: r.FirstOffset, LastOffset: r.LastOffset, Type: AckRelease})
	}
	return out
}
