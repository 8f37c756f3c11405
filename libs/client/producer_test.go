package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/partitioner"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

func testProducer(t *testing.T, frontends []string, adjust func(*ProducerConfig)) *Producer {
	t.Helper()
	cfg := DefaultProducerConfig()
	cfg.Frontends = frontends
	cfg.Linger = 2 * time.Millisecond
	cfg.BatchSize = 4096
	cfg.RetryBackoff = time.Millisecond
	if adjust != nil {
		adjust(&cfg)
	}
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

type outcomes struct {
	mu  sync.Mutex
	got map[string]RecordMetadata
}

func (o *outcomes) cb(v string) func(RecordMetadata) {
	return func(m RecordMetadata) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, dup := o.got[v]; dup {
			panic("callback called twice for " + v)
		}
		o.got[v] = m
	}
}

// TestProducerKeyedOrderAndOffsets: concurrent senders, keyed records land on
// murmur2's partition in per-key send order, each callback gets the offset
// the record was stored at, and retried batches (NOT_LEADER answers) are
// neither lost nor stored twice.
func TestProducerKeyedOrderAndOffsets(t *testing.T) {
	f := newFakeFrontend(t, 4)
	f.failNext[0], f.failNext[2] = 3, 1
	p := testProducer(t, []string{f.srv.URL}, nil)
	o := &outcomes{got: map[string]RecordMetadata{}}
	const senders, perSender = 4, 500
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []byte("key-" + strconv.Itoa(s))
			for i := 0; i < perSender; i++ {
				v := fmt.Sprintf("%d-%d", s, i)
				if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Key: key, Value: []byte(v)}, o.cb(v)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored := f.stored()
	total := 0
	for part, recs := range stored {
		last := map[string]int{}
		for off, r := range recs {
			total++
			var s, i int
			fmt.Sscanf(string(r.Value), "%d-%d", &s, &i)
			if want := int32(partitioner.ForKey(r.Key, 4)); want != part {
				t.Fatalf("key %s stored in partition %d, murmur2 says %d", r.Key, part, want)
			}
			if prev, ok := last[string(r.Key)]; ok && i != prev+1 {
				t.Fatalf("partition %d: %s after index %d: order broken or duplicate", part, r.Value, prev)
			}
			last[string(r.Key)] = i
			m := o.got[string(r.Value)]
			if m.Err != nil || m.Partition != part || m.Offset != int64(off) {
				t.Fatalf("%s: callback %+v, stored at %d/%d", r.Value, m, part, off)
			}
		}
	}
	if total != senders*perSender || len(o.got) != total {
		t.Fatalf("stored %d, callbacks %d, sent %d", total, len(o.got), senders*perSender)
	}
}

// TestProducerStampsSequencesPerPartition: batches carry the producer id and
// contiguous sequences per partition.
func TestProducerStampsSequencesPerPartition(t *testing.T) {
	f := newFakeFrontend(t, 2)
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) { c.BatchSize = 1024 })
	for i := 0; i < 300; i++ {
		if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: int32(i % 2), Value: make([]byte, 50)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.seen {
		if k[1] != 1 {
			t.Fatalf("batch with producer id %d, want 1", k[1])
		}
	}
	for part := int32(0); part < 2; part++ {
		ss, next := f.seqs[part], int64(0)
		for i := 0; i < len(ss); i += 2 {
			if ss[i] != next {
				t.Fatalf("partition %d: batch %d starts at sequence %d, want %d", part, i/2, ss[i], next)
			}
			next += ss[i+1]
		}
		if next != 150 || len(ss) < 4 {
			t.Fatalf("partition %d: %d records in %d batches", part, next, len(ss)/2)
		}
	}
}

