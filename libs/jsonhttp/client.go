// Package jsonhttp is the JSON-over-HTTP client shared by the SDK's clients of
// the metadata and offsets services: a list of replicas tried in turn, the one
// that last answered remembered, and error bodies turned into wire errors.
package jsonhttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/sluicemq/sluice/libs/protocol"
)

// ErrorBody is the JSON body of every error answer of Sluice's HTTP APIs.
type ErrorBody struct {
	ErrorCode int16  `json:"error_code"`
	Error     string `json:"error"`
}

// ErrNoAddress is returned by a client built with no address.
var ErrNoAddress = errors.New("no service address configured")

// maxResponse caps an answer's body.
const maxResponse = 64 << 20

// Client sends JSON requests to one of several replicas of a service. It is
// safe for concurrent use.
type Client struct {
	name    string   // service name, for error messages
	addrs   []string // base URLs
	http    *http.Client
	retryOn func(protocol.Code) bool
	token   string      // sent as "Authorization: Bearer"; empty: none
	headers [][2]string // more headers' names and values

	mu   sync.Mutex
	next int // index of the address to try first; guarded by mu
}

// LeaderHeader names, in an answer that a replica relayed to its Raft
// group's leader, the leader's address (host:port): a Client sends its
// next requests there first, saving the relay.
const LeaderHeader = "X-Sluice-Leader"

// New returns a client of the named service at the given base URLs
// ("http://host:port" or "host:port"). A request is tried on the next address
// after a transport error or an answer whose code retryElsewhere accepts (the
// "not the leader and could not forward" codes).
func New(name string, addrs []string, retryElsewhere func(protocol.Code) bool) *Client {
	return NewTLS(name, addrs, retryElsewhere, nil)
}

// NewTLS is New for a service that serves HTTPS: cfg verifies the server
// (and presents a client certificate for mutual TLS), and addresses without
// a scheme mean https. A nil cfg is New.
func NewTLS(name string, addrs []string, retryElsewhere func(protocol.Code) bool, cfg *tls.Config) *Client {
	return &Client{name: name, addrs: BaseURLsFor(addrs, cfg != nil), retryOn: retryElsewhere,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, TLSClientConfig: cfg}}}
}

// BaseURLs normalizes service addresses ("http://host:port" or "host:port",
// spaces and trailing slashes ignored) into base URLs, dropping empty ones.
func BaseURLs(addrs []string) []string { return BaseURLsFor(addrs, false) }

// BaseURLsFor is BaseURLs where an address without a scheme gets https when
// secure is set.
func BaseURLsFor(addrs []string, secure bool) []string {
	scheme := "http://"
	if secure {
		scheme = "https://"
	}
	norm := make([]string, 0, len(addrs))
	for _, a := range addrs {
		a = strings.TrimRight(strings.TrimSpace(a), "/")
		if a == "" {
			continue
		}
		if !strings.Contains(a, "://") {
			a = scheme + a
		}
		norm = append(norm, a)
	}
	return norm
}

// WithToken returns a copy of c that authenticates with a bearer token
// (frontends that require authentication); it shares c's connections.
func (c *Client) WithToken(token string) *Client {
	return &Client{name: c.name, addrs: c.addrs, http: c.http, retryOn: c.retryOn, token: token, headers: c.headers}
}

// WithHeader returns a copy of c that sends one more header with every
// request; it shares c's connections.
func (c *Client) WithHeader(name, value string) *Client {
	headers := append(slices.Clip(c.headers), [2]string{name, value})
	return &Client{name: c.name, addrs: c.addrs, http: c.http, retryOn: c.retryOn, token: c.token, headers: headers}
}

// Addrs returns the normalized base URLs.
func (c *Client) Addrs() []string { return c.addrs }

// Do sends one request (in marshalled as JSON unless nil) and decodes a 2xx
// answer into out (unless nil). A non-2xx answer with an error body becomes a
// *protocol.Error. It tries every address once on transport errors and
// retry-elsewhere codes.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	return c.do(ctx, method, path, in, out, false)
}

// DoAtMostOnce is Do for a request that must not apply twice (it is not
// idempotent): it tries another address only when this one surely did not
// take the request (it refused the connection, or answered a
// retry-elsewhere code). When a request may have been delivered and its
// answer was lost, it returns that error: the outcome is unknown, and a
// second attempt could answer for the first one's effect (an
// acknowledgement refused because the first attempt applied it).
func (c *Client) DoAtMostOnce(ctx context.Context, method, path string, in, out any) error {
	return c.do(ctx, method, path, in, out, true)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any, atMostOnce bool) error {
	if len(c.addrs) == 0 {
		return fmt.Errorf("%s: %w", c.name, ErrNoAddress)
	}
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	c.mu.Lock()
	start := c.next
	c.mu.Unlock()
	var lastErr error
	for i := range c.addrs {
		idx := (start + i) % len(c.addrs)
		leader, err := c.once(ctx, c.addrs[idx]+path, method, body, out)
		if err == nil {
			if i := c.indexOf(leader); i >= 0 {
				idx = i // relayed: the next request goes to the leader
			}
			c.mu.Lock()
			c.next = idx
			c.mu.Unlock()
			return nil
		}
		lastErr = err
		if ctx.Err() != nil || !c.retryElsewhere(err) || atMostOnce && mayHaveArrived(err) {
			return err
		}
	}
	return lastErr
}

func (c *Client) retryElsewhere(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return c.retryOn != nil && c.retryOn(pe.Code)
	}
	return true // transport error
}

// mayHaveArrived reports whether a failed request may have reached the
// service: every transport error but a refused or failed connection.
func mayHaveArrived(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return false // the service answered: it decided
	}
	var op *net.OpError
	return !errors.As(err, &op) || op.Op != "dial"
}

// indexOf returns the index of the address whose host:port is hostPort,
// -1 when none is.
func (c *Client) indexOf(hostPort string) int {
	if hostPort == "" {
		return -1
	}
	for i, a := range c.addrs {
		if _, rest, ok := strings.Cut(a, "://"); ok && rest == hostPort || a == hostPort {
			return i
		}
	}
	return -1
}

// once sends one request and decodes the answer; leader is the answer's
// LeaderHeader.
func (c *Client) once(ctx context.Context, u, method string, body []byte, out any) (leader string, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for _, h := range c.headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s request %s %s: %w", c.name, method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return "", fmt.Errorf("%s response %s %s: %w", c.name, method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			// The status goes with the error, so that a service relaying it
			// answers as the service that decided did.
			return "", &protocol.Error{Code: protocol.Code(eb.ErrorCode), Message: eb.Error, Status: resp.StatusCode}
		}
		return "", fmt.Errorf("%s %s %s: HTTP %d: %s", c.name, method, u, resp.StatusCode, bytes.TrimSpace(data))
	}
	leader = resp.Header.Get(LeaderHeader)
	if out == nil || len(data) == 0 {
		return leader, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return "", fmt.Errorf("%s response %s %s: %w", c.name, method, u, err)
	}
	return leader, nil
}
