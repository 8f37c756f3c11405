package raftstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// codecVersion is the first byte of every stored log entry.
const codecVersion = 1

// fixedLen is the size of the fixed part of an entry: version, index, term,
// type and the append time in Unix nanoseconds.
const fixedLen = 1 + 8 + 8 + 1 + 8

// encodeLog serialises l as
//
//	version u8 | index u64 | term u64 | type u8 | appended_at i64 |
//	uvarint len | data | uvarint len | extensions
func encodeLog(l *raft.Log) []byte {
	buf := make([]byte, fixedLen, fixedLen+2*binary.MaxVarintLen64+len(l.Data)+len(l.Extensions))
	buf[0] = codecVersion
	binary.BigEndian.PutUint64(buf[1:], l.Index)
	binary.BigEndian.PutUint64(buf[9:], l.Term)
	buf[17] = byte(l.Type)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.BigEndian.PutUint64(buf[18:], uint64(at))
	buf = binary.AppendUvarint(buf, uint64(len(l.Data)))
	buf = append(buf, l.Data...)
	buf = binary.AppendUvarint(buf, uint64(len(l.Extensions)))
	buf = append(buf, l.Extensions...)
	return buf
}

// decodeLog parses an entry written by encodeLog into l, copying every byte
// slice so that l stays valid after the bbolt transaction ends.
func decodeLog(b []byte, l *raft.Log) error {
	if len(b) < fixedLen {
		return fmt.Errorf("%w: entry of %d bytes is shorter than its header", ErrCorruptEntry, len(b))
	}
	if b[0] != codecVersion {
		return fmt.Errorf("%w: unknown entry version %d", ErrCorruptEntry, b[0])
	}
	l.Index = binary.BigEndian.Uint64(b[1:])
	l.Term = binary.BigEndian.Uint64(b[9:])
	l.Type = raft.LogType(b[17])
	at := int64(binary.BigEndian.Uint64(b[18:]))
	l.AppendedAt = time.Time{}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	rest := b[fixedLen:]
	var err error
	if l.Data, rest, err = readBytes(rest, "data"); err != nil {
		return err
	}
	if l.Extensions, rest, err = readBytes(rest, "extensions"); err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptEntry, len(rest))
	}
	return nil
}

// readBytes reads one uvarint-prefixed field and returns a copy of it (nil
// when empty) and the remaining input.
func readBytes(b []byte, field string) ([]byte, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, nil, fmt.Errorf("%w: bad %s length", ErrCorruptEntry, field)
	}
	b = b[w:]
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: %s length %d exceeds the %d bytes left", ErrCorruptEntry, field, n, len(b))
	}
	if n == 0 {
		return nil, b, nil
	}
	out := make([]byte, n)
	copy(out, b[:n])
	return out, b[n:], nil
}

func uint64Key(v uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], v)
	return k[:]
}

func keyUint64(k []byte) uint64 { return binary.BigEndian.Uint64(k) }