func TestProducerFailsOverToAnotherFrontend(t *testing.T) {
	f := newFakeFrontend(t, 1)
	dead := newFakeFrontend(t, 1)
	dead.srv.Close()
	p := testProducer(t, []string{dead.srv.URL, f.srv.URL, dead.srv.URL}, func(c *ProducerConfig) { c.Metadata = []string{f.srv.URL} })
	for i := 0; i < 50; i++ {
		m, err := p.Produce(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: []byte(strconv.Itoa(i))})
		if err != nil || m.Offset != int64(i) {
			t.Fatalf("record %d: %+v, %v", i, m, err)
		}
	}
}

func TestProducerBufferFullAndErrors(t *testing.T) {
	f := newFakeFrontend(t, 1)
	f.block = make(chan struct{})
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) {
		c.BufferMemory, c.BatchSize, c.NoBlockOnBufferFull, c.Linger = 4096, 1024, true, -1
	})
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: make([]byte, 100)}, nil)
	}
	if !errors.Is(err, ErrBufferFull) {
		t.Fatalf("Send with a full buffer: %v, want ErrBufferFull", err)
	}
	close(f.block)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(context.Background(), ProducerRecord{Topic: "nope", Partition: -1}, nil); protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("unknown topic: %v", err)
	}
	if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: 5}, nil); protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("partition out of range: %v", err)
	}
	if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: make([]byte, 2000)}, nil); protocol.CodeOf(err) != protocol.MessageTooLarge {
		t.Fatalf("record over the batch size: %v", err)
	}
	p.Close(context.Background())
	if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1}, nil); !errors.Is(err, ErrProducerClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

func TestProducerConfigValidation(t *testing.T) {
	for name, adjust := range map[string]func(*ProducerConfig){
		"no frontends":              func(c *ProducerConfig) { c.Frontends = nil },
		"bad acks":                  func(c *ProducerConfig) { c.Acks = 3 },
		"idempotent without all":    func(c *ProducerConfig) { c.Acks = protocol.AcksLeader },
		"bad codec":                 func(c *ProducerConfig) { c.Compression = record.Codec(9) },
		"tiny batch":                func(c *ProducerConfig) { c.BatchSize = 10 },
		"buffer below one batch":    func(c *ProducerConfig) { c.BufferMemory = 100 },
		"negative delivery budget":  func(c *ProducerConfig) { c.DeliveryTimeout = -1 },
		"transactional, no offsets": func(c *ProducerConfig) { c.TransactionalID = "tx" },
		"transactional, not idempotent": func(c *ProducerConfig) {
			c.TransactionalID, c.Offsets, c.DisableIdempotence = "tx", []string{"o"}, true
		},
		"bad transactional id": func(c *ProducerConfig) { c.TransactionalID, c.Offsets = "tx\n", []string{"o"} },
		"negative transaction timeout": func(c *ProducerConfig) {
			c.TransactionalID, c.Offsets, c.TransactionTimeout = "tx", []string{"o"}, -time.Second
		},
	} {
		cfg := DefaultProducerConfig()
		cfg.Frontends = []string{"127.0.0.1:1"}
		adjust(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidProducerConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	cfg := DefaultProducerConfig()
	cfg.Frontends, cfg.Acks, cfg.DisableIdempotence = []string{"x"}, protocol.AcksLeader, true
	if err := cfg.Validate(); err != nil {
		t.Errorf("acks=leader without idempotence: %v", err)
	}
	cfg = DefaultProducerConfig()
	cfg.Frontends, cfg.Offsets, cfg.TransactionalID = []string{"x"}, []string{"o"}, "tx"
	if err := cfg.Validate(); err != nil || cfg.withDefaults().TransactionTimeout != time.Minute {
		t.Errorf("transactional producer: %v, timeout %v", err, cfg.withDefaults().TransactionTimeout)
	}
}

// TestTransactionalProducerOutsideTxn: a transactional producer sends
// nothing outside a transaction, and its transaction methods need one;
// a producer without TransactionalID has none.
func TestTransactionalProducerOutsideTxn(t *testing.T) {
	f := newFakeFrontend(t, 1)
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) { c.TransactionalID, c.Offsets = "tx", []string{"127.0.0.1:1"} })
	ctx := context.Background()
	if err := p.Send(ctx, ProducerRecord{Topic: "t", Partition: 0, Value: []byte("v")}, nil); !errors.Is(err, ErrNoTransaction) {
		t.Fatalf("Send outside a transaction: %v", err)
	}
	for name, f := range map[string]func(context.Context) error{"CommitTxn": p.CommitTxn, "AbortTxn": p.AbortTxn,
		"SendOffsetsToTxn": func(ctx context.Context) error { return p.SendOffsetsToTxn(ctx, TxnOffsets{Group: "g"}) }} {
		if err := f(ctx); !errors.Is(err, ErrNoTransaction) {
			t.Errorf("%s outside a transaction: %v", name, err)
		}
	}
	plain := testProducer(t, []string{f.srv.URL}, nil)
	if err := plain.BeginTxn(ctx); !errors.Is(err, ErrNotTransactional) {
		t.Fatalf("BeginTxn without TransactionalID: %v", err)
	}
}

// TestProducerSplitsLargeRequests: ready batches of many partitions go in
// several requests, each under MaxRequestBytes.
func TestProducerSplitsLargeRequests(t *testing.T) {
	f := newFakeFrontend(t, 8)
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) {
		c.BatchSize, c.MaxRequestBytes, c.Linger = 8192, 20000, time.Hour
	})
	for i := 0; i < 8*60; i++ { // 8 partitions, each a full 8 KiB batch and a bit
		if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: int32(i % 8), Value: make([]byte, 150)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxBody > 20000+64 || f.requests < 4 {
		t.Fatalf("%d requests, largest body %d bytes: want bodies under MaxRequestBytes", f.requests, f.maxBody)
	}
}

