package record

import "math/bits"

// Kafka's record fields use zigzag varints: a signed value is mapped to an
// unsigned one (0, -1, 1, -2 ... become 0, 1, 2, 3 ...) and written as
// unsigned LEB128, seven bits a byte, low bits first, the high bit of each
// byte saying another follows. A "varint" carries an int32 (at most 5 bytes),
// a "varlong" an int64 (at most 10 bytes). encoding/binary's Varint is the same
// encoding for 64 bits; these helpers add the 32-bit form and the strict
// length checks that Kafka applies.

const (
	maxVarintLen  = 5
	maxVarlongLen = 10
)

// zigzag32 maps a signed int32 to its zigzag unsigned form.
func zigzag32(v int32) uint32 { return uint32(v<<1) ^ uint32(v>>31) }

// zigzag64 maps a signed int64 to its zigzag unsigned form.
func zigzag64(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// varintSize is the number of bytes appendVarint writes for v.
func varintSize(v int32) int { return (bits.Len32(zigzag32(v)|1) + 6) / 7 }

// varlongSize is the number of bytes appendVarlong writes for v.
func varlongSize(v int64) int { return (bits.Len64(zigzag64(v)|1) + 6) / 7 }

// appendVarint appends v as a Kafka varint.
func appendVarint(dst []byte, v int32) []byte {
	u := zigzag32(v)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// appendVarlong appends v as a Kafka varlong.
func appendVarlong(dst []byte, v int64) []byte {
	u := zigzag64(v)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// readVarint decodes a Kafka varint from the start of b. It returns the value
// and the number of bytes read; n is 0 when b ends inside the varint and -1
// when the encoding is longer than 5 bytes or overflows 32 bits.
func readVarint(b []byte) (v int32, n int) {
	if len(b) > 0 && b[0] < 0x80 { // fast path: one byte
		u := uint32(b[0])
		return int32(u>>1) ^ -int32(u&1), 1
	}
	var u uint32
	for i := 0; i < maxVarintLen; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == maxVarintLen-1 && c > 0x0f {
			return 0, -1 // a continuation bit or bits past 32
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, -1 // unreachable: the last byte either ends or fails above
}

// readVarlong decodes a Kafka varlong from the start of b, with the same
// results as readVarint for a value of up to 10 bytes and 64 bits.
func readVarlong(b []byte) (v int64, n int) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint64(b[0])
		return int64(u>>1) ^ -int64(u&1), 1
	}
	var u uint64
	for i := 0; i < maxVarlongLen; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		if i == maxVarlongLen-1 && c > 0x01 {
			return 0, -1
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, -1
}
