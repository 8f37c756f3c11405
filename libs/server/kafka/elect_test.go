package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/protocol"
)

// TestElectLeaders: the election type and the partitions reach the metadata
// controller; null topics are every topic, without the partitions that
// needed no election; a topic the controller refuses answers its code on
// each partition; a principal that is no admin is refused.
func TestElectLeaders(t *testing.T) {
	b, _, a := testBroker(true)
	elect := func(who string, version int16, typ int8, topics map[string][]int32) (*kmsg.ElectLeadersResponse, string) {
		t.Helper()
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version, req.ElectionType, req.TimeoutMillis = version, typ, 5000
		if topics != nil {
			req.Topics = []kmsg.ElectLeadersRequestTopic{}
			for _, name := range []string{"audit", "nope", "orders"} {
				if ps, ok := topics[name]; ok {
					rt := kmsg.NewElectLeadersRequestTopic()
					rt.Topic, rt.Partitions = name, ps
					req.Topics = append(req.Topics, rt)
				}
			}
		}
		reply := b.electLeaders(context.Background(), connAs(who), req)
		if reply.Async != nil {
			reply = reply.Async()
		}
		resp := reply.Msg.(*kmsg.ElectLeadersResponse)
		var out []string
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				out = append(out, fmt.Sprintf("%s-%d:%d", rt.Topic, p.Partition, p.ErrorCode))
			}
		}
		return resp, strings.Join(out, " ")
	}
	_, got := elect("root", 2, 1, map[string][]int32{"orders": {0, 1}, "nope": {0}})
	if want := "nope-0:3 orders-0:0 orders-1:84"; got != want {
		t.Fatalf("unclean election: %s, want %s", got, want)
	}
	if len(a.elections) != 2 || !a.elections[1].Unclean || a.elections[1].Topic != "orders" {
		t.Fatalf("asked the controller: %+v", a.elections)
	}
	a.elections = nil
	_, got = elect("root", 2, 0, nil)
	if want := "audit-0:0 orders-0:0"; got != want { // partition 1 of each needed none
		t.Fatalf("every partition: %s, want %s", got, want)
	}
	if len(a.elections) != 2 || a.elections[0].Unclean || len(a.elections[0].Partitions) != 0 {
		t.Fatalf("asked the controller: %+v", a.elections)
	}
	if resp, _ := elect("alice", 2, 0, map[string][]int32{"orders": {0}}); resp.ErrorCode != int16(protocol.ClusterAuthorizationFailed) {
		t.Fatalf("alice: %+v", resp)
	}
	if _, got := elect("alice", 0, 0, map[string][]int32{"orders": {0}}); got != "orders-0:31" {
		t.Fatalf("alice at v0: %s", got)
	}
	if _, got := elect("root", 1, 5, map[string][]int32{"orders": {0}}); got != "orders-0:42" {
		t.Fatalf("an unknown election type: %s", got)
	}
}
