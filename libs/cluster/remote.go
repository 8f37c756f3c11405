package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Tiered storage: a partition's closed segments copied to an object store.
// The metadata Raft group keeps each partition's remote log (the list of
// its uploaded segments, in offset order and without gaps); the partition
// leader appends to it after an upload and drops from its front when
// total retention deletes. Every change is fenced by the leader's epoch,
// so a deposed leader can neither add nor drop.

// RemoteSegment is one uploaded segment: the batches of [BaseOffset,
// EndOffset) as one object, followed by what a reader needs to use it
// alone (see the storage node's tier package for the object's layout).
type RemoteSegment struct {
	// Object is the object's key below the store's prefix; unique per
	// upload (an upload retried after a leader change gets a new key).
	Object string `json:"object"`
	// BaseOffset is the first batch's base offset; EndOffset the offset
	// after the last batch's last record.
	BaseOffset int64 `json:"base_offset"`
	EndOffset  int64 `json:"end_offset"`
	// LogBytes is the length of the batches at the object's start; Bytes
	// the object's whole length.
	LogBytes int64 `json:"log_bytes"`
	Bytes    int64 `json:"bytes"`
	// MaxTimestamp is the largest batch timestamp (-1: none).
	MaxTimestamp int64 `json:"max_timestamp"`
	// LeaderEpoch is the epoch of the leader that uploaded it.
	LeaderEpoch int32 `json:"leader_epoch"`
	// Sections locates the object's parts after the batches.
	Sections RemoteSections `json:"sections"`
	// Epochs are the leader epochs of the segment's range (the one in
	// effect at BaseOffset first), as in the object's epochs section: a
	// leader answers OffsetForLeaderEpoch for the whole log from them
	// once its disk holds only the tail.
	Epochs []RemoteEpoch `json:"epochs,omitempty"`
}

// RemoteEpoch is a leader epoch and the offset of its first record.
type RemoteEpoch struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"start_offset"`
}

// RemoteSections are the positions and lengths of a remote segment's
// parts after its batches, with the CRC-32C (Castagnoli) of each: the
// block index (each block of batches with its first offset, position,
// largest timestamp and CRC-32C, so that a ranged read of a block is
// checked whole), the aborted transactions and the leader epochs of the
// segment's range.
type RemoteSections struct {
	IndexPos   int64  `json:"index_pos"`
	IndexLen   int64  `json:"index_len"`
	IndexCRC   uint32 `json:"index_crc"`
	AbortedPos int64  `json:"aborted_pos"`
	AbortedLen int64  `json:"aborted_len"`
	AbortedCRC uint32 `json:"aborted_crc"`
	EpochsPos  int64  `json:"epochs_pos"`
	EpochsLen  int64  `json:"epochs_len"`
	EpochsCRC  uint32 `json:"epochs_crc"`
}

// RemoteLog is a partition's remote log: its segments in offset order,
// each starting where the one before ends (compaction may leave offsets
// without records inside a segment, never between two).
type RemoteLog struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Segments  []RemoteSegment `json:"segments"`
	// LogStart, when above the first segment's base offset, is where the
	// log starts: a DeleteRecords moved it inside that segment, and the
	// records before it are gone for readers (0: the first segment's base).
	LogStart int64 `json:"log_start,omitempty"`
}

// Start is the remote log's first offset (LogStart when it is inside the
// first segment), End the offset after its last record, Bytes the bytes
// of its segments; all 0 when it is empty.
func (l *RemoteLog) Start() int64 {
	if len(l.Segments) == 0 {
		return 0
	}
	return max(l.Segments[0].BaseOffset, l.LogStart)
}

// End: see Start.
func (l *RemoteLog) End() int64 {
	if len(l.Segments) == 0 {
		return 0
	}
	return l.Segments[len(l.Segments)-1].EndOffset
}

// Bytes: see Start.
func (l *RemoteLog) Bytes() int64 {
	var n int64
	for _, s := range l.Segments {
		n += s.Bytes
	}
	return n
}

// Summary is what the cluster model carries of the log (RemoteSummary).
func (l *RemoteLog) Summary() RemoteSummary {
	return RemoteSummary{Start: l.Start(), End: l.End(), Bytes: l.Bytes(), Segments: len(l.Segments)}
}

// RemoteSummary is what the cluster model carries of a partition's remote
// log (Partition.Remote): enough for followers to know what local
// retention may delete and for tools to show sizes, without the segment
// list (GET /v1/topics/{topic}/partitions/{partition}/remote).
type RemoteSummary struct {
	Start    int64 `json:"start"`
	End      int64 `json:"end"`
	Bytes    int64 `json:"bytes"`
	Segments int   `json:"segments"`
}

// RemoteLeader names the leader making a remote-log change: it must be
// the partition's leader at LeaderEpoch, with its current registration.
type RemoteLeader struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	LeaderID    int32  `json:"leader_id"`
	LeaderEpoch int32  `json:"leader_epoch"`
	NodeEpoch   int64  `json:"node_epoch"`
}

// AddRemoteSegmentRequest is the body of POST /v1/remote/segments: the
// leader uploaded Segment and asks for it to count. Its BaseOffset must be
// the remote log's end (any offset when the remote log is empty). The same
// segment (same object) added again is answered as done, so a retry after
// a lost answer is safe.
type AddRemoteSegmentRequest struct {
	RemoteLeader
	Segment RemoteSegment `json:"segment"`
}

// DropRemoteSegmentsRequest is the body of POST /v1/remote/drop: the
// leader drops the segments wholly below Below from the front of the
// remote log (total retention, DeleteRecords), and moves the log's start
// up to Below when Below is inside the segment left first (DeleteRecords).
// The answer lists the dropped segments, whose objects the leader then
// deletes.
type DropRemoteSegmentsRequest struct {
	RemoteLeader
	Below int64 `json:"below"`
}

// DropRemoteSegmentsResponse lists the segments a drop removed.
type DropRemoteSegmentsResponse struct {
	Dropped []RemoteSegment `json:"dropped"`
}

// AddRemoteSegment commits an uploaded segment to the partition's remote
// log and returns the log's summary after it.
func (c *Client) AddRemoteSegment(ctx context.Context, req AddRemoteSegmentRequest) (RemoteSummary, error) {
	var s RemoteSummary
	err := c.do(ctx, http.MethodPost, "/v1/remote/segments", req, &s)
	return s, err
}

// DropRemoteSegments removes the segments wholly below req.Below from the
// front of the partition's remote log and returns them.
func (c *Client) DropRemoteSegments(ctx context.Context, req DropRemoteSegmentsRequest) ([]RemoteSegment, error) {
	var r DropRemoteSegmentsResponse
	err := c.do(ctx, http.MethodPost, "/v1/remote/drop", req, &r)
	return r.Dropped, err
}

// RemoteLog returns a partition's remote log (empty when nothing was
// uploaded). The read is linearizable, as Snapshot's: a new leader starts
// from every segment committed before it asked.
func (c *Client) RemoteLog(ctx context.Context, topic string, partition int32) (*RemoteLog, error) {
	var l RemoteLog
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/topics/%s/partitions/%d/remote?consistent=true", url.PathEscape(topic), partition), nil, &l)
	return &l, err
}
