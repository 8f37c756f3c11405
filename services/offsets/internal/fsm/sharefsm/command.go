package sharefsm

import (
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/shares"
)

// Command is one operation on a share group, the body of an offsets log
// entry of type share (fsm.Command.Share); exactly one of its parts is
// set. NowMs is the proposer's clock: lock expiry is decided by it, so
// every replica decides alike.
type Command struct {
	Group   string             `json:"group"`
	NowMs   int64              `json:"now_ms"`
	Config  *shares.Config     `json:"config,omitempty"`
	Acquire *Acquire           `json:"acquire,omitempty"`
	Ack     *shares.AckRequest `json:"ack,omitempty"`
	Leave   string             `json:"leave,omitempty"`
	Reset   *Reset             `json:"reset,omitempty"`
	Delete  bool               `json:"delete,omitempty"`
	// The dead-letter writer's steps (sharecoord/deadletter.go).
	DeadLetterBegin *DeadLetterBegin `json:"dead_letter_begin,omitempty"`
	DeadLetterDone  *DeadLetterDone  `json:"dead_letter_done,omitempty"`
}

// Acquire acquires up to Max records of a topic for a consumer, from
// Partitions in their order. The proposer gives each partition's log start
// offset and high watermark as it last saw them.
type Acquire struct {
	MemberID   string   `json:"member_id"`
	Topic      string   `json:"topic"`
	Max        int32    `json:"max"`
	Partitions []Bounds `json:"partitions"`
}

// Reset moves partitions of a topic to new start offsets or, with
// Drop, removes the group's state of the topic's partitions (Kafka's
// DeleteShareGroupOffsets): the next acquisition starts them again as the
// group's share.auto.offset.reset says.
type Reset struct {
	Topic      string                  `json:"topic"`
	Partitions []shares.PartitionReset `json:"partitions"`
	Drop       bool                    `json:"drop,omitempty"`
}

// Bounds is a partition's log start offset and high watermark.
type Bounds struct {
	Partition     int32 `json:"partition"`
	LogStart      int64 `json:"log_start"`
	HighWatermark int64 `json:"high_watermark"`
}

// Result is a share operation's answer.
type Result struct {
	Acquire *shares.AcquireResponse
	Acks    []shares.AckResult
	// LockDurationMs is the group's lock duration (with Acks).
	LockDurationMs int64
	// DeadLetter is the batch DeadLetterBegin fixed (nil: nothing to write).
	DeadLetter *DeadLetterBatch
}

// validate checks the parts that do not depend on the state.
func (c *Command) validate() error {
	if err := groups.ValidateGroupID(c.Group); err != nil {
		return protocol.InvalidGroupID.Err("%v", err)
	}
	if err := c.oneOperation(); err != nil {
		return err
	}
	switch {
	case c.Config != nil:
		if err := c.Config.Validate(); err != nil {
			return protocol.InvalidConfig.Err("%v", err)
		}
	case c.Acquire != nil || c.Ack != nil:
		return c.validateTake()
	case c.Reset != nil:
		return c.Reset.validate()
	}
	return nil
}

// oneOperation checks that exactly one part is set (or an acquisition
// with its member's acknowledgements, which ride on it).
func (c *Command) oneOperation() error {
	n := 0
	for _, set := range []bool{c.Config != nil, c.Acquire != nil, c.Ack != nil, c.Leave != "", c.Reset != nil, c.Delete,
		c.DeadLetterBegin != nil, c.DeadLetterDone != nil} {
		if set {
			n++
		}
	}
	if c.Ack != nil && c.Acquire != nil {
		n-- // a consumer's acknowledgements ride on its next acquisition
		if c.Ack.MemberID != c.Acquire.MemberID {
			return protocol.InvalidRequest.Err("acknowledgements of member %q with an acquisition of member %q", c.Ack.MemberID, c.Acquire.MemberID)
		}
	}
	if n != 1 {
		return protocol.InvalidRequest.Err("a share operation has %d parts; it needs exactly one (or an acquisition and acknowledgements)", n)
	}
	return nil
}

// validateTake checks an acquisition and acknowledgements: a member each,
// a valid topic to acquire from.
func (c *Command) validateTake() error {
	if c.Acquire != nil {
		if c.Acquire.MemberID == "" {
			return protocol.UnknownMemberID.Err("an acquisition needs a member id")
		}
		if err := cluster.ValidateTopicName(c.Acquire.Topic); err != nil {
			return protocol.InvalidTopic.Err("%v", err)
		}
	}
	if c.Ack != nil && c.Ack.MemberID == "" {
		return protocol.UnknownMemberID.Err("an acknowledgement needs a member id")
	}
	return nil
}

// validate checks a reset: a valid topic, offsets not negative, none when
// it drops the topic's state.
func (r *Reset) validate() error {
	if err := cluster.ValidateTopicName(r.Topic); err != nil {
		return protocol.InvalidTopic.Err("%v", err)
	}
	if r.Drop && len(r.Partitions) > 0 {
		return protocol.InvalidRequest.Err("a reset that drops %s's state names no offsets", r.Topic)
	}
	for _, p := range r.Partitions {
		if p.Partition < 0 || p.Offset < 0 {
			return protocol.InvalidRequest.Err("%s-%d: negative partition or offset %d", r.Topic, p.Partition, p.Offset)
		}
	}
	return nil
}
