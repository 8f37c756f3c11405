package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// electLeaders answers ElectLeaders: each topic's partitions go to the
// metadata controller's election of the type asked for (0 preferred, 1
// unclean; v0 is preferred). Null topics are every partition of every
// topic, and then, as in Kafka, the partitions that needed no election are
// left out of the answer. It needs an admin principal (Kafka asks for
// ALTER on the cluster).
func (b *Broker) electLeaders(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.ElectLeadersRequest)
	resp := kmsg.NewPtrElectLeadersResponse()
	unclean := r.Version >= 1 && r.ElectionType == 1
	all := r.Topics == nil
	asked := r.Topics
	if all {
		if snap := b.Snapshot(ctx); snap != nil {
			for _, t := range snap.Topics {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = t.Name
				asked = append(asked, rt)
			}
		}
	}
	admin := b.OnCluster(c, "ElectLeaders", cluster.OpAlter)
	if !admin && r.Version >= 1 {
		resp.ErrorCode = int16(protocol.ClusterAuthorizationFailed)
		return Reply{Msg: resp}
	}
	badType := r.Version >= 1 && r.ElectionType != 0 && r.ElectionType != 1
	return Reply{Async: func() Reply {
		ectx, cancel := b.adminContext(ctx, r.TimeoutMillis)
		defer cancel()
		for _, rt := range asked {
			out := kmsg.NewElectLeadersResponseTopic()
			out.Topic = rt.Topic
			answer := func(p int32, code protocol.Code, msg string) {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code.Kafka(protocol.AdminAnswer)
				if msg != "" {
					rp.ErrorMessage = &msg
				}
				out.Partitions = append(out.Partitions, rp)
			}
			var results []cluster.ElectResult
			var err error
			switch {
			case !admin:
				err = protocol.ClusterAuthorizationFailed.Err("elections need an admin principal")
			case badType:
				err = protocol.InvalidRequest.Err("election type %d: want 0 (preferred) or 1 (unclean)", r.ElectionType)
			default:
				results, err = b.admin.ElectLeaders(ectx, cluster.ElectRequest{Topic: rt.Topic, Partitions: rt.Partitions, Unclean: unclean})
			}
			if err != nil {
				for _, p := range rt.Partitions {
					answer(p, protocol.CodeOf(err), protocol.MessageOf(err))
				}
			}
			elected := false
			for _, res := range results {
				if all && res.Code == protocol.ElectionNotNeeded {
					continue
				}
				elected = elected || res.Code == protocol.None
				answer(res.Partition, res.Code, res.Error)
			}
			if elected {
				c.Log().Info("kafka leader election", "topic", rt.Topic, "unclean", unclean)
			}
			if len(out.Partitions) > 0 || !all {
				resp.Topics = append(resp.Topics, out)
			}
		}
		_, _ = b.model.Refresh(ctx) // the client's next Metadata sees the leaders
		return Reply{Msg: resp}
	}}
}
