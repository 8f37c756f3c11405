package record

// Record is one record of a batch: what a producer appends to a Builder and
// what an Iterator yields.
//
// A nil Key or Value is Kafka's null and is distinct from an empty, non-nil
// one; both survive a round trip through Builder and Iterator.
type Record struct {
	// Offset is the record's absolute offset in its partition. The Iterator
	// sets it (base offset + offset delta); the Builder ignores it, since a
	// producer's records are numbered 0, 1, 2 ... and the leader stamps the
	// base offset.
	Offset int64
	// Timestamp is milliseconds since the Unix epoch: the producer's create
	// time, or the batch's max timestamp when the broker set log-append time.
	Timestamp int64
	// Key is the record's key, nil for a null key.
	Key []byte
	// Value is the record's payload, nil for a null value (a tombstone).
	Value []byte
	// Headers are the record's headers, in order; keys may repeat.
	Headers []RecordHeader
}

// RecordHeader is one key/value header of a record. Kafka's header keys are
// never null; a nil Value is a null header value.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Each record in the records section is:
//
//	length         varint  (bytes of everything after this field)
//	attributes     int8    (unused, 0)
//	timestampDelta varlong (from the batch's base timestamp)
//	offsetDelta    varint  (from the batch's base offset)
//	keyLength      varint  (-1 for a null key)
//	key            bytes
//	valueLength    varint  (-1 for a null value)
//	value          bytes
//	headerCount    varint
//	headers        keyLength varint, key, valueLength varint (-1 null), value
//
// minRecordSize is the smallest encoding: every varint one byte, no data.
const minRecordSize = 7

// bytesFieldSize is the encoded size of a nullable byte field.
func bytesFieldSize(b []byte) int {
	if b == nil {
		return 1 // varint -1
	}
	return varintSize(int32(len(b))) + len(b)
}

// bodySize is the size of a record's encoding after its length varint.
func bodySize(r *Record, offsetDelta int32, timestampDelta int64) int {
	n := 1 + varlongSize(timestampDelta) + varintSize(offsetDelta) +
		bytesFieldSize(r.Key) + bytesFieldSize(r.Value) + varintSize(int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		n += varintSize(int32(len(h.Key))) + len(h.Key) + bytesFieldSize(h.Value)
	}
	return n
}

// appendBytesField appends a nullable byte field: its length (-1 when nil)
// and its bytes.
func appendBytesField(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	dst = appendVarint(dst, int32(len(b)))
	return append(dst, b...)
}

// appendRecord appends r's encoding, body size first, as computed by
// bodySize with the same deltas.
func appendRecord(dst []byte, r *Record, body int, offsetDelta int32, timestampDelta int64) []byte {
	dst = appendVarint(dst, int32(body))
	dst = append(dst, 0) // attributes
	dst = appendVarlong(dst, timestampDelta)
	dst = appendVarint(dst, offsetDelta)
	dst = appendBytesField(dst, r.Key)
	dst = appendBytesField(dst, r.Value)
	dst = appendVarint(dst, int32(len(r.Headers)))
	for i := range r.Headers {
		h := &r.Headers[i]
		dst = appendVarint(dst, int32(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendBytesField(dst, h.Value)
	}
	return dst
}
