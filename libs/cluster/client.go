package cluster

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Client talks to the metadata HTTP API (or to a frontend, which forwards the
// admin routes). It tries each address in turn and remembers the one that last
// answered. It is safe for concurrent use.
type Client struct {
	jc *jsonhttp.Client
}

// NewClient returns a client for the given base URLs ("http://host:port" or
// "host:port").
func NewClient(addrs []string) *Client { return NewClientTLS(addrs, nil) }

// NewClientTLS is NewClient over HTTPS with cfg (nil: NewClient).
func NewClientTLS(addrs []string, cfg *tls.Config) *Client {
	return &Client{jc: jsonhttp.NewTLS("metadata", addrs, func(c protocol.Code) bool { return c == protocol.NotController }, cfg)}
}

// WithToken returns a client that authenticates with a bearer token, for
// frontends that require authentication (-require-auth).
func (c *Client) WithToken(token string) *Client { return &Client{jc: c.jc.WithToken(token)} }

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

// AlterTopicConfig changes a topic's configuration and returns the topic.
func (c *Client) AlterTopicConfig(ctx context.Context, name string, req AlterTopicConfigRequest) (*Topic, error) {
	var t Topic
	err := c.do(ctx, http.MethodPatch, "/v1/topics/"+url.PathEscape(name)+"/config", req, &t)
	return &t, err
}

// AddPartitions grows a topic to req.Partitions partitions and returns it.
func (c *Client) AddPartitions(ctx context.Context, name string, req AddPartitionsRequest) (*Topic, error) {
	var t Topic
	err := c.do(ctx, http.MethodPost, "/v1/topics/"+url.PathEscape(name)+"/partitions", req, &t)
	return &t, err
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

// InitProducerID allocates a new idempotent producer id (POST /v1/producers,
// on metadata or forwarded by a frontend).
func (c *Client) InitProducerID(ctx context.Context) (InitProducerIDResponse, error) {
	var r InitProducerIDResponse
	err := c.do(ctx, http.MethodPost, "/v1/producers", struct{}{}, &r)
	return r, err
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
var ErrNoAddress = jsonhttp.ErrNoAddress

// do sends one request, trying every address once on connection errors and on
// NOT_CONTROLLER answers.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.jc.Do(ctx, method, path, in, out)
}
