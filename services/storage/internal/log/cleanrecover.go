package log

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// recoverCleanLeftovers finishes or undoes what a cleaning pass left when
// the process stopped (package doc, "Compaction"): a .cleaned file is
// removed (the pass is redone later); a .swap file is complete and synced,
// so it replaces its final name, unless its segment's .log no longer
// exists (retention or truncation deleted the segment while the pass ran),
// in which case it is removed. It runs before listSegments.
func (l *Log) recoverCleanLeftovers() error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("read directory: %w", err)
	}
	var swaps []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case e.IsDir():
		case strings.HasSuffix(name, cleanedSuffix):
			l.logger.Info("removing an unfinished cleaned segment file", slog.String("name", name))
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
			l.dirDirty = true
		case strings.HasSuffix(name, swapSuffix):
			swaps = append(swaps, name)
		}
	}
	// The .log swaps first: whether a segment's .log exists then decides
	// its index swaps.
	slices.SortFunc(swaps, func(a, b string) int {
		return boolInt(!strings.HasSuffix(a, logSuffix+swapSuffix)) - boolInt(!strings.HasSuffix(b, logSuffix+swapSuffix))
	})
	for _, name := range swaps {
		final := strings.TrimSuffix(name, swapSuffix)
		ext := filepath.Ext(final)
		base, ok := parseBase(final, ext)
		if !ok || (ext != logSuffix && ext != indexSuffix && ext != timeIndexSuffix) {
			l.logger.Warn("swap file with a bad name; ignored", slog.String("name", name))
			continue
		}
		path := filepath.Join(l.dir, name)
		_, err := os.Stat(segmentFile(l.dir, base, logSuffix))
		switch {
		case err == nil:
			l.logger.Info("completing a cleaned segment swap", slog.String("name", name))
			err = l.fs.Rename(path, filepath.Join(l.dir, final))
		case errors.Is(err, fs.ErrNotExist):
			l.logger.Info("removing a swap file of a deleted segment", slog.String("name", name))
			err = l.fs.Remove(path)
		}
		if err != nil {
			return fmt.Errorf("recover %s: %w", name, err)
		}
		l.dirDirty = true
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// recoverCleanerCheckpoint loads the first dirty offset in Open: missing
// is the first segment's base; an unreadable file is reported and gives the
// same (the next pass recleans everything, which is only slower). It runs
// before the Log is shared.
func (l *Log) recoverCleanerCheckpoint() {
	base := l.segs[0].base
	l.cleanedTo.Store(base)
	b, err := readSmallFile(filepath.Join(l.dir, CleanerCheckpointFile), 64)
	var saved int64
	if err == nil {
		saved, err = decodeOffsetCheckpoint(b, "cleaner offset")
	}
	switch {
	case err == nil:
		l.cleanedTo.Store(min(max(saved, base), l.end))
	case errors.Is(err, fs.ErrNotExist):
	default:
		l.logger.Warn("cleaner checkpoint unusable; cleaning from the first segment", slog.Any("reason", err))
	}
}

// FirstDirtyOffset returns the cleaner's first dirty offset: every record
// below it has been through a cleaning pass.
func (l *Log) FirstDirtyOffset() int64 {
	return l.cleanedTo.Load()
}
