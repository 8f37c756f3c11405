// Package baseline measures the physical limits the benchmark's figures are
// set against, on the same machine and in the same run: sequential writes to
// a file with a given fsync cadence (what a storage node's appends cost the
// disk) and file-to-socket sendfile over loopback (what a fetch costs).
package baseline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Result is one measurement.
type Result struct {
	Bytes    int64         `json:"bytes"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Fsyncs   int64         `json:"fsyncs,omitempty"`
	MBPerSec float64       `json:"mb_per_sec"` // 10^6 bytes per second
}

func result(bytes int64, elapsed time.Duration, fsyncs int64) Result {
	r := Result{Bytes: bytes, Elapsed: elapsed, Fsyncs: fsyncs}
	if elapsed > 0 {
		r.MBPerSec = float64(bytes) / elapsed.Seconds() / 1e6
	}
	return r
}

// DiskConfig describes a sequential write.
type DiskConfig struct {
	Dir   string // where the scratch file is created (and removed)
	Bytes int64  // total to write
	Chunk int    // bytes per write(2)
	// FsyncEvery: bytes written between fsyncs; 0 never fsyncs before the
	// final one. As in a storage node's group commit, an fsync runs on its own
	// goroutine while writes go on, but the next interval's fsync waits for it:
	// Bytes/FsyncEvery fsyncs (rounded up) in all.
	FsyncEvery int64
}

// Disk writes cfg.Bytes sequentially to a new file in cfg.Dir and fsyncs it
// with the given cadence; the time includes the final fsync.
func Disk(ctx context.Context, cfg DiskConfig) (Result, error) {
	if cfg.Bytes <= 0 || cfg.Chunk <= 0 || cfg.FsyncEvery < 0 {
		return Result{}, fmt.Errorf("disk baseline: bytes %d and chunk %d must be positive, fsync cadence %d not negative", cfg.Bytes, cfg.Chunk, cfg.FsyncEvery)
	}
	f, err := os.CreateTemp(cfg.Dir, "sluice-bench-disk-*")
	if err != nil {
		return Result{}, fmt.Errorf("disk baseline: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()

	buf := make([]byte, cfg.Chunk)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	// The flusher runs one fsync per request; the writer goes on meanwhile
	// but waits for an fsync before requesting the next, so writes run at
	// most one interval ahead of the disk, as producers waiting for a group
	// commit do.
	requests := make(chan struct{})
	results := make(chan error, 1)
	go func() { // ends when requests is closed
		for range requests {
			results <- f.Sync()
		}
	}()
	defer close(requests)
	var fsyncs int64
	outstanding := false
	wait := func() error {
		if !outstanding {
			return nil
		}
		outstanding = false
		return <-results
	}

	start := time.Now()
	var written, sinceSync int64
	var werr, ferr error
	for written < cfg.Bytes && werr == nil && ferr == nil {
		if werr = ctx.Err(); werr != nil {
			break
		}
		n := int(min(int64(cfg.Chunk), cfg.Bytes-written))
		if _, werr = f.Write(buf[:n]); werr != nil {
			break
		}
		written += int64(n)
		sinceSync += int64(n)
		if cfg.FsyncEvery > 0 && sinceSync >= cfg.FsyncEvery && written < cfg.Bytes {
			sinceSync = 0
			ferr = wait()
			fsyncs++
			outstanding = true
			requests <- struct{}{}
		}
	}
	if err := wait(); ferr == nil {
		ferr = err
	}
	if werr == nil && ferr == nil {
		fsyncs++
		ferr = f.Sync()
	}
	elapsed := time.Since(start)
	if err := errors.Join(werr, ferr); err != nil {
		return Result{}, fmt.Errorf("disk baseline: %w", err)
	}
	return result(written, elapsed, fsyncs), nil
}

// SendfileConfig describes a loopback sendfile run.
type SendfileConfig struct {
	Dir   string // where the scratch file is created (and removed)
	Bytes int64  // file size, sent once
	Chunk int64  // bytes per sendfile call (a fetch response's size)
}

// Sendfile writes a file of cfg.Bytes (in 64 KiB writes, as batches land in a
// segment), then sends it over a loopback TCP connection in cfg.Chunk ranges
// with sendfile(2) (Go's TCPConn.ReadFrom of a file) to a reader that
// discards it. The time runs from the first byte sent to the last received.
func Sendfile(ctx context.Context, cfg SendfileConfig) (Result, error) {
	if cfg.Bytes <= 0 || cfg.Chunk <= 0 {
		return Result{}, fmt.Errorf("sendfile baseline: bytes %d and chunk %d must be positive", cfg.Bytes, cfg.Chunk)
	}
	path := filepath.Join(cfg.Dir, fmt.Sprintf("sluice-bench-sendfile-%d", os.Getpid()))
	if err := writeFile(path, cfg.Bytes); err != nil {
		return Result{}, fmt.Errorf("sendfile baseline: %w", err)
	}
	defer os.Remove(path)
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("sendfile baseline: %w", err)
	}
	defer f.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, fmt.Errorf("sendfile baseline: %w", err)
	}
	defer ln.Close()
	received := make(chan int64, 1)
	go func() { // the reader; ends at EOF or when the connection fails
		c, err := ln.Accept()
		if err != nil {
			received <- 0
			return
		}
		defer c.Close()
		n, _ := io.CopyBuffer(io.Discard, c, make([]byte, 1<<20))
		received <- n
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return Result{}, fmt.Errorf("sendfile baseline: %w", err)
	}
	tc := conn.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { tc.Close() })
	defer stop()

	start := time.Now()
	var sent int64
	var serr error
	for sent < cfg.Bytes && serr == nil {
		n := min(cfg.Chunk, cfg.Bytes-sent)
		var m int64
		// A LimitedReader over the *os.File keeps ReadFrom on sendfile(2),
		// which advances the file's offset.
		m, serr = tc.ReadFrom(&io.LimitedReader{R: f, N: n})
		sent += m
	}
	tc.CloseWrite()
	got := <-received
	elapsed := time.Since(start)
	tc.Close()
	if serr != nil {
		return Result{}, fmt.Errorf("sendfile baseline: %w", serr)
	}
	if got != cfg.Bytes {
		return Result{}, fmt.Errorf("sendfile baseline: reader got %d of %d bytes", got, cfg.Bytes)
	}
	return result(got, elapsed, 0), nil
}

func writeFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for left := size; left > 0; {
		n := min(int64(len(buf)), left)
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	return f.Close()
}
