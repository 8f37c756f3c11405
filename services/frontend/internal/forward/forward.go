// Package forward relays HTTP requests verbatim to a replicated Sluice
// service, the way the frontend serves the offsets service's /v1/groups
// routes to clients that reach only the frontend.
//
// A Forwarder holds the replicas' base URLs and, like libs/jsonhttp's
// client, tries them in turn from the one that answered last: on a
// transport error, and on an answer carrying a "try another replica" code
// (NOT_COORDINATOR for offsets). Any other answer, error or not, is the
// service's and is relayed as it came: status, Content-Type and body.
//
// Invariants: the method, path (as the client escaped it), query and body
// reach the service unchanged; an answer body is read whole up to
// MaxResponse; a Forwarder holds no state but the index of the replica to
// try first.
package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/service"
)

// MaxResponse caps an answer's body.
const MaxResponse = 64 << 20

// ErrNoAddress is returned by a Forwarder built with no address.
var ErrNoAddress = errors.New("no service address configured")

// Headers passed through in each direction.
var (
	requestHeaders  = []string{"Content-Type", "Accept", "X-Request-Id", service.PrincipalHeader, service.ClientHostHeader}
	responseHeaders = []string{"Content-Type", "Retry-After"}
)

// Response is a service's answer.
type Response struct {
	Status int
	Header http.Header // only the headers relayed to the client
	Body   []byte
}

// Forwarder relays requests to one of several replicas. It is safe for
// concurrent use.
type Forwarder struct {
	name    string
	addrs   []string
	retryOn protocol.Code
	client  *http.Client

	mu   sync.Mutex
	next int // the replica to try first; guarded by mu
}

// New returns a Forwarder to the named service at the given base URLs
// ("http://host:port" or "host:port"); an answer with code retryElsewhere is
// retried on the next replica.
func New(name string, addrs []string, retryElsewhere protocol.Code) *Forwarder {
	return NewTLS(name, addrs, retryElsewhere, nil)
}

// NewTLS is New for a service serving HTTPS (cfg nil: New).
func NewTLS(name string, addrs []string, retryElsewhere protocol.Code, cfg *tls.Config) *Forwarder {
	return &Forwarder{name: name, addrs: jsonhttp.BaseURLsFor(addrs, cfg != nil), retryOn: retryElsewhere,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, TLSClientConfig: cfg}}}
}

// Addrs returns the normalized base URLs.
func (f *Forwarder) Addrs() []string { return f.addrs }

// Forward sends method pathAndQuery (beginning with "/") with body and the
// relayed headers of header to a replica and returns its answer. The error
// is for the case where no replica gave one: every replica unreachable or
// asking to try another, or ctx ended.
func (f *Forwarder) Forward(ctx context.Context, method, pathAndQuery string, header http.Header, body []byte) (*Response, error) {
	if len(f.addrs) == 0 {
		return nil, fmt.Errorf("%s: %w", f.name, ErrNoAddress)
	}
	f.mu.Lock()
	start := f.next
	f.mu.Unlock()
	var errs []error
	for i := range f.addrs {
		idx := (start + i) % len(f.addrs)
		resp, err := f.once(ctx, f.addrs[idx]+pathAndQuery, method, header, body)
		if err == nil && !f.askedElsewhere(resp) {
			f.mu.Lock()
			f.next = idx
			f.mu.Unlock()
			return resp, nil
		}
		if err == nil {
			err = fmt.Errorf("%s %s: HTTP %d: %s", f.name, f.addrs[idx], resp.Status, bytes.TrimSpace(resp.Body))
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("no %s replica answered: %w", f.name, errors.Join(errs...))
}

// askedElsewhere reports whether the answer is an error body with the
// try-another-replica code.
func (f *Forwarder) askedElsewhere(r *Response) bool {
	if r.Status/100 == 2 || f.retryOn == protocol.None {
		return false
	}
	var eb jsonhttp.ErrorBody
	return json.Unmarshal(r.Body, &eb) == nil && protocol.Code(eb.ErrorCode) == f.retryOn
}

func (f *Forwarder) once(ctx context.Context, url, method string, header http.Header, body []byte) (*Response, error) {
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for _, h := range requestHeaders {
		if v := header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s request %s %s: %w", f.name, method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("%s response %s %s: %w", f.name, method, url, err)
	}
	if len(data) > MaxResponse {
		return nil, fmt.Errorf("%s response %s %s: body over %d bytes", f.name, method, url, MaxResponse)
	}
	out := &Response{Status: resp.StatusCode, Header: http.Header{}, Body: data}
	for _, h := range responseHeaders {
		if v := resp.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	return out, nil
}

// Close drops idle connections.
func (f *Forwarder) Close() { f.client.CloseIdleConnections() }
