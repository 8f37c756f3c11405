package tier

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"golang.org/x/time/rate"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/record"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// A remote segment is one object:
//
//	batches        the segment's batches from the first one the upload
//	               starts at, back to back as on disk (LogBytes)
//	block index    one 28-byte entry per block: first offset int64,
//	               position int64, largest timestamp int64, CRC-32C uint32
//	               (big endian); a block is the batches from its position
//	               to the next block's (or to LogBytes), BlockBytes or a
//	               little more, always whole batches
//	aborted        24 bytes per aborted transaction with records in the
//	               segment: producer id, first offset, last offset
//	epochs         12 bytes per leader epoch in the segment's range:
//	               epoch int32, start offset int64
//
// The cluster's RemoteSegment records where each part starts and its
// CRC-32C. A reader fetches the index once, then whole blocks with ranged
// reads, and checks each block's CRC before using a byte of it: the
// batches' own CRCs do not cover their offsets, the block's does.

// BlockBytes is the size a block reaches before the next one starts: the
// unit of a remote read and of the read cache.
const BlockBytes = 1 << 20

const (
	indexEntrySize   = 28
	abortedEntrySize = 24
	epochEntrySize   = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// block is one entry of a remote segment's block index.
type block struct {
	first, pos, maxTs int64
	crc               uint32
}

// built is a remote segment ready to upload: the metadata entry and the
// parts written after the batches.
type built struct {
	seg   cluster.RemoteSegment
	tail  []byte // index, aborted transactions, epochs
	src   io.ReaderAt
	start int64 // position of the first uploaded batch in src
}

// body returns the object's bytes: the batches read from the segment
// file, then the tail.
func (b *built) body() io.ReadSeeker {
	return io.NewSectionReader(concatReaderAt{
		a: io.NewSectionReader(b.src, b.start, b.seg.LogBytes), aLen: b.seg.LogBytes, b: bytes.NewReader(b.tail),
	}, 0, b.seg.Bytes)
}

// build scans the closed segment cs from the first batch at or after from,
// checking every batch (length, magic, CRC-32C, offsets in order), and
// builds the block index and the tail. Nothing corrupt is uploaded.
func build(cs seglog.ClosedSegment, from int64, aborted []seglog.AbortedTxn, epochs []seglog.EpochEntry) (*built, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(cs.ReaderAt(), 0, cs.Size), 1<<20)
	var (
		pos, start int64 = 0, -1
		blocks     []block
		cur        *block
		crc        uint32
		maxTs      int64 = -1
		last       int64 = -1
		buf        []byte
	)
	for pos < cs.Size {
		hdr, err := r.Peek(record.HeaderSize)
		if err != nil {
			return nil, fmt.Errorf("segment %d at %d: %w", cs.Base, pos, err)
		}
		h, err := record.ParseHeader(hdr)
		if err != nil {
			return nil, fmt.Errorf("segment %d at %d: %w", cs.Base, pos, err)
		}
		size := h.Size()
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		b := buf[:size]
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("segment %d at %d: %w", cs.Base, pos, err)
		}
		if _, err := record.Validate(b); err != nil {
			return nil, fmt.Errorf("segment %d at %d: %w", cs.Base, pos, err)
		}
		if h.BaseOffset <= last {
			return nil, fmt.Errorf("segment %d at %d: %w: base offset %d after %d", cs.Base, pos, record.ErrCorrupt, h.BaseOffset, last)
		}
		last = h.LastOffset()
		if h.BaseOffset < from {
			pos += int64(size)
			continue
		}
		if start < 0 {
			start = pos
		}
		rel := pos - start
		if cur == nil || rel-cur.pos >= BlockBytes {
			if cur != nil {
				cur.crc = crc
			}
			blocks = append(blocks, block{first: h.BaseOffset, pos: rel, maxTs: -1})
			cur, crc = &blocks[len(blocks)-1], 0
		}
		crc = crc32.Update(crc, castagnoli, b)
		cur.maxTs = max(cur.maxTs, h.MaxTimestamp)
		maxTs = max(maxTs, h.MaxTimestamp)
		pos += int64(size)
	}
	if start < 0 {
		return nil, fmt.Errorf("segment %d holds no batch at or after offset %d", cs.Base, from)
	}
	cur.crc = crc
	out := &built{src: cs.ReaderAt(), start: start}
	logBytes := cs.Size - start
	out.seg = cluster.RemoteSegment{BaseOffset: from, EndOffset: cs.Next, LogBytes: logBytes, MaxTimestamp: maxTs}
	var tail []byte
	section := func(enc []byte) (pos, n int64, crc uint32) {
		pos = logBytes + int64(len(tail))
		tail = append(tail, enc...)
		return pos, int64(len(enc)), crc32.Checksum(enc, castagnoli)
	}
	s := &out.seg.Sections
	s.IndexPos, s.IndexLen, s.IndexCRC = section(encodeBlocks(blocks))
	s.AbortedPos, s.AbortedLen, s.AbortedCRC = section(encodeAborted(aborted))
	inRange := epochsIn(epochs, from, cs.Next)
	s.EpochsPos, s.EpochsLen, s.EpochsCRC = section(encodeEpochs(inRange))
	for _, e := range inRange {
		out.seg.Epochs = append(out.seg.Epochs, cluster.RemoteEpoch{Epoch: e.Epoch, StartOffset: e.StartOffset})
	}
	out.tail = tail
	out.seg.Bytes = logBytes + int64(len(tail))
	return out, nil
}

