package protocol

// Answer is the kind of Kafka answer a code is given in. Kafka clients
// react to a code by where it comes: a leader they cannot reach is a
// metadata refresh and a retry in a produce or fetch answer, a coordinator
// they cannot reach a new look-up of the coordinator in a group or
// transaction answer.
type Answer int

const (
	// AdminAnswer is every answer not below: admin requests, Metadata,
	// ApiVersions and the like.
	AdminAnswer Answer = iota
	// DataAnswer is a partition's part of Produce, Fetch, ListOffsets and
	// OffsetForLeaderEpoch.
	DataAnswer
	// CoordinatorAnswer is an answer of the group, transaction or share
	// group coordinator (the offsets service behind a frontend).
	CoordinatorAnswer
	answers
)

// kafkaCodes is the one table of the Kafka codes that differ from the
// Sluice code, by kind of answer: Sluice's own codes (1000 and up), which
// Kafka does not have, and the conditions Kafka clients expect under
// another code in data and coordinator answers. Every other code is given
// as it is: Sluice's codes are Kafka's numbers.
var kafkaCodes = map[Code][answers]Code{
	// A storage node or offsets replica that cannot be reached, or lost
	// its leadership meanwhile: the client finds the leader or the
	// coordinator again and retries.
	BrokerNotAvailable: {BrokerNotAvailable, NotLeaderOrFollower, CoordinatorNotAvailable},
	NetworkException:   {NetworkException, NotLeaderOrFollower, CoordinatorNotAvailable},
	UnknownNode:        {BrokerNotAvailable, NotLeaderOrFollower, CoordinatorNotAvailable},
	RequestTimedOut:    {RequestTimedOut, RequestTimedOut, CoordinatorNotAvailable},
	// An offsets Raft group without a leader: its coordinator is not there.
	LeaderNotAvailable: {LeaderNotAvailable, LeaderNotAvailable, CoordinatorNotAvailable},
	UnknownServerError: {UnknownServerError, UnknownServerError, CoordinatorNotAvailable},
	// A connection refused for the per-address limit: back off and retry.
	TooManyConnections: {ThrottlingQuotaExceeded, NotLeaderOrFollower, CoordinatorNotAvailable},
	// Failures of Sluice's own frames, which a Kafka client never sent.
	UnknownAPI:     {UnknownServerError, UnknownServerError, UnknownServerError},
	MalformedFrame: {UnknownServerError, UnknownServerError, UnknownServerError},
}

// Kafka is the Kafka error code a client is given for c in an answer of
// kind a: kafkaCodes' entry, or c itself.
func (c Code) Kafka(a Answer) int16 {
	if row, ok := kafkaCodes[c]; ok {
		return int16(row[a])
	}
	if c >= 1000 {
		return int16(UnknownServerError)
	}
	return int16(c)
}

// KafkaOf is the Kafka error code of err in an answer of kind a (0 for
// nil): Kafka of its code.
func KafkaOf(err error, a Answer) int16 {
	if err == nil {
		return 0
	}
	return CodeOf(err).Kafka(a)
}
