package groups

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Client talks to the offsets service. Any replica accepts every request (it
// forwards to the leader); the client tries the next replica when one cannot
// be reached or answers NOT_COORDINATOR. It is safe for concurrent use.
type Client struct {
	jc *jsonhttp.Client
}

// NewClient returns a client of the offsets replicas at addrs.
func NewClient(addrs []string) *Client { return NewClientTLS(addrs, nil) }

// NewClientTLS is NewClient over HTTPS with cfg (nil: NewClient).
func NewClientTLS(addrs []string, cfg *tls.Config) *Client {
	return &Client{jc: OffsetsConn(addrs, cfg)}
}

// For returns a copy of c whose requests act for principal, from host (a frontend
// relaying a Kafka client's group requests; the offsets service trusts the
// name from the cluster's own services only). It shares c's connections.
func (c *Client) For(principal, host string) *Client {
	if principal == "" {
		return c
	}
	return &Client{jc: ActFor(c.jc, principal, host)}
}

// OffsetsConn is the connection the offsets service's clients (this
// package's, libs/txns' and libs/shares') are built on: over HTTPS with
// cfg (nil: HTTP), trying the next replica when one cannot be reached or
// answers NOT_COORDINATOR.
func OffsetsConn(addrs []string, cfg *tls.Config) *jsonhttp.Client {
	return jsonhttp.NewTLS("offsets", addrs, func(c protocol.Code) bool { return c == protocol.NotCoordinator }, cfg)
}

// ActFor returns a copy of jc whose requests act for principal, from host
// (the headers the offsets service reads); it shares jc's connections.
func ActFor(jc *jsonhttp.Client, principal, host string) *jsonhttp.Client {
	return jc.WithHeader(PrincipalHeader, principal).WithHeader(ClientHostHeader, host)
}

// PrincipalHeader is libs/server/service's PrincipalHeader, named here so that
// the SDK's clients do not depend on the services' framework.
const PrincipalHeader = "X-Sluice-Principal"

// ClientHostHeader is libs/server/service's ClientHostHeader, named here as
// PrincipalHeader is.
const ClientHostHeader = "X-Sluice-Client-Host"

// DeleteOffsets removes a group's committed offsets of a topic.
func (c *Client) DeleteOffsets(ctx context.Context, group string, req DeleteOffsetsRequest) error {
	return c.jc.Do(ctx, http.MethodPost, groupPath(group)+"/delete-offsets", req, nil)
}

func groupPath(group string) string { return "/v1/groups/" + url.PathEscape(group) }

// Heartbeat sends a member's heartbeat (join, renew, report, leave).
func (c *Client) Heartbeat(ctx context.Context, group string, req HeartbeatRequest) (*HeartbeatResponse, error) {
	var out HeartbeatResponse
	err := c.jc.Do(ctx, http.MethodPost, groupPath(group)+"/heartbeat", req, &out)
	return &out, err
}

// Commit commits offsets, all or nothing.
func (c *Client) Commit(ctx context.Context, group string, req CommitRequest) error {
	return c.jc.Do(ctx, http.MethodPost, groupPath(group)+"/offsets", req, nil)
}

// Offsets returns a group's committed offsets, of one topic or ("") all.
func (c *Client) Offsets(ctx context.Context, group, topic string) ([]Committed, error) {
	var out OffsetsResponse
	p := groupPath(group) + "/offsets"
	if topic != "" {
		p += "?topic=" + url.QueryEscape(topic)
	}
	err := c.jc.Do(ctx, http.MethodGet, p, nil, &out)
	return out.Offsets, err
}

// MemberOffsets is Offsets (of every topic) as a member of the group reads
// them (Kafka's OffsetFetch v9+): a member of a consumer-protocol group must
// name its current member epoch, or the answer is STALE_MEMBER_EPOCH (or
// UNKNOWN_MEMBER_ID for a member that is gone). With memberID empty it is
// any reader's. The answer names the partitions whose offsets an open
// transaction holds (OffsetsResponse.Pending).
func (c *Client) MemberOffsets(ctx context.Context, group, memberID string, memberEpoch int32) (*OffsetsResponse, error) {
	var out OffsetsResponse
	p := groupPath(group) + "/offsets"
	if memberID != "" {
		p += "?member_id=" + url.QueryEscape(memberID) + "&member_epoch=" + strconv.Itoa(int(memberEpoch))
	}
	err := c.jc.Do(ctx, http.MethodGet, p, nil, &out)
	return &out, err
}

// List lists the groups.
func (c *Client) List(ctx context.Context) ([]Listing, error) {
	var out ListResponse
	err := c.jc.Do(ctx, http.MethodGet, "/v1/groups", nil, &out)
	return out.Groups, err
}

// Describe describes a group with its members and per-partition lag.
func (c *Client) Describe(ctx context.Context, group string) (*Description, error) {
	var out Description
	err := c.jc.Do(ctx, http.MethodGet, groupPath(group), nil, &out)
	return &out, err
}

// ResetOffsets moves the committed offsets of a group without members.
func (c *Client) ResetOffsets(ctx context.Context, group string, req ResetRequest) ([]Committed, error) {
	var out ResetResponse
	err := c.jc.Do(ctx, http.MethodPost, groupPath(group)+"/reset-offsets", req, &out)
	return out.Offsets, err
}

// Delete deletes a group without members and its offsets.
func (c *Client) Delete(ctx context.Context, group string) error {
	return c.jc.Do(ctx, http.MethodDelete, groupPath(group), nil, nil)
}
