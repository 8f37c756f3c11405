package kafkaapi

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/kafka"
	"github.com/sluicemq/sluice/libs/txns"
	"github.com/sluicemq/sluice/services/frontend/internal/txnjoin"
)

// Transactions: FindCoordinator names a frontend per transactional id (as
// per group), and that frontend relays the transaction APIs to the offsets
// service's transaction coordinator (libs/txns), as it does the group
// APIs. The cluster runs transaction version 2 (kafka.TransactionVersion):
// a client that sees it sends Produce v12, TxnOffsetCommit v5 and EndTxn
// v5, and the frontend adds the partitions and the group to the
// transaction itself; EndTxn bumps the epoch. An older client (version 1)
// adds them with AddPartitionsToTxn and AddOffsetsToTxn, and its
// transactional produce requests have their partitions checked against the
// open transaction first (KIP-890 part 1), so a late write of a
// transaction that ended cannot open a new one.

// txnJoinWait bounds how long a TxnOffsetCommit v5 waits for the
// producer's previous transaction to complete before its group joins the
// next one.
const txnJoinWait = 10 * time.Second

// txnsFor is the coordinator client acting for the connection's principal.
func (s *Service) txnsFor(c *kafka.Conn) *txns.Client {
	name, _ := c.Principal()
	return s.txns.For(name, c.Host())
}

// initProducerID answers InitProducerId: with a transactional id it starts
// a session at the coordinator; without one it is the broker's idempotent
// producer id.
func (s *Service) initProducerID(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID == nil {
		return s.idempotentProducerID(ctx, c, req)
	}
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if !s.broker.Transacts(c, "InitProducerId", *r.TransactionalID) {
		resp.ErrorCode = int16(protocol.TransactionalIDAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	pid, epoch := int64(-1), int16(-1)
	if r.Version >= 3 {
		pid, epoch = r.ProducerID, r.ProducerEpoch
	}
	client, id := s.txnsFor(c), *r.TransactionalID
	return kafka.Reply{Async: func() kafka.Reply {
		p, err := client.Init(c.Context(), id, txns.InitRequest{TimeoutMs: r.TransactionTimeoutMillis, ProducerID: pid, ProducerEpoch: epoch})
		if resp.ErrorCode = txnCode(err, r.Version); resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = p.ProducerID, p.ProducerEpoch
		}
		return kafka.Reply{Msg: resp}
	}}
}

// txnCode is the Kafka error code of a coordinator answer. PRODUCER_FENCED
// came with Kafka 2.7 (InitProducerId v4, EndTxn v3 and the like); older
// requests are answered INVALID_PRODUCER_EPOCH, which their clients know.
func txnCode(err error, version int16) int16 {
	code := protocol.KafkaOf(err, protocol.CoordinatorAnswer)
	if code == int16(protocol.ProducerFenced) && version < 3 {
		return int16(protocol.InvalidProducerEpoch)
	}
	return code
}

// addPartitionsToTxn answers AddPartitionsToTxn v0-v3 (a client's own;
// v4+ is Kafka's broker-to-coordinator form, not advertised).
func (s *Service) addPartitionsToTxn(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	resp := kmsg.NewPtrAddPartitionsToTxnResponse()
	add := txns.AddPartitionsRequest{Producer: txns.Producer{ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch}}
	refused := false
	transacts := s.broker.Transacts(c, "AddPartitionsToTxn", r.TransactionalID)
	for _, rt := range r.Topics {
		out := kmsg.NewAddPartitionsToTxnResponseTopic()
		out.Topic = rt.Topic
		code := int16(0)
		switch {
		case !transacts:
			code = int16(protocol.TransactionalIDAuthorizationFailed)
		case !s.broker.Allowed(c, cluster.OpProduce, rt.Topic):
			code = int16(protocol.TopicAuthorizationFailed)
		case !s.knownTopic(rt.Topic, rt.Partitions):
			code = int16(protocol.UnknownTopicOrPartition)
		}
		refused = refused || code != 0
		for _, p := range rt.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			out.Partitions = append(out.Partitions, rp)
			add.Partitions = append(add.Partitions, groups.TP{Topic: rt.Topic, Partition: p})
		}
		resp.Topics = append(resp.Topics, out)
	}
	if refused {
		// Kafka's rule: one partition refused, none added; the others
		// answer OPERATION_NOT_ATTEMPTED.
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
					p.ErrorCode = int16(protocol.OperationNotAttempted)
				}
			}
		}
		return kafka.Reply{Msg: resp}
	}
	client, id := s.txnsFor(c), r.TransactionalID
	return kafka.Reply{Async: func() kafka.Reply {
		code := txnCode(client.AddPartitions(c.Context(), id, add), r.Version)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return kafka.Reply{Msg: resp}
	}}
}

