package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
)

// Client talks to the metadata HTTP API (or to a frontend, which forwards the
// admin routes). It tries each address in turn and remembers the one that last
// answered. It is safe for concurrent use.
type Client struct {
	addrs []string
	http  *http.Client

	mu   sync.Mutex
	next int // index of the address to try first; guarded by mu
}

// NewClient returns a client for the given base URLs ("http://host:port" or
// "host:port").
func NewClient(addrs []string) *Client {
	norm := make([]string, 0, len(addrs))
	for _, a := range addrs {
		a = strings.TrimRight(strings.TrimSpace(a), "/")
		if a == "" {
			continue
		}
		if !strings.Contains(a, "://") {
			a = "http://" + a
		}
		norm = append(norm, a)
	}
	return &Client{addrs: norm, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
}

// Snapshot returns the current cluster metadata. The read is linearizable (the
// Raft leader answers after confirming its leadership), so it reflects every
// change acknowledged before it, such as a topic just created.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	var s Snapshot
	err := c.do(ctx, http.MethodGet, "/v1/cluster?consistent=true", nil, &s)
	return &s, err
}

// Watch long-polls for a snapshot newer than since, waiting at most wait; it
// returns the current snapshot (perhaps still at since) when wait passes.
func (c *Client) Watch(ctx context.Context, since uint64, wait time.Duration) (*Snapshot, error) {
	var s Snapshot
	q := "/v1/cluster?since=" + strconv.FormatUint(since, 10) + "&wait_ms=" + strconv.FormatInt(wait.Milliseconds(), 10)
	err := c.do(ctx, http.MethodGet, q, nil, &s)
	return &s, err
}

// CreateTopic creates a topic and returns it as placed.
func (c *Client) CreateTopic(ctx context.Context, req CreateTopicRequest) (*Topic, error) {
	var t Topic
	err := c.do(ctx, http.MethodPost, "/v1/topics", req, &t)
	return &t, err
}

// DeleteTopic deletes a topic and its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/topics/"+url.PathEscape(name), nil, nil)
}

// ListTopics returns every topic (a linearizable read).
func (c *Client) ListTopics(ctx context.Context) ([]Topic, error) {
	var out struct {
		Topics []Topic `json:"topics"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/topics?consistent=true", nil, &out)
	return out.Topics, err
}

// DescribeTopic returns one topic (a linearizable read).
func (c *Client) DescribeTopic(ctx context.Context, name string) (*Topic, error) {
	var t Topic
	err := c.do(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(name)+"?consistent=true", nil, &t)
	return &t, err
}

// Register registers a storage node and returns its new epoch.
func (c *Client) Register(ctx context.Context, req RegisterRequest) (int64, error) {
	var r RegisterResponse
	err := c.do(ctx, http.MethodPost, "/v1/nodes/register", req, &r)
	return r.Epoch, err
}

// Heartbeat renews a storage node's session.
func (c *Client) Heartbeat(ctx context.Context, req HeartbeatRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/nodes/heartbeat", req, nil)
}

// ErrNoAddress is returned by a client built with no address.
var ErrNoAddress = errors.New("cluster: no metadata address configured")

// do sends one request, trying every address once on connection errors and on
// NOT_CONTROLLER answers.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	if len(c.addrs) == 0 {
		return ErrNoAddress
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
		err := c.once(ctx, c.addrs[idx]+path, method, body, out)
		if err == nil {
			c.mu.Lock()
			c.next = idx
			c.mu.Unlock()
			return nil
		}
		lastErr = err
		if ctx.Err() != nil || !retryElsewhere(err) {
			return err
		}
	}
	return lastErr
}

func retryElsewhere(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code == protocol.NotController
	}
	return true // transport error
}

func (c *Client) once(ctx context.Context, u, method string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("metadata request %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("metadata response %s %s: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
			return &protocol.Error{Code: protocol.Code(eb.ErrorCode), Message: eb.Error}
		}
		return fmt.Errorf("metadata %s %s: HTTP %d: %s", method, u, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("metadata response %s %s: %w", method, u, err)
	}
	return nil
}
