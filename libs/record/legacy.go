package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Message sets, the record format of Kafka before 0.11 (magic 0 and 1), are
// what Produce v0-v2 carries. A message set is a sequence of messages:
//
//	offset int64, size int32, then size bytes:
//	crc int32 (CRC-32 IEEE of what follows), magic int8, attributes int8,
//	timestamp int64 (magic 1 only), key and value (int32 length, -1: null)
//
// A compressed message (attributes' low 3 bits: gzip, snappy or lz4) is a
// wrapper whose value is the compressed message set of its inner messages.

// legacyMessageOverhead is the smallest message after its offset and size:
// crc, magic, attributes and the two lengths (magic 0).
const legacyMessageOverhead = 4 + 1 + 1 + 4 + 4

// FromMessageSet converts a produce request's message set into one
// RecordBatch v2 (base offset 0, no producer id), as Kafka's brokers convert
// the writes of old clients: the records in order with their keys, values
// and timestamps, compressed with the codec of the first compressed message
// (none if none is). A message of format v0 has no timestamp, nor has one of
// format v1 whose timestamp is -1: it gets nowMs. Every message's size and
// CRC are checked, and a compressed message's inner set decompresses to at
// most maxDecompressed bytes (<= 0: DefaultMaxDecompressedSize). A set
// that is empty, cut short or malformed is an error wrapping ErrCorrupt;
// lz4 in format v0 (whose frames Kafka 0.9 wrote with a wrong checksum) and
// zstd are refused.
func FromMessageSet(set []byte, nowMs int64, maxDecompressed int) ([]byte, error) {
	if maxDecompressed <= 0 {
		maxDecompressed = DefaultMaxDecompressedSize
	}
	c := legacyConverter{b: NewBuilder(CodecNone), now: nowMs, limit: maxDecompressed}
	if err := c.set(set, 0); err != nil {
		return nil, err
	}
	if c.b.Count() == 0 {
		return nil, fmt.Errorf("%w: a message set without messages", ErrCorrupt)
	}
	c.b.SetCodec(c.codec)
	batch, err := c.b.Build()
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), batch...), nil
}

// legacyConverter appends the messages of a set to a Builder.
type legacyConverter struct {
	b     *Builder
	codec Codec // of the first compressed message
	now   int64
	limit int // bytes the inner sets may decompress to, together
}

// set appends the messages of a message set; depth is 1 inside a
// compressed message, where another compressed one is not allowed.
func (c *legacyConverter) set(b []byte, depth int) error {
	for pos := 0; pos < len(b); {
		if len(b)-pos < 12 {
			return fmt.Errorf("%w: message at byte %d: %d bytes left, need 12 for its offset and size", ErrCorrupt, pos, len(b)-pos)
		}
		size := int(int32(binary.BigEndian.Uint32(b[pos+8:])))
		if size < legacyMessageOverhead || size > len(b)-pos-12 {
			return fmt.Errorf("%w: message at byte %d: size %d with %d bytes left", ErrCorrupt, pos, size, len(b)-pos-12)
		}
		if err := c.message(b[pos+12:pos+12+size], depth); err != nil {
			return fmt.Errorf("message at byte %d: %w", pos, err)
		}
		pos += 12 + size
	}
	return nil
}

// message appends one message (from its CRC on) or, for a compressed one,
// its inner messages.
func (c *legacyConverter) message(m []byte, depth int) error {
	if got, want := crc32.ChecksumIEEE(m[4:]), binary.BigEndian.Uint32(m); got != want {
		return fmt.Errorf("%w: CRC-32 %08x, the message says %08x", ErrCorrupt, got, want)
	}
	magic, attrs := int8(m[4]), m[5]
	p := 6
	ts := int64(-1)
	switch magic {
	case 0:
	case 1:
		if len(m) < legacyMessageOverhead+8 {
			return fmt.Errorf("%w: a message of format v1 of %d bytes", ErrCorrupt, len(m))
		}
		ts = int64(binary.BigEndian.Uint64(m[p:]))
		p += 8
	default:
		return fmt.Errorf("%w: magic %d in a message set", ErrCorrupt, magic)
	}
	key, p, err := legacyBytes(m, p, "key")
	if err != nil {
		return err
	}
	value, p, err := legacyBytes(m, p, "value")
	if err != nil {
		return err
	}
	if p != len(m) {
		return fmt.Errorf("%w: %d bytes after the value", ErrCorrupt, len(m)-p)
	}
	codec := Codec(attrs & 0x07)
	if codec == CodecNone {
		if ts < 0 {
			ts = c.now
		}
		c.b.Append(Record{Timestamp: ts, Key: key, Value: value})
		return nil
	}
	switch {
	case depth > 0:
		return fmt.Errorf("%w: a compressed message inside a compressed message", ErrCorrupt)
	case codec == CodecZstd || codec > CodecZstd:
		return fmt.Errorf("%w: compression codec %d in a message set (zstd needs RecordBatch v2, Produce v3 or later)", ErrCorrupt, codec)
	case codec == CodecLZ4 && magic == 0:
		return fmt.Errorf("%w: lz4 in message format v0 (a Kafka 0.9 client's) is not supported: use gzip or snappy, or a client of Kafka 0.10 or later", ErrCorrupt)
	}
	inner, err := decompress(codec, nil, value, c.limit)
	if err != nil {
		return err
	}
	c.limit -= len(inner)
	if c.codec == CodecNone {
		c.codec = codec
	}
	return c.set(inner, depth+1)
}

// legacyBytes reads an int32-length-prefixed field at m[p:]; -1 is null.
func legacyBytes(m []byte, p int, what string) ([]byte, int, error) {
	if len(m)-p < 4 {
		return nil, p, fmt.Errorf("%w: the %s's length runs past the message", ErrCorrupt, what)
	}
	n := int(int32(binary.BigEndian.Uint32(m[p:])))
	p += 4
	switch {
	case n == -1:
		return nil, p, nil
	case n < 0 || n > len(m)-p:
		return nil, p, fmt.Errorf("%w: a %s of %d bytes with %d left", ErrCorrupt, what, n, len(m)-p)
	}
	return m[p : p+n], p + n, nil
}
