package protocol

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a wire error code. The numbers follow Kafka's error codes where Kafka has
// an equivalent, so that operators who know Kafka read them without a table.
type Code int16

// The wire error codes. Every service maps its internal errors to one of these in
// one place (its handler), and every client maps them back with Code.Err.
const (
	UnknownServerError           Code = -1
	None                         Code = 0
	OffsetOutOfRange             Code = 1
	CorruptRecord                Code = 2
	UnknownTopicOrPartition      Code = 3
	InvalidFetchSize             Code = 4
	LeaderNotAvailable           Code = 5
	NotLeaderOrFollower          Code = 6
	RequestTimedOut              Code = 7
	MessageTooLarge              Code = 10
	NetworkException             Code = 13
	InvalidTopic                 Code = 17
	RecordListTooLarge           Code = 18
	NotEnoughReplicas            Code = 19
	NotEnoughReplicasAfterAppend Code = 20
	InvalidRequiredAcks          Code = 21
	InvalidTimestamp             Code = 32
	UnsupportedVersion           Code = 35
	TopicAlreadyExists           Code = 36
	InvalidPartitions            Code = 37
	InvalidReplicationFactor     Code = 38
	InvalidConfig                Code = 40
	NotController                Code = 41
	InvalidRequest               Code = 42
	PolicyViolation              Code = 44
	StorageError                 Code = 56
	FencedLeaderEpoch            Code = 74
	UnknownLeaderEpoch           Code = 75
	InvalidRecord                Code = 87
	StaleBrokerEpoch             Code = 77
	InvalidUpdateVersion         Code = 95
	ReassignmentInProgress       Code = 60
	InvalidReplicaAssignment     Code = 39
	NoReassignmentInProgress     Code = 85
	PreferredLeaderNotAvailable  Code = 80
	EligibleLeadersNotAvailable  Code = 83
	ElectionNotNeeded            Code = 84
	UnknownNode                  Code = 1002
	TooManyConnections           Code = 1003
	TopicAuthorizationFailed     Code = 29
	GroupAuthorizationFailed     Code = 30
	ClusterAuthorizationFailed   Code = 31
	SaslAuthenticationFailed     Code = 58
	ThrottlingQuotaExceeded      Code = 89
	BrokerNotAvailable           Code = 8
	UnknownAPI                   Code = 1000
	MalformedFrame               Code = 1001
	// Idempotent producers.
	OutOfOrderSequenceNumber Code = 45
	DuplicateSequenceNumber  Code = 46
	InvalidProducerEpoch     Code = 47
	UnknownProducerID        Code = 59
	// Consumer groups (the offsets service).
	NotCoordinator       Code = 16
	InvalidGroupID       Code = 24
	UnknownMemberID      Code = 25
	NonEmptyGroup        Code = 68
	GroupIDNotFound      Code = 69
	FencedMemberEpoch    Code = 110
	UnreleasedInstanceID Code = 111
	StaleMemberEpoch     Code = 113
	// Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat).
	IllegalGeneration         Code = 22
	InconsistentGroupProtocol Code = 23
	InvalidSessionTimeout     Code = 26
	RebalanceInProgress       Code = 27
	MemberIDRequired          Code = 79
	GroupMaxSizeReached       Code = 81
	FencedInstanceID          Code = 82
	GroupSubscribedToTopic    Code = 86
	UnsupportedAssignor       Code = 112
	// Kafka protocol answers.
	ReplicaNotAvailable                Code = 9
	CoordinatorNotAvailable            Code = 15
	UnsupportedSaslMechanism           Code = 33
	IllegalSaslState                   Code = 34
	UnsupportedForMessageFormat        Code = 43
	TransactionalIDAuthorizationFailed Code = 53
	SecurityDisabled                   Code = 54
	LogDirNotFound                     Code = 57
	InvalidPrincipalType               Code = 67
	OffsetNotAvailable                 Code = 78
	ResourceNotFound                   Code = 91
	DuplicateResource                  Code = 92
	UnacceptableCredential             Code = 93
	InvalidRegularExpression           Code = 128
	UnknownTopicID                     Code = 100
	UnsupportedEndpointType            Code = 115
)