func encodeBlocks(blocks []block) []byte {
	b := make([]byte, 0, len(blocks)*indexEntrySize)
	for _, e := range blocks {
		b = binary.BigEndian.AppendUint64(b, uint64(e.first))
		b = binary.BigEndian.AppendUint64(b, uint64(e.pos))
		b = binary.BigEndian.AppendUint64(b, uint64(e.maxTs))
		b = binary.BigEndian.AppendUint32(b, e.crc)
	}
	return b
}

func encodeAborted(txns []seglog.AbortedTxn) []byte {
	b := make([]byte, 0, len(txns)*abortedEntrySize)
	for _, a := range txns {
		b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
		b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	}
	return b
}

// epochsIn returns the epochs in effect in [from, next): the one in
// effect at from (its start raised to from) and those starting inside.
func epochsIn(epochs []seglog.EpochEntry, from, next int64) []seglog.EpochEntry {
	var out []seglog.EpochEntry
	for i, e := range epochs {
		end := next
		if i+1 < len(epochs) {
			end = epochs[i+1].StartOffset
		}
		if end <= from || e.StartOffset >= next {
			continue
		}
		out = append(out, seglog.EpochEntry{Epoch: e.Epoch, StartOffset: max(e.StartOffset, from)})
	}
	return out
}

func encodeEpochs(epochs []seglog.EpochEntry) []byte {
	b := make([]byte, 0, len(epochs)*epochEntrySize)
	for _, e := range epochs {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	return b
}

// errCorruptObject marks a remote object whose bytes fail their checks.
var errCorruptObject = errors.New("corrupt remote segment")

// section checks a section's bytes against its CRC-32C and length.
func checkSection(seg *cluster.RemoteSegment, name string, b []byte, n int64, crc uint32) error {
	if int64(len(b)) != n {
		return fmt.Errorf("%w %s: %s section is %d bytes, want %d", errCorruptObject, seg.Object, name, len(b), n)
	}
	if got := crc32.Checksum(b, castagnoli); got != crc {
		return fmt.Errorf("%w %s: %s section CRC-32C %08x, want %08x", errCorruptObject, seg.Object, name, got, crc)
	}
	return nil
}

// decodeBlocks parses a checked block index.
func decodeBlocks(seg *cluster.RemoteSegment, b []byte) ([]block, error) {
	if len(b)%indexEntrySize != 0 || len(b) == 0 {
		return nil, fmt.Errorf("%w %s: block index of %d bytes", errCorruptObject, seg.Object, len(b))
	}
	out := make([]block, len(b)/indexEntrySize)
	for i := range out {
		e := b[i*indexEntrySize:]
		out[i] = block{
			first: int64(binary.BigEndian.Uint64(e)), pos: int64(binary.BigEndian.Uint64(e[8:])),
			maxTs: int64(binary.BigEndian.Uint64(e[16:])), crc: binary.BigEndian.Uint32(e[24:]),
		}
		if out[i].pos < 0 || out[i].pos >= seg.LogBytes || i > 0 && (out[i].pos <= out[i-1].pos || out[i].first <= out[i-1].first) {
			return nil, fmt.Errorf("%w %s: block index entry %d out of order", errCorruptObject, seg.Object, i)
		}
	}
	return out, nil
}

// decodeAborted parses a checked aborted-transactions section.
func decodeAborted(seg *cluster.RemoteSegment, b []byte) ([]seglog.AbortedTxn, error) {
	if len(b)%abortedEntrySize != 0 {
		return nil, fmt.Errorf("%w %s: aborted section of %d bytes", errCorruptObject, seg.Object, len(b))
	}
	out := make([]seglog.AbortedTxn, len(b)/abortedEntrySize)
	for i := range out {
		e := b[i*abortedEntrySize:]
		out[i] = seglog.AbortedTxn{ProducerID: int64(binary.BigEndian.Uint64(e)),
			FirstOffset: int64(binary.BigEndian.Uint64(e[8:])), LastOffset: int64(binary.BigEndian.Uint64(e[16:]))}
	}
	return out, nil
}

// throttled is a body whose reads wait for the limiter's tokens, so an
// upload takes no more than the limiter's rate from the disk and the
// network (-remote-upload-bytes-per-sec).
type throttled struct {
	io.ReadSeeker
	ctx context.Context
	lim *rate.Limiter
}

func (t throttled) Read(p []byte) (int, error) {
	p = p[:min(len(p), t.lim.Burst())]
	if err := t.lim.WaitN(t.ctx, len(p)); err != nil {
		return 0, err
	}
	return t.ReadSeeker.Read(p)
}

// concatReaderAt reads a (aLen bytes) then b.
type concatReaderAt struct {
	a    io.ReaderAt
	aLen int64
	b    io.ReaderAt
}

func (c concatReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.aLen {
		return c.b.ReadAt(p, off-c.aLen)
	}
	n := int(min(int64(len(p)), c.aLen-off))
	m, err := c.a.ReadAt(p[:n], off)
	if m < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return m, err
	}
	if n == len(p) {
		return n, nil
	}
	k, err := c.b.ReadAt(p[n:], 0)
	return n + k, err
}
