package cluster

import (
	"context"
	"net/http"
)

// Remote garbage: when a topic is deleted, the metadata service drops the
// remote logs of its partitions and keeps their segments in a garbage list
// until the storage nodes have deleted the objects from the store and say
// so (POST /v1/remote/garbage/clear). The list is by topic and partition,
// as RemoteLogs (GET /v1/remote/garbage).

// ClearRemoteGarbageRequest is the body of POST /v1/remote/garbage/clear:
// Objects of the partition's garbage were deleted from the store and leave
// the list. Objects not in the list are ignored, so a retry is safe.
type ClearRemoteGarbageRequest struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Objects   []string `json:"objects"`
}

// RemoteGarbage returns the remote segments of deleted topics whose objects
// are still to be deleted from the store, by topic and partition.
func (c *Client) RemoteGarbage(ctx context.Context) ([]RemoteLog, error) {
	var out []RemoteLog
	err := c.do(ctx, http.MethodGet, "/v1/remote/garbage", nil, &out)
	return out, err
}

// ClearRemoteGarbage removes deleted objects from the garbage list.
func (c *Client) ClearRemoteGarbage(ctx context.Context, req ClearRemoteGarbageRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/remote/garbage/clear", req, nil)
}
