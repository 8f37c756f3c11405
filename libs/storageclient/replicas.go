package storageclient

import (
	"context"
	"fmt"

	"github.com/sluicemq/sluice/libs/protocol"
)

// DescribeReplicas asks the storage node at addr for the state of its
// replicas of topic (of every topic when topic is ""): role, leader epoch,
// log range, high watermark, flushed offset and size, ordered by topic and
// partition. ctx bounds the dial and the call; a call that times out drops
// the connection, as every call on a Conn does.
func (p *Pool) DescribeReplicas(ctx context.Context, addr, topic string) ([]protocol.ReplicaInfo, error) {
	c, err := p.Get(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("describe replicas on %s: %w", addr, err)
	}
	var resp protocol.DescribeReplicasResponse
	if _, err := c.Call(ctx, protocol.APIDescribeReplicas, &protocol.DescribeReplicasRequest{Topic: topic}, nil, &resp); err != nil {
		return nil, fmt.Errorf("describe replicas on %s: %w", addr, err)
	}
	return resp.Replicas, nil
}
