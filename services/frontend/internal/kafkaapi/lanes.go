package kafkaapi

import (
	"context"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/services/frontend/internal/produce"
)

// A Kafka connection's produce requests are served at once (a client keeps
// several in flight), so one partition may have batches of several requests
// waiting. Each (connection, topic, partition, acks) has a lane: at most one
// storage produce request in flight, and the batches that arrive meanwhile
// go together in the next one, in arrival order. That keeps the partition's
// batches in request order, and sends them to the leader as the SDK's
// producer does (one request in flight per partition, batches growing while
// it waits) instead of in many small requests, each costing the leader a
// write, an fsync and the followers a fetch.
//
// A storage append is all or nothing, so the batches of one storage request
// are appended together, at consecutive offsets, or not at all; a resend of
// the same bytes (the producer's retries) is appended again whole or, for
// idempotent producers, recognised whole as a duplicate. Each part's base
// offset is the request's base plus the offsets of the parts before it
// (record.Count).

// maxLaneBytes bounds the batches one storage request carries (a single
// larger part goes alone).
const maxLaneBytes = 4 << 20

// laneKey names a lane of a connection.
type laneKey struct {
	topic     string
	partition int32
	acks      int8
}

// lanes are a connection's lanes.
type lanes struct {
	mu sync.Mutex
	m  map[laneKey]*lane
}

// lanesKey names a connection's lanes (kafka.Conn.Local).
type lanesKey struct{}

func newLanes() any { return &lanes{m: map[laneKey]*lane{}} }

// lane is one partition's queue on a connection.
type lane struct {
	busy  bool    // a storage request is in flight; guarded by lanes.mu
	queue []*part // waiting, in arrival order; guarded by lanes.mu
}

// part is one request's batches of a partition, with its answer.
type part struct {
	records  []byte
	deadline time.Time
	done     chan struct{} // closed once res is set
	res      produce.RecordsResult
}

// failedPart is the part of a partition refused before it was queued.
func failedPart(err error) *part {
	p := &part{done: make(chan struct{}), res: produce.RecordsResult{BaseOffset: -1, LogStartOffset: -1, Err: err}}
	close(p.done)
	return p
}

// submit queues a request's batches for a partition and returns the part,
// whose done closes once they are answered; when the lane was idle it also
// returns the lane, whose sender (run) the caller must start.
func (ls *lanes) submit(k laneKey, records []byte, deadline time.Time) (*part, *lane) {
	p := &part{records: records, deadline: deadline, done: make(chan struct{})}
	ls.mu.Lock()
	l := ls.m[k]
	if l == nil {
		l = &lane{}
		ls.m[k] = l
	}
	l.queue = append(l.queue, p)
	start := !l.busy
	l.busy = true
	ls.mu.Unlock()
	if start {
		return p, l
	}
	return p, nil
}

// sendFunc sends one storage produce request of a lane's partition.
type sendFunc func(ctx context.Context, k laneKey, records []byte, deadline time.Time) produce.RecordsResult

// run sends the lane's parts, as many together as fit, until the queue is
// empty.
func (ls *lanes) run(ctx context.Context, send sendFunc, k laneKey, l *lane) {
	for {
		ls.mu.Lock()
		if len(l.queue) == 0 {
			l.busy = false
			delete(ls.m, k)
			ls.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(l.queue) && (n == 0 || size+len(l.queue[n].records) <= maxLaneBytes) {
			size += len(l.queue[n].records)
			n++
		}
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		ls.mu.Unlock()
		sendParts(ctx, send, k, batch)
	}
}

// sendParts sends parts as one storage produce request and answers each.
// When the leader refuses a request of several parts whole before writing
// any of it (a corrupt batch, a sequence error, a retried batch beside new
// ones), each part is resent alone, so that every one gets its own answer:
// one client's bad batch does not fail another's, and an idempotent
// producer's retry is recognised as the duplicate it is.
func sendParts(ctx context.Context, send sendFunc, k laneKey, parts []*part) {
	deadline := parts[0].deadline
	records := parts[0].records
	if len(parts) > 1 {
		size := 0
		for _, p := range parts {
			size += len(p.records)
			deadline = earlier(deadline, p.deadline)
		}
		records = make([]byte, 0, size)
		for _, p := range parts {
			records = append(records, p.records...)
		}
	}
	res := send(ctx, k, records, deadline)
	if len(parts) > 1 && refusedWhole(res.Err) {
		for _, p := range parts {
			sendParts(ctx, send, k, []*part{p})
		}
		return
	}
	base := res.BaseOffset
	for _, p := range parts {
		p.res = res
		if res.Err == nil {
			p.res.BaseOffset = base
			_, span := record.Count(p.records)
			base += span
		}
		close(p.done)
	}
}

// refusedWhole reports whether err is a leader's refusal of one of an
// append's batches, made before anything was written (protocol's produce
// outcome table).
func refusedWhole(err error) bool { return protocol.CodeOf(err).Produce().Split }

// send is the service's sendFunc: a produce request to the partition's
// leader.
func (s *Service) send(ctx context.Context, k laneKey, records []byte, deadline time.Time) produce.RecordsResult {
	return s.producer.ProduceRecords(ctx, k.topic, k.acks, time.Until(deadline), k.partition, records)
}

// earlier returns the earlier of two times.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// waitPart waits for a part's answer, or for ctx (the connection closing).
func waitPart(ctx context.Context, p *part) produce.RecordsResult {
	select {
	case <-p.done:
		return p.res
	case <-ctx.Done():
		return produce.RecordsResult{BaseOffset: -1, LogStartOffset: -1, Err: protocol.NetworkException.Err("connection closed")}
	}
}