// knownTopic reports whether the topic exists with these partitions.
func (s *Service) knownTopic(topic string, partitions []int32) bool {
	t, ok := s.topic(topic)
	if !ok {
		return false
	}
	for _, p := range partitions {
		if p < 0 || int(p) >= len(t.Partitions) {
			return false
		}
	}
	return true
}

// addOffsetsToTxn answers AddOffsetsToTxn.
func (s *Service) addOffsetsToTxn(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	resp := kmsg.NewPtrAddOffsetsToTxnResponse()
	if !s.broker.Transacts(c, "AddOffsetsToTxn", r.TransactionalID) {
		resp.ErrorCode = int16(protocol.TransactionalIDAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	if !s.broker.UsesGroups(c, "AddOffsetsToTxn", r.Group) {
		resp.ErrorCode = int16(protocol.GroupAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	client := s.txnsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		err := client.AddGroup(c.Context(), r.TransactionalID, txns.AddGroupRequest{
			Producer: txns.Producer{ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch}, Group: r.Group})
		resp.ErrorCode = txnCode(err, r.Version)
		return kafka.Reply{Msg: resp}
	}}
}

// txnOffsetCommit answers TxnOffsetCommit: the offsets join the
// transaction and become the group's when it commits.
func (s *Service) txnOffsetCommit(ctx context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	commit := txns.CommitOffsetsRequest{Producer: txns.Producer{ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch}, Group: r.Group}
	if r.Version >= 3 && r.MemberID != "" {
		commit.MemberID, commit.GenerationID = r.MemberID, r.Generation
	}
	type slot struct{ t, p int }
	var pending []slot
	transacts := s.broker.Transacts(c, "TxnOffsetCommit", r.TransactionalID)
	usesGroups := s.broker.UsesGroups(c, "TxnOffsetCommit", r.Group)
	for i, rt := range r.Topics {
		out := kmsg.NewTxnOffsetCommitResponseTopic()
		out.Topic = rt.Topic
		code := int16(0)
		switch {
		case !transacts:
			code = int16(protocol.TransactionalIDAuthorizationFailed)
		case !usesGroups:
			code = int16(protocol.GroupAuthorizationFailed)
		case !s.broker.Allowed(c, cluster.OpConsume, rt.Topic):
			code = int16(protocol.TopicAuthorizationFailed)
		}
		for j, rp := range rt.Partitions {
			p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			out.Partitions = append(out.Partitions, p)
			if code == 0 {
				commit.Offsets = append(commit.Offsets, groups.Offset{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, Metadata: deref(rp.Metadata),
					LeaderEpoch: groups.EpochOf(rp.LeaderEpoch)})
				pending = append(pending, slot{i, j})
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	if len(pending) == 0 {
		return kafka.Reply{Msg: resp}
	}
	client := s.txnsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		var err error
		if r.Version >= 5 { // transaction version 2: the group joins the transaction here
			ctx, cancel := context.WithTimeout(c.Context(), txnJoinWait)
			err = txnjoin.WhileConcurrent(ctx, func() error {
				return client.AddGroup(ctx, r.TransactionalID, txns.AddGroupRequest{Producer: commit.Producer, Group: r.Group, V2: true})
			})
			cancel()
		}
		if err == nil {
			err = client.CommitOffsets(c.Context(), r.TransactionalID, commit)
		}
		code := txnCode(err, r.Version)
		for _, sl := range pending {
			resp.Topics[sl.t].Partitions[sl.p].ErrorCode = code
		}
		return kafka.Reply{Msg: resp}
	}}
}

// endTxn answers EndTxn: once the answer is in, the commit or abort is
// durable at the coordinator, which writes the markers.
func (s *Service) endTxn(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.EndTxnRequest)
	resp := kmsg.NewPtrEndTxnResponse()
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if !s.broker.Transacts(c, "EndTxn", r.TransactionalID) {
		resp.ErrorCode = int16(protocol.TransactionalIDAuthorizationFailed)
		return kafka.Reply{Msg: resp}
	}
	client := s.txnsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		p, err := client.End(c.Context(), r.TransactionalID, txns.EndRequest{
			Producer: txns.Producer{ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch}, Commit: r.Commit, V2: r.Version >= 5})
		if resp.ErrorCode = txnCode(err, r.Version); resp.ErrorCode == 0 {
			resp.ProducerID, resp.ProducerEpoch = p.ProducerID, p.ProducerEpoch
		}
		return kafka.Reply{Msg: resp}
	}}
}