// TestProducerFlushIgnoresLaterRecords: Flush waits for what was sent before
// it, not for records other goroutines keep sending.
func TestProducerFlushIgnoresLaterRecords(t *testing.T) {
	f := newFakeFrontend(t, 2)
	p := testProducer(t, []string{f.srv.URL}, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: []byte("x")}, nil)
		}
	}()
	testkit.WaitFor(t, 10*time.Second, "the load to reach the frontend", func() bool { return f.batchesRequests() > 0 })
	// A Flush that waited for the later records too would never return;
	// the bound is generous, for a machine busy with other tests.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush under a steady load: %v", err)
	}
	m, err := p.Produce(ctx, ProducerRecord{Topic: "t", Partition: 1, Value: []byte("sync")})
	if err != nil || m.Offset < 0 {
		t.Fatalf("Produce under a steady load: %+v, %v", m, err)
	}
	close(stop)
	wg.Wait()
}

// TestProducerExpiresQueuedBatches: batches stuck behind an unanswered one
// fail at their delivery timeout, and Flush returns while the frontend
// still holds every request.
func TestProducerExpiresQueuedBatches(t *testing.T) {
	f := newFakeFrontend(t, 1)
	f.block = make(chan struct{})
	defer close(f.block) // before the fake's Close, which waits for its handlers
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) {
		c.DeliveryTimeout, c.RequestTimeout, c.BatchSize, c.Linger = 300*time.Millisecond, 200*time.Millisecond, 1024, -1
	})
	o := &outcomes{got: map[string]RecordMetadata{}}
	for i := 0; i < 40; i++ {
		v := strconv.Itoa(i)
		if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: 0, Value: append(make([]byte, 100), v...)}, o.cb(v)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush of batches past their delivery timeout: %v", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.got) != 40 {
		t.Fatalf("%d of 40 records have an outcome", len(o.got))
	}
	for v, m := range o.got {
		if protocol.CodeOf(m.Err) != protocol.RequestTimedOut {
			t.Fatalf("record %s: %+v, want a delivery timeout", v, m)
		}
	}
}

