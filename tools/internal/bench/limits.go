package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/tools/internal/baseline"
)

// Modes measuring physical limits instead of a cluster.
const (
	ModeDisk     = "disk"
	ModeSendfile = "sendfile"
)

const limitsUsage = `sluice-bench disk|sendfile: the physical limits a cluster's figures are set against

usage: sluice-bench disk [--dir D] [--bytes N] [--chunk N] [--fsync-every N] [--json]
       sluice-bench sendfile [--dir D] [--bytes N] [--chunk N] [--json]

  disk       sequential writes to a scratch file in --dir (default .), --chunk bytes
             each (default 64KiB), fsynced every --fsync-every bytes by a concurrent
             flusher as a storage node's group commit does (default 0: only at the
             end); the time includes the last fsync
  sendfile   a --bytes file (written in 64 KiB writes) sent over loopback TCP with
             sendfile(2) in --chunk ranges (default 1MiB) to a reader that discards it

Sizes take a KiB, MiB or GiB suffix; --bytes defaults to 1GiB. MB = 10^6 bytes.
`

// LimitsConfig is one disk or sendfile run.
type LimitsConfig struct {
	Mode       string
	Dir        string
	Bytes      int64
	Chunk      int64
	FsyncEvery int64
	JSON       bool
}

// LimitsSummary is what a disk or sendfile run prints.
type LimitsSummary struct {
	Mode       string  `json:"mode"`
	Bytes      int64   `json:"bytes"`
	Chunk      int64   `json:"chunk"`
	FsyncEvery int64   `json:"fsync_every,omitempty"`
	Fsyncs     int64   `json:"fsyncs,omitempty"`
	ElapsedSec float64 `json:"elapsed_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
}

// ParseLimits reads the command line of the disk and sendfile modes.
func ParseLimits(args []string) (LimitsConfig, error) {
	c := LimitsConfig{}
	var bytes, chunk, every string
	fs := flag.NewFlagSet("sluice-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.Dir, "dir", ".", "directory of the scratch file")
	fs.StringVar(&bytes, "bytes", "1GiB", "bytes to write or send")
	fs.StringVar(&chunk, "chunk", "", "bytes per write or per sendfile call")
	fs.StringVar(&every, "fsync-every", "0", "disk: bytes between fsync requests (0: only at the end)")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return c, err
	}
	if len(pos) != 1 || (pos[0] != ModeDisk && pos[0] != ModeSendfile) {
		return c, fmt.Errorf("%w: want one mode, disk or sendfile, got %q", errUsage, pos)
	}
	c.Mode = pos[0]
	if chunk == "" {
		chunk = map[string]string{ModeDisk: "64KiB", ModeSendfile: "1MiB"}[c.Mode]
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if explicit["fsync-every"] && c.Mode != ModeDisk {
		return c, fmt.Errorf("%w: --fsync-every is only for disk", errUsage)
	}
	for _, f := range []struct {
		name string
		s    string
		dst  *int64
		min  int64
	}{{"bytes", bytes, &c.Bytes, 1}, {"chunk", chunk, &c.Chunk, 1}, {"fsync-every", every, &c.FsyncEvery, 0}} {
		n, err := ParseSize(f.s)
		if err != nil {
			return c, fmt.Errorf("%w: --%s: %w", errUsage, f.name, err)
		}
		if n < f.min {
			return c, fmt.Errorf("%w: --%s: %d is below %d", errUsage, f.name, n, f.min)
		}
		*f.dst = n
	}
	if c.Chunk > 1<<30 {
		return c, fmt.Errorf("%w: --chunk: %d is above 1GiB", errUsage, c.Chunk)
	}
	return c, nil
}

// ParseSize reads a byte count with an optional KiB, MiB or GiB suffix.
func ParseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB or GiB)", s)
	}
	return n * mult, nil
}

// RunLimits measures one physical limit.
func RunLimits(ctx context.Context, c LimitsConfig) (LimitsSummary, error) {
	var r baseline.Result
	var err error
	switch c.Mode {
	case ModeDisk:
		r, err = baseline.Disk(ctx, baseline.DiskConfig{Dir: c.Dir, Bytes: c.Bytes, Chunk: int(c.Chunk), FsyncEvery: c.FsyncEvery})
	default:
		r, err = baseline.Sendfile(ctx, baseline.SendfileConfig{Dir: c.Dir, Bytes: c.Bytes, Chunk: c.Chunk})
	}
	if err != nil {
		return LimitsSummary{}, err
	}
	return LimitsSummary{Mode: c.Mode, Bytes: r.Bytes, Chunk: c.Chunk, FsyncEvery: c.FsyncEvery, Fsyncs: r.Fsyncs,
		ElapsedSec: r.Elapsed.Seconds(), MBPerSec: r.MBPerSec}, nil
}

// mainLimits is Main for the disk and sendfile modes.
func mainLimits(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := ParseLimits(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		io.WriteString(stdout, limitsUsage)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "sluice-bench: %v\n%s", err, usageHint)
		return 2
	}
	s, err := RunLimits(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	if c.JSON {
		b, _ := json.Marshal(s)
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	el := time.Duration(s.ElapsedSec * float64(time.Second)).Round(time.Millisecond)
	switch c.Mode {
	case ModeDisk:
		fmt.Fprintf(stdout, "disk: %d bytes in %d-byte writes, %d fsyncs (one every %d bytes), %v: %.1f MB/s\n",
			s.Bytes, s.Chunk, s.Fsyncs, s.FsyncEvery, el, s.MBPerSec)
	default:
		fmt.Fprintf(stdout, "sendfile: %d bytes over loopback in %d-byte sendfile calls, %v: %.1f MB/s\n", s.Bytes, s.Chunk, el, s.MBPerSec)
	}
	return 0
}
