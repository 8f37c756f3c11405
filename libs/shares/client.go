package shares

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/jsonhttp"
)

// Client talks to the offsets service's share-group API:
//
//	GET    /v1/share-groups                      list
//	GET    /v1/share-groups/{group}              describe
//	DELETE /v1/share-groups/{group}              delete (no record under lock)
//	POST   /v1/share-groups/{group}/acquire      acquire records
//	POST   /v1/share-groups/{group}/acks         acknowledge records
//	POST   /v1/share-groups/{group}/leave        release a consumer's records
//	POST   /v1/share-groups/{group}/config       set configuration values
//	POST   /v1/share-groups/{group}/reset-offsets
//
// Any replica accepts every request (it forwards to the leader); the client
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
// relaying a client's requests). It shares c's connections.
func (c *Client) For(principal, host string) *Client {
	if principal == "" {
		return c
	}
	return &Client{jc: groups.ActFor(c.jc, principal, host)}
}

// Path is a group's path in the API.
func Path(group string) string { return "/v1/share-groups/" + url.PathEscape(group) }

// Acquire acquires records for a consumer, waiting up to req.WaitMs when
// none are available. Like Ack it is sent at most once
// (jsonhttp.Client.DoAtMostOnce): the acknowledgements it carries are not
// idempotent, so an error may leave them applied or not.
func (c *Client) Acquire(ctx context.Context, group string, req AcquireRequest) (*AcquireResponse, error) {
	var out AcquireResponse
	err := c.jc.DoAtMostOnce(ctx, http.MethodPost, Path(group)+"/acquire", req, &out)
	return &out, err
}

// Ack acknowledges records; each partition's result is in the answer.
func (c *Client) Ack(ctx context.Context, group string, req AckRequest) (*AckResponse, error) {
	var out AckResponse
	err := c.jc.DoAtMostOnce(ctx, http.MethodPost, Path(group)+"/acks", req, &out)
	return &out, err
}

// Leave releases every record the consumer holds.
func (c *Client) Leave(ctx context.Context, group, member string) error {
	return c.jc.Do(ctx, http.MethodPost, Path(group)+"/leave", LeaveRequest{MemberID: member}, nil)
}

// Configure sets configuration values, creating the group.
func (c *Client) Configure(ctx context.Context, group string, set map[string]string) error {
	return c.jc.Do(ctx, http.MethodPost, Path(group)+"/config", ConfigRequest{Set: set}, nil)
}

// Reset moves partitions of a group without records of the topic under
// lock and returns their new start offsets.
func (c *Client) Reset(ctx context.Context, group string, req ResetRequest) ([]groups.Committed, error) {
	var out groups.ResetResponse
	err := c.jc.Do(ctx, http.MethodPost, Path(group)+"/reset-offsets", req, &out)
	return out.Offsets, err
}

// DeleteOffsets removes a group's state of a topic's partitions, refused
// while records of the topic are under lock.
func (c *Client) DeleteOffsets(ctx context.Context, group, topic string) error {
	return c.jc.Do(ctx, http.MethodPost, Path(group)+"/delete-offsets", DeleteOffsetsRequest{Topic: topic}, nil)
}

// Delete deletes a group without records under lock.
func (c *Client) Delete(ctx context.Context, group string) error {
	return c.jc.Do(ctx, http.MethodDelete, Path(group), nil, nil)
}

// Describe describes a group (GROUP_ID_NOT_FOUND when there is none).
func (c *Client) Describe(ctx context.Context, group string) (*Description, error) {
	var out Description
	err := c.jc.Do(ctx, http.MethodGet, Path(group), nil, &out)
	return &out, err
}

// List lists the share groups.
func (c *Client) List(ctx context.Context) ([]Listing, error) {
	var out ListResponse
	err := c.jc.Do(ctx, http.MethodGet, "/v1/share-groups", nil, &out)
	return out.Groups, err
}
