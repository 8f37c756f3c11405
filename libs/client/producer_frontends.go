package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
)

// frontendDownFor is how long a frontend that failed a request is skipped
// (unless every frontend is down).
const frontendDownFor = time.Second

// frontends spreads produce requests over the frontends, round-robin, and
// skips one for a while after it fails at the transport level.
type frontends struct {
	urls     []string
	clientID string // sent as X-Client-Id: the frontends' quotas are by client id
	token    string // bearer token, when the frontends require authentication
	txnID    string // a transactional producer's id, sent as transactional_id
	hc       *http.Client
	next     atomic.Uint64

	mu   sync.Mutex
	down []time.Time // per frontend: skipped until; guarded by mu
}

func newFrontends(addrs []string, conns int, clientID, token, txnID string, tlsCfg *tls.Config) *frontends {
	f := &frontends{urls: jsonhttp.BaseURLsFor(addrs, tlsCfg != nil), clientID: clientID, token: token, txnID: txnID,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, IdleConnTimeout: time.Minute,
			TLSClientConfig: tlsCfg}}}
	f.down = make([]time.Time, len(f.urls))
	return f
}

func (f *frontends) close() { f.hc.CloseIdleConnections() }

// transportError: the request may or may not have reached the frontend.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// throttledError is a 429 answer.
type throttledError struct {
	retryAfter time.Duration
	msg        string
}

func (e *throttledError) Error() string { return "frontend throttled the request: " + e.msg }

// httpStatusError is a non-2xx answer without a wire error body.
type httpStatusError struct {
	status int
	body   string
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("frontend answered HTTP %d: %s", e.status, e.body)
}

// requestRetriable reports whether a whole request may succeed if sent again.
func requestRetriable(err error) bool {
	var te *transportError
	var th *throttledError
	var he *httpStatusError
	var pe *protocol.Error
	switch {
	case errors.As(err, &te), errors.As(err, &th):
		return true
	case errors.As(err, &he):
		return he.status >= 500
	case errors.As(err, &pe):
		return batchRetriable(pe.Code)
	}
	return false
}

// post sends batches of one topic to a frontend, trying the next ones when a
// frontend cannot be reached.
func (f *frontends) post(ctx context.Context, topic string, acks int8, batches []*batchBuf) (*frontendapi.BatchesResponse, error) {
	// The body is written from the batches' own bytes, not copied into one
	// buffer. net/http may still be writing it after Do returned (an early
	// answer, a cancel) while the batch's builder is reused: what such a
	// write sends then goes to a request already answered or torn down, and
	// a batch that is not the one its CRC covers is refused by the frontend.
	pbs := make([]frontendapi.PartitionBatch, len(batches))
	for i, bb := range batches {
		pbs[i] = frontendapi.PartitionBatch{Partition: bb.part.partition, Batch: bb.bytes}
	}
	segs, size := frontendapi.BatchesSegments(pbs)
	n := len(f.urls)
	start := int(f.next.Add(1) % uint64(n))
	var lastErr error
	for i := 0; i < n; i++ {
		idx := (start + i) % n
		if f.isDown(idx) && i < n-1 {
			continue
		}
		resp, err := f.once(ctx, f.urls[idx], topic, acks, segs, size)
		var te *transportError
		if err == nil || !errors.As(err, &te) || ctx.Err() != nil {
			return resp, err
		}
		f.markDown(idx)
		lastErr = err
	}
	return nil, lastErr
}

func (f *frontends) isDown(i int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.down[i])
}

func (f *frontends) markDown(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[i] = time.Now().Add(frontendDownFor)
}

func (f *frontends) once(ctx context.Context, base, topic string, acks int8, segs [][]byte, size int) (*frontendapi.BatchesResponse, error) {
	u := base + "/v1/topics/" + url.PathEscape(topic) + "/records?acks=" + strconv.Itoa(int(acks))
	if f.txnID != "" {
		u += "&transactional_id=" + url.QueryEscape(f.txnID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, &segmentsReader{segs: segs})
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(size)
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(&segmentsReader{segs: segs}), nil }
	req.Header.Set("Content-Type", frontendapi.ContentTypeBatches)
	req.Header.Set("X-Client-Id", f.clientID)
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, &transportError{fmt.Errorf("produce to %s: %w", base, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, &transportError{fmt.Errorf("produce answer from %s: %w", base, err)}
	}
	if resp.StatusCode == http.StatusOK {
		var out frontendapi.BatchesResponse
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, fmt.Errorf("produce answer from %s: %w", base, err)
		}
		return &out, nil
	}
	var eb struct {
		jsonhttp.ErrorBody
		frontendapi.BatchesResponse
	}
	_ = json.Unmarshal(data, &eb)
	if resp.StatusCode == http.StatusGatewayTimeout && len(eb.Results) > 0 {
		// The frontend's time ran out with some batches answered: each
		// batch's own result says whether it was written, failed for good,
		// or may be sent again (REQUEST_TIMED_OUT). Resending the whole
		// request would write the answered batches twice without
		// idempotence, and retry final errors until the delivery timeout.
		return &eb.BatchesResponse, nil
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return nil, &throttledError{retryAfter: time.Duration(max(secs, 0)) * time.Second, msg: eb.Error}
	}
	if eb.Error != "" {
		pe := &protocol.Error{Code: protocol.Code(eb.ErrorCode), Message: eb.Error}
		if resp.StatusCode >= 500 && !pe.Code.Retriable() {
			return nil, &httpStatusError{status: resp.StatusCode, body: pe.Error()}
		}
		return nil, pe
	}
	return nil, &httpStatusError{status: resp.StatusCode, body: string(bytes.TrimSpace(data))}
}

// segmentsReader reads a body kept in pieces; WriteTo hands each piece to the
// writer whole (no copy through a read buffer).
type segmentsReader struct {
	segs [][]byte
	off  int // read position in segs[0]
}

func (r *segmentsReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && len(r.segs) > 0 {
		c := copy(p[n:], r.segs[0][r.off:])
		n += c
		r.off += c
		if r.off == len(r.segs[0]) {
			r.segs, r.off = r.segs[1:], 0
		}
	}
	if n == 0 && len(r.segs) == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *segmentsReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for len(r.segs) > 0 {
		n, err := w.Write(r.segs[0][r.off:])
		total += int64(n)
		r.off += n
		if err != nil {
			return total, err
		}
		r.segs, r.off = r.segs[1:], 0
	}
	return total, nil
}
