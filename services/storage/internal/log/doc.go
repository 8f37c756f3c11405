// Package log is a partition's segment log: an append-only sequence of Kafka
// RecordBatch v2 batches stored as a directory of segment files, each with a
// sparse offset index and a time index.
//
// # On disk
//
// A partition is one directory. A segment whose first batch has base offset B
// is the three files
//
//	%020d.log        the batches, back to back, exactly as the producer sent
//	                 them apart from the stamped base offset and leader epoch
//	%020d.index      sparse offset index: (offset-B uint32, file position uint32),
//	                 big endian, one entry for the segment's first batch and then
//	                 one for the next batch that starts IndexIntervalBytes or more
//	                 after the previous entry
//	%020d.timeindex  time index: (max timestamp int64, offset-B uint32), one entry
//	                 for every batch whose max timestamp is greater than every
//	                 earlier one in the segment; the offset is the batch's base
//
// Index entries always point at a batch's first byte and name that batch's base
// offset, so a look-up lands on a batch boundary and scans batch headers forward.
//
// Two small text files sit beside the segments:
//
//	leader-epoch-checkpoint    the leader-epoch cache (epochs.go, epochfile.go):
//	                           for each leader epoch, the offset of its first
//	                           record, in Kafka's format; derived data that
//	                           recovery rebuilds from the batch headers if lost
//	high-watermark-checkpoint  the last checkpointed high watermark
//	                           (hwcheckpoint.go); it may lag
//	cleaner-offset-checkpoint  the cleaner's first dirty offset ("Compaction")
//	log-start-offset-checkpoint  the log start offset after a client deleted
//	                           records inside the first segment
//	                           (startoffset.go); written durably before the
//	                           deletion is answered
//
// and up to three producer snapshots, %020d.snapshot: the idempotent
// producers' state (producers.go) after every batch below that offset,
// written after a segment roll and by Close (producersnap.go); derived data
// that recovery and truncation complete from the batch headers after it.
//
// # Invariants
//
//   - Offsets strictly increase through the log: every batch's base offset is
//     greater than the previous batch's last offset, and a segment's base offset
//     is the base offset of its first batch. Append assigns them consecutively
//     from the log end offset; AppendReplica keeps the leader's offsets.
//   - The log holds whole batches only. Append validates every batch (length,
//     magic, CRC-32C) before writing any byte; Read returns whole batches; a
//     torn or corrupt tail found on start-up is cut at the last valid batch.
//   - Only the last segment (the active one) is written. Older segments change
//     only by deletion (retention), truncation (TruncateTo), or a cleaning
//     pass's swap (Clean, "Compaction" below), which replaces a closed
//     segment below the high watermark by one holding a subset of its
//     records at the same offsets, with the same base and end offsets.
//   - The log start offset is at or above the first segment's base and at
//     or below the high watermark once raised by RaiseStartOffset; reads
//     below it are out of range, and retention deletes the segments wholly
//     below it.
//   - The indexes are derived data: the active segment's are rebuilt from a scan
//     on every Open; an older segment's are checked and rebuilt when missing or
//     inconsistent.
//   - The producer state is a function of the batch headers in the log: the
//     leader, a follower (AppendReplica), recovery and truncation all apply
//     the same rule to the same headers, so replicas of one log agree on it.
//     A leader appends an idempotent producer's batch only after checking its
//     epoch and sequence against that state under the append lock, and
//     answers a retry of one of a producer's last five batches with its
//     original offsets instead of appending it again.
//
// # Transactions
//
// txn.go: transactional batches, the markers (control batches) that end
// them, the open and aborted transactions derived from both, and the last
// stable offset that read_committed readers stop at.
//
// # Compaction
//
// Clean (clean.go, cleanwrite.go, cleansegment.go, cleanrecover.go) is one
// pass of Kafka's log cleaner (cleanup.policy=compact). The cleanable range
// is the closed segments wholly below the last stable offset (txn.go), up to the first
// one whose largest timestamp is within MinCompactionLag of the pass's Now.
// The dirty part starts at the first dirty offset, kept in
//
//	cleaner-offset-checkpoint  every record below this offset has been
//	                           through a pass; written durably after a
//	                           pass (missing: 0; TruncateTo below it makes
//	                           the next pass start from its cut)
//
// A pass maps each key of the dirty segments to its latest offset in a
// fixed-memory table (offsetmap.go, Kafka's SkimpyOffsetMap): 24-byte
// slots of a 128-bit hash of the key (two hash/maphash hashes) and an offset, linear probing
// from the hash, at most 3/4 of the slots taken, so MapBytes (default 128
// MiB) holds MapBytes/32 keys. It maps whole segments from the first dirty
// offset while the offsets they span fit (every key takes an offset, so the
// table cannot fill), allocates the slots that span needs rounded up to
// the budget halved a whole number of times (so a table outgrown leaves at
// most half the new one as garbage), and hands the table to the next pass; ErrCleanBudget means the first dirty segment
// alone spans more. Then it rewrites every cleanable segment up to the last
// mapped one: a keyed record goes when a
// later one of its key is mapped, and a tombstone (null value) that is the
// latest of its key goes once its record timestamp (log-append time for such
// batches) is at or before Now-DeleteRetention: the tombstone clock is the
// record's own timestamp, not Kafka's delete horizon, so a producer
// timestamp far in the past shortens a tombstone's life. The records of an
// aborted transaction are neither mapped nor kept. Keyless records and
// control batches stay. A batch keeps its header fields (base offset, last
// offset delta, timestamps, producer id, epoch, base sequence, leader epoch,
// attributes) with a new length, record count and CRC; a compressed batch
// has its kept records compressed again with its codec, as Kafka's cleaner
// does. A batch left
// without records is dropped, except the last batch of its segment (so a
// segment keeps its end offset and segments still follow one another) and
// the newest batch of an idempotent producer (so the producer state rebuilt
// from headers keeps it); those stay as empty batches. A Read at a removed
// offset returns the next batch.
//
// Each rewritten segment is written to %020d.log.cleaned with its
// .index.cleaned and .timeindex.cleaned (rebuilt with the same index
// rules), fsynced, renamed to .swap, and the directory fsynced, segment by
// segment, oldest first. Then, under appendMu and only if every rewritten
// segment is still listed, closed and of the size read (else
// ErrCleanAborted, the files removed), each .swap file is renamed over its
// final name (oldest segment first; rename replaces atomically, so no
// segment file is ever missing), the list is swapped under mu, the
// directory fsynced and the checkpoint written. Readers holding an old
// segment keep its (unlinked) file until they release it. On Open, a
// .cleaned file is removed (the pass is redone later) and a .swap file
// replaces its final name, unless the segment's .log is gone (retention or
// truncation deleted it), when it is removed. Because segments reach .swap
// oldest first, a crash leaves the swaps of a prefix of them, and a
// tombstone is never removed while an older value of its key survives.
//
// Failures: a corrupt batch in the range stops the pass with a
// *CorruptError and changes nothing; a failed create, write, fsync or
// rename of the .cleaned/.swap files or of their directory fsync aborts the
// pass (ErrCleanAborted) and leaves the log usable (it never served those
// files); a failed rename of a .swap file over a segment, or the directory
// fsync after the swap, fails the log (the files no longer match what it
// serves); a failed cleaner checkpoint is only reported (a stale one only
// makes the next pass redo work). CleanOptions.Throttle sees each chunk a
// pass reads or writes and may block; its error aborts like a failed step.
//
// Cost (docs/dev/performance-log.md, "Log compaction"): a pass reads each dirty
// segment twice (to map, then to rewrite), decodes each record twice and
// creates three files per rewritten segment. Its memory is MapBytes: the
// key table gets all but cleanReserve, which the pass's buffers use; table
// and buffers are kept for the next pass, so passes make little garbage
// (10 million 16-byte keys in four passes: 127.6 MiB at peak with the
// 128 MiB default, TestCleanMemoryFigure).
//
// # Durability
//
// Append returns when the batches are in the page cache (readable, and safe
// against a process crash, not against power loss). They are durable once
// WaitFlushed for an offset above them returns: one flusher goroutine per log
// fsyncs the active segment, any segments rolled since its last pass (with their
// indexes) and the directory when files were created or removed, and releases
// every waiter that pass covered (group commit). The active segment's indexes
// are not fsynced on each pass because Open rebuilds them from the segment.
//
// The leader-epoch checkpoint is written durably (file and directory fsync)
// before the first batch of a new epoch is written and by TruncateTo, so it
// never lacks an epoch the durable log holds; entries it has beyond the
// recovered log are dropped on Open. The high-watermark checkpoint is written
// by the flusher at most once a second and by Close.
//
// # Fail-stop
//
// A failed write or fsync fails the log: after a failed fsync the page cache
// can no longer be trusted to match the disk, and what a failed write left in
// a file is unknown. So does every failed file change the log has already
// published in memory: a checkpoint's create, write, fsync or rename, a
// truncation, the removal of the segments TruncateTo and ResetTo drop. The
// failure is sticky (Log.failed, set by failLocked, wraps ErrFailed) and the
// log must be reopened. Some failures leave the log usable: a full disk
// (ErrDiskFull refuses the write, space.go), a roll or ResetTo that cannot
// create its new segment (refused before anything changed), a segment file
// retention could not delete (reported; recovery finds it again) and a
// producer snapshot that could not be written (derived data). From the
// failure on:
//
//   - the operation that met it returns ErrFailed: Append (a segment write,
//     or the leader-epoch checkpoint a new epoch writes first), WaitFlushed
//     (the flusher's fsyncs), TruncateTo, ResetTo, EnforceRetention and
//     RaiseStartOffset (their file changes and checkpoints). The flusher's
//     high-watermark checkpoint fails the log the same way, with nobody to
//     tell but the next caller;
//   - every WaitFlushed waiter is released at once with ErrFailed, and every
//     later Append, AppendReplica, TruncateTo, ResetTo, RaiseStartOffset and
//     WaitFlushed for an offset not yet flushed returns it;
//   - the flushed offset never moves again, not even when a flush pass that
//     was already running succeeds: nothing is acknowledged after the failure
//     (a ResetTo that failed while deleting files had already moved it to the
//     new start, having given up every record below);
//   - reads go on: what they return was written, and followers and consumers
//     may still fetch it.
//
// Open then recovers a consistent log holding every record flushed before the
// failure, and perhaps records written after it that nobody acknowledged. The
// replica layer hands the partition's leadership to another in-sync replica
// when its log fails (replica.Manager.ReportFailed).
//
// Every change to the files goes through a FileSystem (filesystem.go):
// Config.FS, the operating system's unless a test sets it. Package faultfs
// fails the calls a rule picks (operation, file name, after how many calls),
// and failstop_test.go checks the list above at each place the log fails (each
// failLocked call). Reads use the *os.File directly. On the append path the
// seam costs one interface call per file written and no allocation.
//
// # Concurrency
//
// Lock order: Log.cleanMu, then Log.appendMu, then Log.ckptMu, then Log.mu,
// then segment.idxMu. cleanMu serializes cleaning passes, which read and
// write their files holding no other lock.
// ckptMu only serializes the checkpoint files' writes (and the list of
// producer snapshot files); the leader-epoch cache and the producer state are
// guarded by mu (written with appendMu also held), and the high watermark is
// an atomic changed under mu.
//
// Appends (and roll, truncation, reconfiguration) are serialized by appendMu,
// which is held while the batch is written to the page cache but never across
// a segment fsync (only across the leader-epoch checkpoint's, once per leader
// change and on TruncateTo). Readers take mu as a read lock only to pick a
// segment and copy index slices; their file reads are positioned reads (pread)
// outside every lock, on a segment kept open by a reference count until the
// returned Slice is released, even if retention deletes the segment meanwhile.
package log
