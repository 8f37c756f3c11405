// Package client is Sluice's Go SDK: the Admin client (topics and cluster
// metadata), the PartitionReader, which reads one partition by offset
// straight from its leader over the storage protocol and follows leader
// changes, and the group Consumer built on it. The batching Producer builds
// on these too.
//
// # Consumer
//
// A Consumer is one member of a consumer group. The offsets service (the
// group coordinator) assigns partitions on the server side, KIP-848 style
// (see package groups); the Consumer heartbeats, takes and releases
// partitions as told, and reads its partitions from their leaders:
//
//	cfg := client.DefaultConsumerConfig()
//	cfg.Metadata = []string{"127.0.0.1:7070"}
//	cfg.Offsets = []string{"127.0.0.1:7080", "127.0.0.1:7083", "127.0.0.1:7086"}
//	cfg.Group, cfg.Topics = "billing", []string{"orders"}
//	cfg.AutoOffsetReset = client.OffsetResetEarliest
//	c, err := client.NewConsumer(cfg)
//	if err != nil { ... }
//	defer c.Close(context.Background()) // commits, OnRevoked, leaves the group
//	for {
//		recs, err := c.Poll(ctx)
//		if err != nil { return err } // ctx.Err() or ErrConsumerClosed
//		for _, r := range recs { process(r.Topic, r.Partition, r.Offset, r.Value) }
//	}
//
// Lifecycle and guarantees:
//
//   - NewConsumer starts a group goroutine that joins and then heartbeats at
//     the interval the coordinator answers, reporting the partitions the
//     consumer owns. Every rebalance step runs on the goroutine calling Poll
//     (or Close): Poll first releases lost partitions, then revoked ones,
//     then takes new ones, then auto-commits when due, then returns records.
//     A Poll blocked waiting for records wakes up for these steps.
//   - A partition is owned from just before OnAssigned until just after
//     OnRevoked or OnLost. Poll returns records of owned partitions only,
//     and none of a partition after its OnRevoked or OnLost.
//   - A newly owned partition starts at the group's committed offset, or,
//     when there is none or it is out of range, at the earliest or latest
//     offset per AutoOffsetReset. Seek (even inside OnAssigned) overrides it.
//     Position reports ok once the start offset is known.
//   - Revocation: the partition's fetcher stops and its buffered records are
//     dropped, its position is committed (AutoCommit), OnRevoked runs, and
//     the next heartbeat, sent at once, reports it released; only then may
//     the coordinator give it to another member. A consumer that does not
//     call Poll holds on to revoked partitions until the coordinator removes
//     it after the rebalance timeout, as in Kafka.
//   - Loss: on UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH, or when no
//     heartbeat was answered for a whole session timeout (the coordinator has
//     then certainly expired the member), every owned partition is lost:
//     fetchers stop, buffers are dropped, OnLost runs, nothing is committed.
//     The consumer then rejoins as a new member (epoch 0, new member id).
//   - Commits carry the member id and epoch, so the coordinator refuses those
//     of a member that lost a partition. Commit returns such refusals
//     (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID as *protocol.Error); the
//     auto-commit, which runs inside Poll every AutoCommitInterval for
//     positions that changed, logs them. A position is the offset after the
//     last record Poll returned: delivery is at-least-once.
//   - Fetching runs ahead of Poll: one goroutine per owned partition, with
//     up to Prefetch fetch responses buffered, following leader changes.
//     OFFSET_OUT_OF_RANGE resets per AutoOffsetReset (logged). Poll takes at
//     most MaxPollRecords, fairly across partitions.
//   - Close stops every goroutine the Consumer started.
//   - With IsolationLevel read_committed the consumer stops at each
//     partition's last stable offset, skips aborted transactions' records,
//     and does not start a partition whose committed offset an open
//     transaction holds until that transaction ends (Kafka's
//     require_stable); it tells the coordinator so, and the group's lag is
//     then counted to the last stable offsets.
//
// # Transactions
//
// A Producer with TransactionalID (and Offsets, the transaction
// coordinator's addresses) writes records to several partitions, and with
// SendOffsetsToTxn a consumer group's offsets, all committed or all
// aborted together (Kafka's KIP-98, under KIP-890's transaction version 2:
// the end of every transaction that wrote something raises the producer
// epoch, or past the largest epoch moves to a new producer id, so a late
// batch of an ended transaction is refused by its partition). A new producer of the
// same id fences the old one (ErrProducerFenced), as does the coordinator
// aborting a transaction open past TransactionTimeout:
//
//	cfg := client.DefaultProducerConfig()
//	cfg.Frontends, cfg.Offsets = frontends, offsets
//	cfg.TransactionalID = "billing-enricher"
//	p, err := client.NewProducer(cfg)
//	if err := p.BeginTxn(ctx); err != nil { ... }
//	p.Send(ctx, client.ProducerRecord{Topic: "invoices", Partition: -1, Value: v}, nil)
//	if err := p.CommitTxn(ctx); errors.Is(err, client.ErrTxnMustAbort) {
//		err = p.AbortTxn(ctx)
//	}
//
// TxnSession pairs a group Consumer with a transactional Producer for
// consume-transform-produce loops (as franz-go's GroupTransactSession):
// each transaction holds the output of what Poll returned and the
// consumer's positions after it, so each input record's output is
// committed exactly once for read_committed readers.
package client
