package kafka

import (
	"context"
	"hash/fnv"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/txns"
)

// FindCoordinator's coordinator types.
const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// GroupCoordinator is the frontend a group's (or a transactional id's)
// Kafka clients go to: one of the registered frontends, chosen by a hash of
// the id so they spread over them and every broker names the same one. Any
// frontend could serve any group or transactional id (they relay to the
// offsets service, their one owner); a stable choice keeps a group's
// members on one connection each.
func GroupCoordinator(snap *cluster.Snapshot, group string) (cluster.Frontend, bool) {
	if snap == nil || len(snap.Frontends) == 0 {
		return cluster.Frontend{}, false
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	return snap.Frontends[h.Sum32()%uint32(len(snap.Frontends))], true
}

// findCoordinator answers FindCoordinator (one key before v4, several
// after) on every broker: storage nodes are brokers too, and clients ask
// whichever broker they like. A key the principal may not describe is
// refused, as Kafka asks DESCRIBE on the group or transactional id.
func (b *Broker) findCoordinator(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	r := req.(*kmsg.FindCoordinatorRequest)
	resp := kmsg.NewPtrFindCoordinatorResponse()
	keys := r.CoordinatorKeys
	if r.Version < 4 {
		keys = []string{r.CoordinatorKey}
	}
	snap := b.Snapshot(ctx)
	for _, key := range keys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key = key
		f, found := GroupCoordinator(snap, key)
		var hp hostPort
		var err error
		if found {
			hp, err = splitHostPort(f.KafkaAddr)
		}
		txn := r.CoordinatorType == coordinatorTransaction
		switch {
		case r.CoordinatorType != coordinatorGroup && !txn:
			co.ErrorCode = int16(protocol.InvalidRequest)
			co.ErrorMessage = kmsg.StringPtr("unknown coordinator type " + strconv.Itoa(int(r.CoordinatorType)))
		case txn && txns.ValidateID(key) != nil:
			co.ErrorCode = int16(protocol.InvalidRequest)
			co.ErrorMessage = kmsg.StringPtr(txns.ValidateID(key).Error())
		case txn && !b.DescribesTransaction(c, "FindCoordinator", key):
			co.ErrorCode = int16(protocol.TransactionalIDAuthorizationFailed)
		case !txn && groups.ValidateGroupID(key) != nil:
			co.ErrorCode = int16(protocol.InvalidGroupID)
		case !txn && !b.DescribesGroup(c, "FindCoordinator", key):
			co.ErrorCode = int16(protocol.GroupAuthorizationFailed)
		case !found || err != nil:
			co.ErrorCode = int16(protocol.CoordinatorNotAvailable)
			co.ErrorMessage = kmsg.StringPtr("no frontend is registered with metadata")
		default:
			co.NodeID, co.Host, co.Port = f.ID, hp.host, hp.port
		}
		if co.ErrorCode != 0 {
			co.NodeID, co.Host, co.Port = -1, "", -1
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	if r.Version < 4 && len(resp.Coordinators) == 1 {
		co := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
		resp.Coordinators = nil
	}
	return Reply{Msg: resp}
}

// listNoGroups answers ListGroups on a broker that coordinates no group (a
// storage node): clients ask every broker and merge the answers.
func (b *Broker) listNoGroups(_ context.Context, _ *Conn, _ kmsg.Request) Reply {
	return Reply{Msg: kmsg.NewPtrListGroupsResponse()}
}

// listNoTransactions answers ListTransactions on a broker that coordinates
// no transactional id (a storage node): clients ask every broker and merge
// the answers.
func (b *Broker) listNoTransactions(_ context.Context, _ *Conn, _ kmsg.Request) Reply {
	return Reply{Msg: kmsg.NewPtrListTransactionsResponse()}
}