// describeTransactions answers DescribeTransactions: an id the principal
// may not describe is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka.
func (s *Service) describeTransactions(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.DescribeTransactionsRequest)
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	client := s.txnsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		for _, id := range r.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
			if !s.broker.DescribesTransaction(c, "DescribeTransactions", id) {
				st.ErrorCode = int16(protocol.TransactionalIDAuthorizationFailed)
				resp.TransactionStates = append(resp.TransactionStates, st)
				continue
			}
			d, err := client.Describe(c.Context(), id)
			if st.ErrorCode = txnCode(err, r.Version); st.ErrorCode == 0 {
				st.State, st.TimeoutMillis, st.StartTimestamp, st.ProducerID, st.ProducerEpoch = d.State, d.TimeoutMs, d.StartMs, d.ProducerID, d.Epoch
				for _, tp := range d.Partitions {
					if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
						t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
						t.Topic = tp.Topic
						st.Topics = append(st.Topics, t)
					}
					st.Topics[len(st.Topics)-1].Partitions = append(st.Topics[len(st.Topics)-1].Partitions, tp.Partition)
				}
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return kafka.Reply{Msg: resp}
	}}
}

// listTransactions answers ListTransactions, with its state and producer
// id filters: the ids the principal may describe, as in Kafka.
func (s *Service) listTransactions(_ context.Context, c *kafka.Conn, req kmsg.Request) kafka.Reply {
	r := req.(*kmsg.ListTransactionsRequest)
	resp := kmsg.NewPtrListTransactionsResponse()
	client := s.txnsFor(c)
	return kafka.Reply{Async: func() kafka.Reply {
		list, err := client.List(c.Context(), r.StateFilters...)
		if resp.ErrorCode = txnCode(err, r.Version); resp.ErrorCode != 0 {
			return kafka.Reply{Msg: resp}
		}
		for _, f := range r.StateFilters {
			if !knownTxnState(f) {
				resp.UnknownStateFilters = append(resp.UnknownStateFilters, f)
			}
		}
		for _, d := range list {
			if len(r.ProducerIDFilters) > 0 && !slices.Contains(r.ProducerIDFilters, d.ProducerID) || !s.broker.DescribesTransaction(c, "", d.ID) {
				continue
			}
			st := kmsg.NewListTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.TransactionState = d.ID, d.ProducerID, d.State
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return kafka.Reply{Msg: resp}
	}}
}

func knownTxnState(s string) bool {
	switch s {
	case "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence":
		return true
	}
	return false
}
