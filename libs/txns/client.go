package txns

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/jsonhttp"
)

// Client talks to the offsets service's transaction coordinator. Any
// replica accepts every request (it forwards to the leader); the client
// tries the next replica when one cannot be reached or answers
// NOT_COORDINATOR. It is safe for concurrent use.
type Client struct {
	jc *jsonhttp.Client
}

// NewClient returns a client of the offsets replicas at addrs.
func NewClient(addrs []string) *Client { return NewClientTLS(addrs, nil) }

// NewClientTLS is NewClient over HTTPS with cfg (nil: NewClient).
func NewClientTLS(addrs []string, cfg *tls.Config) *Client {
	return &Client{jc: groups.OffsetsConn(addrs, cfg)}
}

// For returns a copy of c whose requests act for principal (a frontend
// relaying a Kafka client's requests). It shares c's connections.
func (c *Client) For(principal, host string) *Client {
	if principal == "" {
		return c
	}
	return &Client{jc: groups.ActFor(c.jc, principal, host)}
}

func txnPath(id string) string { return "/v1/txns/" + url.PathEscape(id) }

// Init starts a producer session of a transactional id.
func (c *Client) Init(ctx context.Context, id string, req InitRequest) (Producer, error) {
	var out Producer
	err := c.jc.Do(ctx, http.MethodPost, txnPath(id)+"/init", req, &out)
	return out, err
}

// AddPartitions adds partitions to the session's transaction (or, with
// VerifyOnly, checks they are in it).
func (c *Client) AddPartitions(ctx context.Context, id string, req AddPartitionsRequest) error {
	return c.jc.Do(ctx, http.MethodPost, txnPath(id)+"/partitions", req, nil)
}

// AddGroup adds a consumer group to the session's transaction.
func (c *Client) AddGroup(ctx context.Context, id string, req AddGroupRequest) error {
	return c.jc.Do(ctx, http.MethodPost, txnPath(id)+"/groups", req, nil)
}

// CommitOffsets sends a group's offsets within the transaction.
func (c *Client) CommitOffsets(ctx context.Context, id string, req CommitOffsetsRequest) error {
	return c.jc.Do(ctx, http.MethodPost, txnPath(id)+"/offsets", req, nil)
}

// End commits or aborts the session's transaction and returns the producer
// id and epoch to continue with (a new epoch under transaction version 2).
func (c *Client) End(ctx context.Context, id string, req EndRequest) (Producer, error) {
	var out Producer
	err := c.jc.Do(ctx, http.MethodPost, txnPath(id)+"/end", req, &out)
	return out, err
}

// Describe returns a transactional id's state (TRANSACTIONAL_ID_NOT_FOUND
// when it has none).
func (c *Client) Describe(ctx context.Context, id string) (*Description, error) {
	var out Description
	err := c.jc.Do(ctx, http.MethodGet, txnPath(id), nil, &out)
	return &out, err
}

// List lists the transactional ids, of the given states only when any are
// given.
func (c *Client) List(ctx context.Context, states ...string) ([]Description, error) {
	var out ListResponse
	p := "/v1/txns"
	for i, s := range states {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		p += sep + "state=" + url.QueryEscape(s)
	}
	err := c.jc.Do(ctx, http.MethodGet, p, nil, &out)
	return out.Transactions, err
}