func TestProducerRejectsBlankFrontends(t *testing.T) {
	cfg := DefaultProducerConfig()
	cfg.Frontends = []string{" ", ""}
	if _, err := NewProducer(cfg); !errors.Is(err, ErrInvalidProducerConfig) {
		t.Fatalf("blank frontends: %v", err)
	}
}

// TestProducerTopicMetadataAge: a topic's partition count is read once and
// reused until MetadataMaxAge has passed; then the next Send reads it again
// and sees partitions added meanwhile.
func TestProducerTopicMetadataAge(t *testing.T) {
	f := newFakeFrontend(t, 1)
	cached := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) { c.MetadataMaxAge = time.Hour })
	for i := 0; i < 100; i++ {
		if err := cached.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: []byte("v")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	describes := f.describes
	f.mu.Unlock()
	if describes != 1 {
		t.Fatalf("%d metadata requests for 100 sends within MetadataMaxAge, want 1", describes)
	}

	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) { c.MetadataMaxAge = 50 * time.Millisecond })
	rec := ProducerRecord{Topic: "t", Partition: 2, Value: []byte("v")}
	if err := p.Send(context.Background(), rec, nil); protocol.CodeOf(err) != protocol.UnknownTopicOrPartition {
		t.Fatalf("send to partition 2 of a 1-partition topic: %v", err)
	}
	f.mu.Lock()
	f.partitions = 3
	f.mu.Unlock()
	testkit.Eventually(t, 10*time.Second, func() error { return p.Send(context.Background(), rec, nil) }) // the added partitions seen
}

// TestProducerStickyMovesWhenBatchIsSent: once the sticky partition's batch
// leaves, keyless records go to another partition, so batches of several
// partitions travel side by side instead of queueing behind one.
func TestProducerStickyMovesWhenBatchIsSent(t *testing.T) {
	f := newFakeFrontend(t, 4)
	f.block = make(chan struct{})
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) { c.Linger = time.Millisecond })
	o := &outcomes{got: map[string]RecordMetadata{}}
	if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: []byte("first")}, o.cb("first")); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the first batch in flight (held by the frontend)", func() bool { return f.batchesRequests() > 0 })
	if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: -1, Value: []byte("second")}, o.cb("second")); err != nil {
		t.Fatal(err)
	}
	close(f.block)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if a, b := o.got["first"], o.got["second"]; a.Err != nil || b.Err != nil || a.Partition == b.Partition {
		t.Fatalf("first %+v, second %+v: want both stored, on different partitions", a, b)
	}
}

// TestGatewayTimeoutResultsAreHeeded: a frontend whose time ran out answers
// 504 with every batch's result. The batch it wrote is done; only the one
// that timed out is sent again, so a producer without idempotence does not
// write the first twice.
func TestGatewayTimeoutResultsAreHeeded(t *testing.T) {
	f := newFakeFrontend(t, 2)
	f.timeoutNext[1] = 1
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) {
		c.DisableIdempotence = true
		c.Acks = protocol.AcksLeader
	})
	var mu sync.Mutex
	var errs []error
	for part := int32(0); part < 2; part++ {
		if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: part, Value: []byte("v")}, func(m RecordMetadata) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, m.Err)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("record failed: %v", err)
		}
	}
	for part, recs := range f.stored() {
		if len(recs) != 1 {
			t.Fatalf("partition %d holds %d copies of its one record", part, len(recs))
		}
	}
	if n := f.batchesRequests(); n != 2 {
		t.Fatalf("%d requests, want the first and one retry", n)
	}
}

