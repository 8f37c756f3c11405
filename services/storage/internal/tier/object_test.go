package tier

import (
	"bytes"
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// An upload body read through throttled takes the limiter's time: 1 MiB
// at 256 KiB/s with a burst of 64 KiB, about four seconds (on the bubble's
// clock), every byte intact.
func TestThrottledUploadBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
		body := throttled{ReadSeeker: bytes.NewReader(src), ctx: context.Background(), lim: rate.NewLimiter(256<<10, 64<<10)}
		start := time.Now()
		got, err := io.ReadAll(body)
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
		if took := time.Since(start); took < 3750*time.Millisecond {
			t.Fatalf("1 MiB at 256 KiB/s took %v", took)
		}
	})
}
