package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "100": 100, "64KiB": 64 << 10, "1MiB": 1 << 20, "3GiB": 3 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1KB", "x", "1.5MiB", "99999999999999GiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestParseLimits(t *testing.T) {
	c, err := ParseLimits([]string{"disk", "--bytes", "8MiB", "--fsync-every", "1MiB", "--dir", "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeDisk || c.Bytes != 8<<20 || c.FsyncEvery != 1<<20 || c.Chunk != 64<<10 || c.Dir != "/tmp" {
		t.Fatalf("%+v", c)
	}
	if c, err := ParseLimits([]string{"sendfile"}); err != nil || c.Chunk != 1<<20 || c.Bytes != 1<<30 {
		t.Fatalf("sendfile defaults: %+v %v", c, err)
	}
	for args, flagName := range map[string]string{
		"sendfile --fsync-every 1": "fsync-every",
		"disk --bytes 0":           "bytes",
		"disk --chunk 2GiB":        "chunk",
		"disk --chunk x":           "chunk",
		"disk --fsync-every -5":    "fsync-every",
		"disk --topic t":           "topic",
		"produce":                  "disk or sendfile",
		"disk sendfile":            "disk or sendfile",
	} {
		_, err := ParseLimits(strings.Fields(args))
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), flagName) {
			t.Errorf("%q: %v, want a usage error naming %s", args, err, flagName)
		}
	}
}

func TestMainRunsTheLimits(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main([]string{"disk", "--dir", t.TempDir(), "--bytes", "2MiB", "--fsync-every", "512KiB", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var s LimitsSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s.Mode != ModeDisk || s.Bytes != 2<<20 || s.Fsyncs < 1 || s.MBPerSec <= 0 {
		t.Fatalf("summary %q: %+v %v", out.String(), s, err)
	}
	out.Reset()
	code = Main([]string{"sendfile", "--dir", t.TempDir(), "--bytes", "4MiB"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "sendfile: 4194304 bytes") {
		t.Fatalf("exit %d, %q: %s", code, out.String(), errOut.String())
	}
	if code := Main([]string{"disk", "--bytes", "nope"}, &out, &errOut); code != 2 {
		t.Fatalf("bad size: exit %d", code)
	}
}