// TestProducerRaisesItsEpochAfterAFailure: a batch that fails for good
// leaves its partition's sequence in doubt; the producer's next batches
// carry the same producer id at the next epoch, every partition's sequence
// from 0 (so a leader refuses any late copy of the failed batch), without a
// new id from metadata.
func TestProducerRaisesItsEpochAfterAFailure(t *testing.T) {
	f := newFakeFrontend(t, 2)
	p := testProducer(t, []string{f.srv.URL}, nil)
	send := func(part int32, v string) error {
		t.Helper()
		done := make(chan error, 1)
		if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: part, Value: []byte(v)}, func(m RecordMetadata) { done <- m.Err }); err != nil {
			t.Fatal(err)
		}
		p.Flush(context.Background())
		return <-done
	}
	for _, v := range []string{"a", "b"} {
		if err := send(1, v); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	f.refuseNext[0] = 1
	f.mu.Unlock()
	if err := send(0, "refused"); protocol.CodeOf(err) != protocol.InvalidRecord {
		t.Fatalf("refused batch: %v", err)
	}
	for _, part := range []int32{0, 1, 0} {
		if err := send(part, "after"); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nextPID != 1 {
		t.Fatalf("%d producer ids allocated, want 1", f.nextPID)
	}
	want := map[int32][][2]int64{0: {{1, 0}, {1, 1}}, 1: {{0, 0}, {0, 1}, {1, 0}}}
	for part, w := range want {
		if got := f.stamps[part]; !slices.Equal(got, w) {
			t.Errorf("partition %d stored (epoch, sequence) %v, want %v", part, got, w)
		}
	}
}

// TestProducerAtTheLargestEpochTakesANewID: past the largest epoch a failure
// makes the producer ask metadata for a new id.
func TestProducerAtTheLargestEpochTakesANewID(t *testing.T) {
	p := &Producer{}
	p.ident = producerIdentity{id: 5, epoch: math.MaxInt16, gen: 3}
	p.raiseEpochLocked(&batchBuf{gen: 3})
	if !p.ident.stale {
		t.Fatalf("identity %+v after a failure at the largest epoch, want a new id asked for", p.ident)
	}
	p.ident = producerIdentity{id: 5, epoch: 2, gen: 3}
	p.raiseEpochLocked(&batchBuf{gen: 2}) // stamped before the last raise
	if p.ident != (producerIdentity{id: 5, epoch: 2, gen: 3}) {
		t.Fatalf("an older batch's failure raised the epoch again: %+v", p.ident)
	}
}

// TestProducerCallbacksOfAPartitionRunInOrder: the next batch of a partition
// is sent only once the callbacks of the one before ran, so a slow callback
// of an earlier batch is never overtaken by a later one's.
func TestProducerCallbacksOfAPartitionRunInOrder(t *testing.T) {
	f := newFakeFrontend(t, 1)
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) { c.BatchSize = 1024 }) // a batch per record of 700 bytes
	var mu sync.Mutex
	var order []string
	var record func(v string, slow bool) func(RecordMetadata)
	record = func(v string, slow bool) func(RecordMetadata) {
		return func(RecordMetadata) {
			if slow {
				// A Send wakes the sender meanwhile, and a pass of the
				// sender runs here: the window a later batch would use
				// to overtake. The partition stays held by this batch,
				// whose records were handed over (b nil).
				if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: 0, Key: []byte("d"), Value: make([]byte, 700)}, record("d", false)); err != nil {
					t.Error(err)
				}
				p.dispatch()
				p.mu.Lock()
				held := p.topics["t"].parts[0].inFlight
				ours := held != nil && held.b == nil
				p.mu.Unlock()
				if !ours {
					t.Error("the partition's next batch was sent while a's callback ran")
				}
			}
			mu.Lock()
			order = append(order, v)
			mu.Unlock()
		}
	}
	for i, v := range []string{"a", "b", "c"} {
		if err := p.Send(context.Background(), ProducerRecord{Topic: "t", Partition: 0, Key: []byte(v), Value: make([]byte, 700)}, record(v, i == 0)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the second for "d", sent by a's callback
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"a", "b", "c", "d"}) {
		t.Fatalf("callbacks ran in the order %v, want a, b, c, d", order)
	}
}
