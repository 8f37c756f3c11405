package log

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicemq/sluice/libs/record"
)

// The leader-epoch checkpoint file, in Kafka's text format:
//
//	0                 version
//	2                 number of entries
//	0 0               epoch, space, start offset; one line per entry
//	3 150
//
// Every line ends with '\n'. Recovery loads it, or rebuilds it from the batch
// headers when it is missing or malformed; it never fails Open.

// maxCheckpointBytes bounds what recovery reads of a checkpoint file: room for
// tens of thousands of epochs, and no unbounded allocation for a corrupt one.
const maxCheckpointBytes = 1 << 20

// epochScanChunk is the read size of the header scan that rebuilds the cache:
// large enough for many small batches per read, small enough not to read
// every byte of a segment of large batches.
const epochScanChunk = 64 << 10

// errBadCheckpoint marks a checkpoint file that does not parse or breaks its
// invariants. It never leaves the package: recovery reports it and rebuilds.
var errBadCheckpoint = errors.New("malformed checkpoint")

// encodeEpochs renders entries in the checkpoint format.
func encodeEpochs(entries []EpochEntry) []byte {
	b := make([]byte, 0, 8+len(entries)*24)
	b = append(b, "0\n"...)
	b = strconv.AppendInt(b, int64(len(entries)), 10)
	b = append(b, '\n')
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.StartOffset, 10)
		b = append(b, '\n')
	}
	return b
}

// decodeEpochs parses a checkpoint file, checking the version, the count
// against the lines present, and that epochs and start offsets are
// non-negative and strictly increasing. Errors wrap errBadCheckpoint.
func decodeEpochs(b []byte) ([]EpochEntry, error) {
	text, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return nil, fmt.Errorf("%w: does not end with a newline", errBadCheckpoint)
	}
	lines := strings.Split(text, "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("%w: no count line", errBadCheckpoint)
	}
	if lines[0] != "0" {
		return nil, fmt.Errorf("%w: version %q, want 0", errBadCheckpoint, lines[0])
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n != len(lines)-2 {
		return nil, fmt.Errorf("%w: count %q, %d entry lines", errBadCheckpoint, lines[1], len(lines)-2)
	}
	entries := make([]EpochEntry, 0, n)
	for i, line := range lines[2:] {
		epochText, startText, ok := strings.Cut(line, " ")
		epoch, err1 := strconv.ParseInt(epochText, 10, 32)
		start, err2 := strconv.ParseInt(startText, 10, 64)
		if !ok || err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, fmt.Errorf("%w: entry %d is %q", errBadCheckpoint, i, line)
		}
		e := EpochEntry{Epoch: int32(epoch), StartOffset: start}
		if k := len(entries); k > 0 && (e.Epoch <= entries[k-1].Epoch || e.StartOffset <= entries[k-1].StartOffset) {
			return nil, fmt.Errorf("%w: entry %d (%d, %d) does not follow (%d, %d)", errBadCheckpoint,
				i, e.Epoch, e.StartOffset, entries[k-1].Epoch, entries[k-1].StartOffset)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// readSmallFile reads a checkpoint file, refusing one larger than limit.
func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: larger than %d bytes", errBadCheckpoint, limit)
	}
	return b, nil
}

// recoverEpochs sets l.epochs after the segments are recovered: from the
// checkpoint file, or from a scan of every batch header when the file is
// missing or malformed. Entries at or beyond the log end offset are dropped;
// epochs that rebuild's validating scans saw above the latest cached one are
// added (Kafka's segment recovery does the same), which covers a crash after
// TruncateTo rewrote the file but before the cut segment reached the disk;
// entries below the log start offset are truncated. The file is rewritten when
// the result differs from it. Nothing here fails Open: problems are logged.
// It runs in Open, before the Log is shared.
func (l *Log) recoverEpochs() {
	start, end := l.start, l.end
	path := filepath.Join(l.dir, EpochCheckpointFile)
	b, err := readSmallFile(path, maxCheckpointBytes)
	var loaded []EpochEntry
	if err == nil {
		loaded, err = decodeEpochs(b)
	}
	entries := loaded
	switch {
	case errors.Is(err, fs.ErrNotExist) && end == start:
		// A new or empty log: nothing to scan.
	case err != nil:
		l.logger.Warn("leader epoch checkpoint missing or unusable; rebuilding it from the batch headers",
			slog.Any("reason", err))
		entries = l.scanEpochs()
	}
	entries, _ = truncateEpochsFromEnd(entries, end)
	for _, e := range l.scanned {
		if e.Epoch > latestEpoch(entries) {
			entries = appendEpoch(slices.Clone(entries), e)
		}
	}
	entries, _ = truncateEpochsFromEnd(entries, end)
	if !l.cfg.Tiered { // a tiered log keeps its remote part's epochs (retention.go)
		entries, _ = truncateEpochsFromStart(entries, start)
	}
	l.epochs, l.scanned = entries, nil
	if err == nil && slices.Equal(entries, loaded) {
		return
	}
	if !slices.Equal(entries, loaded) {
		l.logger.Info("leader epoch cache recovered", slog.Any("file", loaded), slog.Any("epochs", entries),
			slog.Int64("start_offset", start), slog.Int64("end_offset", end))
	}
	// The directory is synced by the flusher's first pass; an append of a new
	// epoch syncs it before writing.
	if werr := writeFileAtomic(l.fs, path, encodeEpochs(entries)); werr != nil {
		l.logger.Warn("could not rewrite the leader epoch checkpoint; the next open rebuilds it",
			slog.Any("err", werr))
		return
	}
	l.dirDirty = true
}

// scanEpochs rebuilds the cache from the batch headers of every segment (no
// CRC check: recovery validated what it had to). A segment whose headers stop
// making sense is reported and the scan goes on with the next one.
func (l *Log) scanEpochs() []EpochEntry {
	var entries []EpochEntry
	sc := newScanner(nil, 0, make([]byte, epochScanChunk))
	for _, s := range l.segs {
		out := walk(sc, s, 0, s.base, math.MaxInt64, func(_ int64, h record.Header) error {
			entries = noteEpoch(entries, h)
			return nil
		})
		if out.bad != nil {
			l.logger.Warn("leader epoch scan stopped early in a segment",
				slog.Int64("segment", s.base), slog.Any("reason", out.bad))
		}
	}
	return entries
}
