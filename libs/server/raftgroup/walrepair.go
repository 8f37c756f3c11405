package raftgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hashicorp/raft-wal/types"
)

// The write-ahead log seals a segment file that is full by writing an
// index frame in the append that fills it, then rotates to a new file in
// the background and records the seal in its meta store. A crash between
// the two (or during the append, leaving the index frame without its
// commit) leaves a tail file that its recovery reads as sealed while the
// meta store says it is not: every later append fails with "segment is
// sealed", and the member can no longer take entries. tailRepairFS puts
// such a tail back in the state the log can append to before the log
// recovers it:
//   - an index frame after the last valid commit (a seal that did not
//     commit) is zeroed with everything after that commit, which was never
//     acknowledged;
//   - a committed seal (an index frame just before the last commit) is
//     undone by writing that commit over the index frame, over the same
//     entries, so that no acknowledged entry is lost; the next append seals
//     the file again and the log rotates as usual.
//
// The file format read here is raft-wal's segment format: a 32-byte file
// header, then 8-byte aligned frames with an 8-byte header (type, three
// zero bytes, then the payload length, or for a commit frame the CRC-32C of
// the bytes since the previous commit frame, or since the file's start).
type tailRepairFS struct{ types.VFS }

// Segment format constants (raft-wal's segment/format.go).
const (
	segFileHeaderLen  = 32
	segFrameHeaderLen = 8
	segFrameEntry     = 1
	segFrameIndex     = 2
	segFrameCommit    = 3
)

// OpenWriter is how the log opens the tail it recovers: it is repaired
// first.
func (v tailRepairFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	if err := repairTail(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("raft log segment %s: %w", name, err)
	}
	return f, nil
}

type segFrame struct {
	typ       byte
	off, size int64 // where it starts, and its length with header and padding
	crc       uint32
}

// repairTail repairs a tail segment file as tailRepairFS says.
func repairTail(f types.WritableFile) error {
	frames, err := segFrames(f)
	if err != nil {
		return err
	}
	// The commit frames, and the last valid one (the final commit is
	// checked against its CRC; earlier ones were acknowledged, so synced).
	var commits []int
	for i, fr := range frames {
		if fr.typ == segFrameCommit {
			commits = append(commits, i)
		}
	}
	good := -1 // index into frames of the last valid commit
	if n := len(commits); n > 0 {
		last := frames[commits[n-1]]
		start := int64(0)
		if n > 1 {
			start = frames[commits[n-2]].off + segFrameHeaderLen
		}
		ok, err := crcMatches(f, start, last.off, last.crc)
		if err != nil {
			return err
		}
		switch {
		case ok:
			good = commits[n-1]
		case n > 1:
			good = commits[n-2]
		}
	}
	end := int64(segFileHeaderLen) // the end of what was committed
	if good >= 0 {
		end = frames[good].off + segFrameHeaderLen
	}
	for _, fr := range frames[good+1:] {
		if fr.typ == segFrameIndex { // a seal that did not commit
			last := frames[len(frames)-1]
			return zero(f, end, last.off+last.size)
		}
	}
	if good < 1 || frames[good-1].typ != segFrameIndex {
		return nil // not sealed
	}
	// A committed seal: the final commit goes where the index frame is,
	// over the same bytes before it.
	index, commit := frames[good-1], frames[good]
	start := int64(0)
	for i := good - 2; i >= 0; i-- {
		if frames[i].typ == segFrameCommit {
			start = frames[i].off + segFrameHeaderLen
			break
		}
	}
	sum, err := crcOf(f, start, index.off)
	if err != nil {
		return err
	}
	var h [segFrameHeaderLen]byte
	h[0] = segFrameCommit
	binary.LittleEndian.PutUint32(h[4:], sum)
	if _, err := f.WriteAt(h[:], index.off); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return zero(f, index.off+segFrameHeaderLen, commit.off+commit.size)
}

// segFrames reads the frames after the file header up to the first zero,
// short or malformed frame header, as the log's recovery does.
func segFrames(f types.WritableFile) ([]segFrame, error) {
	var out []segFrame
	off := int64(segFileHeaderLen)
	var h [segFrameHeaderLen]byte
	for {
		n, err := f.ReadAt(h[:], off)
		if n < segFrameHeaderLen {
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return out, nil
		}
		fr := segFrame{typ: h[0], off: off, size: segFrameHeaderLen}
		if h[1] != 0 || h[2] != 0 || h[3] != 0 {
			return out, nil // a torn header: the end of what was written
		}
		v := binary.LittleEndian.Uint32(h[4:])
		switch h[0] {
		case segFrameEntry, segFrameIndex:
			fr.size += int64(v) + int64((segFrameHeaderLen-int(v)%segFrameHeaderLen)%segFrameHeaderLen)
		case segFrameCommit:
			fr.crc = v
		default:
			return out, nil // zeros, or a torn header
		}
		out = append(out, fr)
		off += fr.size
	}
}

// castagnoli is the CRC-32C table of the segment format.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcOf returns the CRC-32C (Castagnoli) of f's bytes [from, to).
func crcOf(f types.WritableFile, from, to int64) (uint32, error) {
	buf := make([]byte, to-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return crc32.Checksum(buf, castagnoli), nil
}

func crcMatches(f types.WritableFile, from, to int64, want uint32) (bool, error) {
	got, err := crcOf(f, from, to)
	return got == want, err
}

// zero overwrites f's bytes [from, to) with zeros and syncs.
func zero(f types.WritableFile, from, to int64) error {
	if to <= from {
		return nil
	}
	if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
		return err
	}
	return f.Sync()
}