// Transactions.
const (
	InvalidTxnState              Code = 48
	InvalidProducerIDMapping     Code = 49
	InvalidTransactionTimeout    Code = 50
	ConcurrentTransactions       Code = 51
	TransactionCoordinatorFenced Code = 52
	ProducerFenced               Code = 90
	TransactionalIDNotFound      Code = 105
	OperationNotAttempted        Code = 55
	UnstableOffsetCommit         Code = 88
)

// Share groups.
const (
	InvalidRecordState       Code = 121
	ShareSessionNotFound     Code = 122
	InvalidShareSessionEpoch Code = 123
)

// Info describes one wire error code.
type Info struct {
	Code      Code
	Name      string
	Retriable bool
	// Status is the HTTP status of an answer carrying the code, at every
	// service: retriable conditions of the cluster are 503 (504 for a
	// timeout, 429 for a quota), a conflict with the current state 409, a
	// bad request 400, a missing thing 404, a refused principal 403.
	Status      int
	Description string
}

// table is the one table of wire error codes.
var table = map[Code]Info{
	UnknownServerError:           {UnknownServerError, "UNKNOWN_SERVER_ERROR", false, http.StatusInternalServerError, "an unexpected error on the server"},
	None:                         {None, "NONE", false, http.StatusOK, "no error"},
	OffsetOutOfRange:             {OffsetOutOfRange, "OFFSET_OUT_OF_RANGE", false, http.StatusNotFound, "the requested offset is outside the range the partition holds"},
	CorruptRecord:                {CorruptRecord, "CORRUPT_RECORD", true, http.StatusBadRequest, "a record batch failed its CRC or length checks"},
	UnknownTopicOrPartition:      {UnknownTopicOrPartition, "UNKNOWN_TOPIC_OR_PARTITION", true, http.StatusNotFound, "this node holds no such topic or partition"},
	InvalidFetchSize:             {InvalidFetchSize, "INVALID_FETCH_SIZE", false, http.StatusBadRequest, "the fetch size is not positive or is too large"},
	LeaderNotAvailable:           {LeaderNotAvailable, "LEADER_NOT_AVAILABLE", true, http.StatusServiceUnavailable, "the partition has no leader right now"},
	NotLeaderOrFollower:          {NotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER", true, http.StatusServiceUnavailable, "this node is not the partition's leader; refresh metadata"},
	RequestTimedOut:              {RequestTimedOut, "REQUEST_TIMED_OUT", true, http.StatusGatewayTimeout, "the request did not complete within its timeout"},
	BrokerNotAvailable:           {BrokerNotAvailable, "BROKER_NOT_AVAILABLE", true, http.StatusServiceUnavailable, "the storage node is not available"},
	MessageTooLarge:              {MessageTooLarge, "MESSAGE_TOO_LARGE", false, http.StatusRequestEntityTooLarge, "a record batch is larger than the allowed maximum"},
	NetworkException:             {NetworkException, "NETWORK_EXCEPTION", true, http.StatusServiceUnavailable, "the connection closed before a response arrived"},
	InvalidTopic:                 {InvalidTopic, "INVALID_TOPIC_EXCEPTION", false, http.StatusBadRequest, "the topic name is not valid"},
	RecordListTooLarge:           {RecordListTooLarge, "RECORD_LIST_TOO_LARGE", false, http.StatusRequestEntityTooLarge, "the request's records exceed the allowed size"},
	NotEnoughReplicas:            {NotEnoughReplicas, "NOT_ENOUGH_REPLICAS", true, http.StatusServiceUnavailable, "fewer in-sync replicas than min.insync.replicas; nothing was appended"},
	NotEnoughReplicasAfterAppend: {NotEnoughReplicasAfterAppend, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true, http.StatusServiceUnavailable, "the records were appended but too few replicas acknowledged them"},
	InvalidRequiredAcks:          {InvalidRequiredAcks, "INVALID_REQUIRED_ACKS", false, http.StatusBadRequest, "acks must be none (0), leader (1) or all (-1)"},
	InvalidTimestamp:             {InvalidTimestamp, "INVALID_TIMESTAMP", false, http.StatusBadRequest, "a record timestamp is out of range"},
	UnsupportedVersion:           {UnsupportedVersion, "UNSUPPORTED_VERSION", false, http.StatusBadRequest, "this API version is not supported"},
	TopicAlreadyExists:           {TopicAlreadyExists, "TOPIC_ALREADY_EXISTS", false, http.StatusConflict, "a topic with this name already exists"},
	InvalidPartitions:            {InvalidPartitions, "INVALID_PARTITIONS", false, http.StatusBadRequest, "the partition count is not valid"},
	InvalidReplicationFactor:     {InvalidReplicationFactor, "INVALID_REPLICATION_FACTOR", false, http.StatusBadRequest, "the replication factor is not valid for this cluster"},
	InvalidConfig:                {InvalidConfig, "INVALID_CONFIG", false, http.StatusBadRequest, "a configuration value is not valid"},
	NotController:                {NotController, "NOT_CONTROLLER", true, http.StatusServiceUnavailable, "this metadata member is not the leader"},
	InvalidRequest:               {InvalidRequest, "INVALID_REQUEST", false, http.StatusBadRequest, "the request is malformed"},
	PolicyViolation:              {PolicyViolation, "POLICY_VIOLATION", false, http.StatusBadRequest, "the request violates a cluster policy"},
	StorageError:                 {StorageError, "KAFKA_STORAGE_ERROR", true, http.StatusServiceUnavailable, "the storage node failed to read or write its disk"},
	FencedLeaderEpoch:            {FencedLeaderEpoch, "FENCED_LEADER_EPOCH", true, http.StatusServiceUnavailable, "the leader epoch in the request is older than the current one"},
	UnknownLeaderEpoch:           {UnknownLeaderEpoch, "UNKNOWN_LEADER_EPOCH", true, http.StatusServiceUnavailable, "the leader epoch in the request is newer than this node knows"},
	StaleBrokerEpoch:             {StaleBrokerEpoch, "STALE_BROKER_EPOCH", false, http.StatusConflict, "the storage node's registration epoch is older than the current one; register again"},
	InvalidUpdateVersion:         {InvalidUpdateVersion, "INVALID_UPDATE_VERSION", false, http.StatusConflict, "the partition epoch in the request is not the current one"},
	InvalidReplicaAssignment:     {InvalidReplicaAssignment, "INVALID_REPLICA_ASSIGNMENT", false, http.StatusBadRequest, "the replica list is not valid for the partition"},
	ReassignmentInProgress:       {ReassignmentInProgress, "REASSIGNMENT_IN_PROGRESS", false, http.StatusConflict, "the partition is already being reassigned; wait for it or cancel it"},
	NoReassignmentInProgress:     {NoReassignmentInProgress, "NO_REASSIGNMENT_IN_PROGRESS", false, http.StatusConflict, "the partition is not being reassigned"},
	PreferredLeaderNotAvailable:  {PreferredLeaderNotAvailable, "PREFERRED_LEADER_NOT_AVAILABLE", true, http.StatusServiceUnavailable, "the preferred replica is not alive or not in sync"},
	EligibleLeadersNotAvailable:  {EligibleLeadersNotAvailable, "ELIGIBLE_LEADERS_NOT_AVAILABLE", true, http.StatusServiceUnavailable, "no live replica may lead"},
	ElectionNotNeeded:            {ElectionNotNeeded, "ELECTION_NOT_NEEDED", false, http.StatusConflict, "the partition already has the leader the election would choose"},
	UnknownNode:                  {UnknownNode, "UNKNOWN_NODE", false, http.StatusNotFound, "no storage node with this id is registered; register first"},
	TopicAuthorizationFailed:     {TopicAuthorizationFailed, "TOPIC_AUTHORIZATION_FAILED", false, http.StatusForbidden, "the principal may not do this on the topic"},
	GroupAuthorizationFailed:     {GroupAuthorizationFailed, "GROUP_AUTHORIZATION_FAILED", false, http.StatusForbidden, "the principal may not use consumer groups"},
	ClusterAuthorizationFailed:   {ClusterAuthorizationFailed, "CLUSTER_AUTHORIZATION_FAILED", false, http.StatusForbidden, "the operation needs an admin principal"},
	SaslAuthenticationFailed:     {SaslAuthenticationFailed, "SASL_AUTHENTICATION_FAILED", false, http.StatusUnauthorized, "no valid credentials: send Authorization: Bearer with a principal's token"},
	TooManyConnections:           {TooManyConnections, "TOO_MANY_CONNECTIONS", false, http.StatusTooManyRequests, "the client's address has as many connections open as the server allows; close some"},
	InvalidRecord:                {InvalidRecord, "INVALID_RECORD", false, http.StatusBadRequest, "a record in the batch is not valid"},
	ThrottlingQuotaExceeded:      {ThrottlingQuotaExceeded, "THROTTLING_QUOTA_EXCEEDED", true, http.StatusTooManyRequests, "a quota was exceeded; retry later"},
	UnknownAPI:                   {UnknownAPI, "UNKNOWN_API", false, http.StatusBadRequest, "the API key is not known to this server"},
	MalformedFrame:               {MalformedFrame, "MALFORMED_FRAME", false, http.StatusBadRequest, "the frame could not be decoded"},
	OutOfOrderSequenceNumber:     {OutOfOrderSequenceNumber, "OUT_OF_ORDER_SEQUENCE_NUMBER", false, http.StatusConflict, "the batch's sequence is not the next one the leader expects from this producer; an earlier batch was lost"},
	DuplicateSequenceNumber:      {DuplicateSequenceNumber, "DUPLICATE_SEQUENCE_NUMBER", false, http.StatusConflict, "the batch is a duplicate older than the ones the leader remembers"},
	InvalidProducerEpoch:         {InvalidProducerEpoch, "INVALID_PRODUCER_EPOCH", false, http.StatusConflict, "the producer epoch is older than the one the leader knows (a newer instance took over)"},
	UnknownProducerID:            {UnknownProducerID, "UNKNOWN_PRODUCER_ID", false, http.StatusConflict, "the leader has no state for this producer id and the batch does not start a sequence"},
	NotCoordinator:               {NotCoordinator, "NOT_COORDINATOR", true, http.StatusServiceUnavailable, "this offsets replica is not the group coordinator and could not forward; try another"},
	InvalidGroupID:               {InvalidGroupID, "INVALID_GROUP_ID", false, http.StatusBadRequest, "the group id is not valid"},
	UnknownMemberID:              {UnknownMemberID, "UNKNOWN_MEMBER_ID", false, http.StatusConflict, "the member is not in the group (it left or its session expired); drop its partitions and join again"},
	NonEmptyGroup:                {NonEmptyGroup, "NON_EMPTY_GROUP", false, http.StatusConflict, "the group has active members; the operation needs it empty"},
	GroupIDNotFound:              {GroupIDNotFound, "GROUP_ID_NOT_FOUND", false, http.StatusNotFound, "no such group"},
	FencedMemberEpoch:            {FencedMemberEpoch, "FENCED_MEMBER_EPOCH", false, http.StatusConflict, "the member epoch is not one the coordinator gave; drop its partitions and join again"},
	UnreleasedInstanceID:         {UnreleasedInstanceID, "UNRELEASED_INSTANCE_ID", false, http.StatusConflict, "a member with this group.instance.id is still in the group; it must leave first"},
	StaleMemberEpoch:             {StaleMemberEpoch, "STALE_MEMBER_EPOCH", false, http.StatusConflict, "the member does not own a partition it committed; its assignment changed"},
	IllegalGeneration:            {IllegalGeneration, "ILLEGAL_GENERATION", false, http.StatusConflict, "the generation is not the group's current one; join again"},
	InconsistentGroupProtocol:    {InconsistentGroupProtocol, "INCONSISTENT_GROUP_PROTOCOL", false, http.StatusConflict, "the member's protocol type or protocols do not match the group's"},
	InvalidSessionTimeout:        {InvalidSessionTimeout, "INVALID_SESSION_TIMEOUT", false, http.StatusBadRequest, "the session timeout is outside the coordinator's allowed range"},
	RebalanceInProgress:          {RebalanceInProgress, "REBALANCE_IN_PROGRESS", false, http.StatusConflict, "the group is rebalancing; join again"},
	MemberIDRequired:             {MemberIDRequired, "MEMBER_ID_REQUIRED", false, http.StatusConflict, "join again with the member id in this answer"},
	GroupMaxSizeReached:          {GroupMaxSizeReached, "GROUP_MAX_SIZE_REACHED", false, http.StatusConflict, "the group has as many members as the coordinator allows"},
	FencedInstanceID:             {FencedInstanceID, "FENCED_INSTANCE_ID", false, http.StatusConflict, "another member joined with this group.instance.id"},
	GroupSubscribedToTopic:       {GroupSubscribedToTopic, "GROUP_SUBSCRIBED_TO_TOPIC", false, http.StatusConflict, "the group's members read the topic; its offsets cannot be deleted"},
	UnsupportedAssignor:          {UnsupportedAssignor, "UNSUPPORTED_ASSIGNOR", false, http.StatusBadRequest, "the coordinator has no assignor of this name"},

	ReplicaNotAvailable:                {ReplicaNotAvailable, "REPLICA_NOT_AVAILABLE", true, http.StatusServiceUnavailable, "the replica is not available on this node"},
	CoordinatorNotAvailable:            {CoordinatorNotAvailable, "COORDINATOR_NOT_AVAILABLE", true, http.StatusServiceUnavailable, "the coordinator (producer ids, groups) is not available right now"},
	UnsupportedSaslMechanism:           {UnsupportedSaslMechanism, "UNSUPPORTED_SASL_MECHANISM", false, http.StatusBadRequest, "the listener does not offer this SASL mechanism"},
	IllegalSaslState:                   {IllegalSaslState, "ILLEGAL_SASL_STATE", false, http.StatusBadRequest, "a SASL request out of sequence"},
	UnsupportedForMessageFormat:        {UnsupportedForMessageFormat, "UNSUPPORTED_FOR_MESSAGE_FORMAT", false, http.StatusBadRequest, "record batches must be RecordBatch v2 (magic 2)"},
	TransactionalIDAuthorizationFailed: {TransactionalIDAuthorizationFailed, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false, http.StatusForbidden, "transactional producers are not supported"},
	SecurityDisabled:                   {SecurityDisabled, "SECURITY_DISABLED", false, http.StatusBadRequest, "authorization is off on this listener"},
	LogDirNotFound:                     {LogDirNotFound, "LOG_DIR_NOT_FOUND", false, http.StatusNotFound, "no such log directory"},
	InvalidPrincipalType:               {InvalidPrincipalType, "INVALID_PRINCIPAL_TYPE", false, http.StatusBadRequest, "principals are named User:NAME"},
	OffsetNotAvailable:                 {OffsetNotAvailable, "OFFSET_NOT_AVAILABLE", true, http.StatusServiceUnavailable, "the offset is not available yet (a leader still catching up)"},
	ResourceNotFound:                   {ResourceNotFound, "RESOURCE_NOT_FOUND", false, http.StatusNotFound, "no such resource"},
	DuplicateResource:                  {DuplicateResource, "DUPLICATE_RESOURCE", false, http.StatusBadRequest, "a request names the same resource twice"},
	UnacceptableCredential:             {UnacceptableCredential, "UNACCEPTABLE_CREDENTIAL", false, http.StatusBadRequest, "the credential does not meet the requirements"},
	InvalidRegularExpression:           {InvalidRegularExpression, "INVALID_REGULAR_EXPRESSION", false, http.StatusBadRequest, "the subscription's regular expression does not compile"},
	UnknownTopicID:                     {UnknownTopicID, "UNKNOWN_TOPIC_ID", true, http.StatusNotFound, "no topic has this id"},
	UnsupportedEndpointType:            {UnsupportedEndpointType, "UNSUPPORTED_ENDPOINT_TYPE", false, http.StatusBadRequest, "this endpoint type is not served"},

	InvalidTxnState:              {InvalidTxnState, "INVALID_TXN_STATE", false, http.StatusConflict, "the producer's transaction is not in a state that allows this"},
	InvalidProducerIDMapping:     {InvalidProducerIDMapping, "INVALID_PRODUCER_ID_MAPPING", false, http.StatusConflict, "the producer id is not the transactional id's"},
	InvalidTransactionTimeout:    {InvalidTransactionTimeout, "INVALID_TRANSACTION_TIMEOUT", false, http.StatusBadRequest, "the transaction timeout is above the coordinator's maximum"},
	ConcurrentTransactions:       {ConcurrentTransactions, "CONCURRENT_TRANSACTIONS", true, http.StatusServiceUnavailable, "the producer's previous transaction is still being completed; retry"},
	TransactionCoordinatorFenced: {TransactionCoordinatorFenced, "TRANSACTION_COORDINATOR_FENCED", false, http.StatusConflict, "a newer transaction coordinator took over"},
	ProducerFenced:               {ProducerFenced, "PRODUCER_FENCED", false, http.StatusConflict, "a newer producer session with this transactional id took over"},
	TransactionalIDNotFound:      {TransactionalIDNotFound, "TRANSACTIONAL_ID_NOT_FOUND", false, http.StatusNotFound, "no such transactional id"},
	UnstableOffsetCommit:         {UnstableOffsetCommit, "UNSTABLE_OFFSET_COMMIT", true, http.StatusServiceUnavailable, "an open transaction holds offsets of the group for this partition; retry"},
	OperationNotAttempted:        {OperationNotAttempted, "OPERATION_NOT_ATTEMPTED", false, http.StatusConflict, "not attempted: another part of the request was refused"},

	InvalidRecordState:       {InvalidRecordState, "INVALID_RECORD_STATE", false, http.StatusConflict, "the record is not acquired by this consumer (never acquired, already acknowledged, another consumer's, or its lock expired)"},
	ShareSessionNotFound:     {ShareSessionNotFound, "SHARE_SESSION_NOT_FOUND", true, http.StatusNotFound, "the broker has no share session of this member: open a new one"},
	InvalidShareSessionEpoch: {InvalidShareSessionEpoch, "INVALID_SHARE_SESSION_EPOCH", false, http.StatusConflict, "the share session epoch is not the broker's: open a new session"},
}

// Info returns the table entry of c; unknown codes get a generic entry.
func (c Code) Info() Info {
	if i, ok := table[c]; ok {
		return i
	}
	return Info{Code: c, Name: fmt.Sprintf("UNKNOWN_CODE_%d", int16(c)), Status: http.StatusInternalServerError,
		Description: "an error code this client does not know"}
}

// String returns the code's name.
func (c Code) String() string { return c.Info().Name }

// Retriable reports whether a request that failed with c may succeed if retried,
// perhaps after refreshing metadata.
func (c Code) Retriable() bool { return c.Info().Retriable }

// HTTPStatus is the HTTP status of an answer carrying c.
func (c Code) HTTPStatus() int { return c.Info().Status }

// Codes returns every known code, for documentation and tests.
func Codes() []Info {
	out := make([]Info, 0, len(table))
	for _, i := range table {
		out = append(out, i)
	}
	return out
}

// Error is an error carrying a wire code and a message for people.
type Error struct {
	Code    Code
	Message string
	// Status is the HTTP status the answering service gave, kept when an
	// answer is relayed; 0 means the code's own (Code.HTTPStatus).
	Status int
}

// Err builds an *Error with a message; None gives nil.
func (c Code) Err(format string, args ...any) error {
	if c == None {
		return nil
	}
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// MessageOf returns err's text for a wire answer whose code travels on its
// own: the message of an *Error without the code's name in front.
func MessageOf(err error) string {
	if pe, ok := err.(*Error); ok && pe.Message != "" {
		return pe.Message
	}
	return err.Error()
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is makes errors.Is match any *Error with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// HTTPStatusOf returns the HTTP status of an answer carrying err: the status
// an *Error in its chain was answered with, else its code's; 500 for an error
// without a code.
func HTTPStatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		if e.Status != 0 {
			return e.Status
		}
		return e.Code.HTTPStatus()
	}
	if err == nil {
		return http.StatusOK
	}
	return http.StatusInternalServerError
}

// CodeOf returns the wire code of err: None for nil, the code of an *Error in
// its chain, and UnknownServerError otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return None
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return UnknownServerError
}
