package protocol

// What a produce answer says about the records it carried: the one table the
// frontend, the SDK's producer and the Kafka listener's lanes decide resends
// and outcomes by. It sits beside the error table and reads with it: whether
// a code is retriable is the error table's; whether the attempt wrote, and
// whether the answer settles the batch, are here.

// Appended is what one produce attempt did to the log.
type Appended int8

const (
	// AppendedNo: the leader refused before writing, or the request never
	// reached a leader. The records are not in the log from this attempt.
	AppendedNo Appended = iota
	// AppendedMaybe: no answer came (a lost connection, a timeout) or the
	// leader failed unexpectedly: the records may be in the log.
	AppendedMaybe
	// AppendedYes: the records are in the leader's log, whatever else the
	// answer says (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
	AppendedYes
)

// Outcome is what a produce answer with a code says about its batch.
type Outcome struct {
	Appended Appended
	// Settles: the answer decides the batch's outcome whatever an earlier
	// attempt did. A refusal for what the bytes are (every attempt of the
	// same bytes is refused the same way), or DUPLICATE_SEQUENCE_NUMBER (an
	// earlier attempt stored it).
	Settles bool
	// Split: the refusal is of one batch of the request (its bytes, size,
	// sequence or epoch), made before anything was written: in a request
	// joining several batches the others may be fine, and each is sent
	// again alone to get its own answer.
	Split bool
}

// outcomes lists the codes whose outcome is not the default: nothing
// appended, nothing settled, nothing to split.
var outcomes = map[Code]Outcome{
	UnknownServerError:           {Appended: AppendedMaybe},
	RequestTimedOut:              {Appended: AppendedMaybe},
	NetworkException:             {Appended: AppendedMaybe},
	NotEnoughReplicasAfterAppend: {Appended: AppendedYes},
	CorruptRecord:                {Settles: true, Split: true},
	InvalidRecord:                {Settles: true, Split: true},
	MessageTooLarge:              {Settles: true, Split: true},
	RecordListTooLarge:           {Settles: true, Split: true},
	DuplicateSequenceNumber:      {Settles: true, Split: true},
	InvalidTimestamp:             {Settles: true},
	InvalidRequiredAcks:          {Settles: true},
	InvalidRequest:               {Split: true},
	OutOfOrderSequenceNumber:     {Split: true},
	InvalidProducerEpoch:         {Split: true},
}

// Produce returns the outcome of a produce answer with c. A code this table
// does not know leaves the outcome open.
func (c Code) Produce() Outcome {
	if o, ok := outcomes[c]; ok {
		return o
	}
	if _, known := table[c]; !known {
		return Outcome{Appended: AppendedMaybe}
	}
	return Outcome{}
}

// Resend reports whether the same bytes sent again may succeed after an
// answer with c: a retriable code that does not settle the batch. A batch
// that may already be in the log is resent as well; with a producer id and
// sequence the leader answers a copy it holds with its first offsets, and
// without one the delivery is at least once.
func (c Code) Resend() bool { return c.Retriable() && !c.Produce().Settles }

// Open reports whether a failed attempt with c leaves the batch's outcome
// open when no time is left to try again: it may have been appended, or it
// failed only for want of time (a retriable code). A batch known appended or
// refused for good is not open.
func (c Code) Open() bool {
	o := c.Produce()
	return !o.Settles && o.Appended != AppendedYes && (c.Retriable() || o.Appended == AppendedMaybe)
}
