package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/klauspost/compress/snappy"
)

// Kafka's Java client writes snappy through snappy-java's SnappyOutputStream,
// whose xerial framing is:
//
//	magic        8 bytes  0x82 "SNAPPY" 0x00
//	version      int32    1
//	compatible   int32    1
//	then chunks: int32 compressed length, a raw snappy block of up to 32 KiB
//	             of input
//
// (all integers big endian). librdkafka and franz-go write one raw snappy
// block instead. Like snappy-java, the reader takes input that starts with the
// magic as framed and anything else as one raw block.

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialVersion    = 1
	xerialCompatible = 1
	// xerialChunk is the input size of one chunk, snappy-java's default.
	xerialChunk = 32 << 10
)

// compressSnappy appends src to dst in xerial framing.
func compressSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, xerialVersion)
	dst = binary.BigEndian.AppendUint32(dst, xerialCompatible)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialChunk)]
		src = src[len(chunk):]
		lenAt := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		dst = appendSnappyBlock(dst, chunk)
		binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	}
	return dst
}

// appendSnappyBlock appends one raw snappy block encoding src.
func appendSnappyBlock(dst, src []byte) []byte {
	need := snappy.MaxEncodedLen(len(src)) // chunks are small: never -1
	dst = growLen(dst, need)
	n := len(snappy.Encode(dst[len(dst)-need:], src))
	return dst[:len(dst)-need+n]
}

// decompressSnappy appends the decompressed form of src, xerial-framed or
// raw, to dst, stopping with errOverLimit past limit bytes.
func decompressSnappy(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderSize || !bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
		return decodeSnappyBlock(dst, src, limit)
	}
	start := len(dst)
	rest := src[xerialHeaderSize:]
	for len(rest) > 0 {
		if len(rest) < 4 {
			return dst, fmt.Errorf("%w: snappy: %d stray bytes after the last xerial chunk", ErrCorrupt, len(rest))
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return dst, fmt.Errorf("%w: snappy: xerial chunk of %d bytes, %d left", ErrCorrupt, n, len(rest))
		}
		var err error
		if dst, err = decodeSnappyBlock(dst, rest[:n], limit-(len(dst)-start)); err != nil {
			return dst, err
		}
		rest = rest[n:]
	}
	return dst, nil
}

// decodeSnappyBlock appends one decoded raw snappy block to dst, checking the
// block's declared length against limit before decoding anything.
func decodeSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	if n > limit {
		return dst, errOverLimit
	}
	dst = growLen(dst, n)
	out, err := snappy.Decode(dst[len(dst)-n:], block)
	if err != nil {
		return dst[:len(dst)-n], fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	if len(out) != n { // cannot happen with a sized destination; cheap to check
		return dst[:len(dst)-n], fmt.Errorf("%w: snappy: block decoded to %d bytes, declared %d", ErrCorrupt, len(out), n)
	}
	return dst, nil
}

// growLen extends dst by n bytes (contents unspecified), reallocating only
// when the capacity is short.
func growLen(dst []byte, n int) []byte {
	return slices.Grow(dst, n)[:len(dst)+n]
}
