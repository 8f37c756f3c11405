package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/server/version"
)

// drainTimeout bounds how long records in flight when a run is interrupted
// (or stopped by an error) may take to learn their outcome.
const drainTimeout = 5 * time.Second

// usageHint follows a usage error.
const usageHint = "usage: sluice-bench produce|consume|e2e|share|disk|sendfile [flags]  (sluice-bench -h, sluice-bench disk -h list the flags)\n"

// Main runs sluice-bench with args (without the program name) and returns
// the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if version.Asked(args) {
		fmt.Fprintln(stdout, version.String("sluice-bench"))
		return 0
	}
	if len(args) > 0 && (args[0] == ModeDisk || args[0] == ModeSendfile) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return mainLimits(ctx, args, stdout, stderr)
	}
	cfg, err := Parse(args, os.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		io.WriteString(stdout, usage)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "sluice-bench: %v\n%s", err, usageHint)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "sluice-bench: --cpuprofile: %v\n", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	sum, err := Run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sluice-bench: %v\n", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	if cfg.JSON {
		err = sum.WriteJSON(stdout)
	} else {
		err = sum.WriteHuman(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice-bench: writing the summary: %v\n", err)
	}
	reportProblems(stderr, sum)
	return sum.ExitCode()
}

// reportProblems says on stderr why the exit status is not 0.
func reportProblems(w io.Writer, s *Summary) {
	if s.Failed > 0 {
		fmt.Fprintf(w, "sluice-bench: %s records failed; first errors:\n", count(s.Failed))
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  %s × %s\n", count(e.Count), e.Error)
		}
	}
	if s.Error != "" {
		fmt.Fprintf(w, "sluice-bench: stopped early: %s\n", s.Error)
	}
	if s.Interrupted {
		fmt.Fprintln(w, "sluice-bench: interrupted")
	}
}

// run is one benchmark run. Its methods start the producers, consumers and
// progress line on goroutines the run owns and waits for.
type run struct {
	cfg        Config
	stderr     io.Writer
	log        *slog.Logger
	seed       uint64
	partitions int

	start    time.Time // when producing (or consuming) started
	end      time.Time // when producers and consumers had all stopped
	plan     *plan
	failures Failures // records that failed
	prod     producing
	cons     consuming
	tracker  *tracker // e2e only
	joinSec  float64  // e2e: time until the group owned every partition
	// unconsumedFailed is e2e's records counted as failed for not being
	// consumed within --grace.
	unconsumedFailed int64

	mu      sync.Mutex // guards stopErr
	stopErr error      // what stopped the run early

	// --txn-records: the transactional ids' prefix, one commit latency
	// histogram per producer, and the transactions committed.
	txnPrefix string
	commits   []*Latencies
}

// txnID is producer i's transactional id.
func (r *run) txnID(i int) string { return fmt.Sprintf("%s-%d", r.txnPrefix, i) }

// Run sets the run up (the topic; e2e: the start offsets and the group),
// runs it and returns its summary. An error means the run could not start.
func Run(ctx context.Context, cfg Config, stderr io.Writer) (*Summary, error) {
	r := &run{cfg: cfg, stderr: stderr, seed: mrand.Uint64(),
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	r.prod.failures = &r.failures
	setup, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	t, created, err := ensureTopic(setup, cfg)
	if err != nil {
		return nil, err
	}
	r.partitions = len(t.Partitions)
	r.cfg.Partitions, r.cfg.ReplicationFactor = len(t.Partitions), t.ReplicationFactor
	for i := 0; i < cfg.Producers; i++ {
		r.prod.lats = append(r.prod.lats, NewLatencies())
		r.commits = append(r.commits, NewLatencies())
	}
	r.txnPrefix = "sluice-bench-" + randomHex(8)
	for i := 0; i < cfg.Consumers; i++ {
		r.cons.lats = append(r.cons.lats, NewLatencies())
	}
	switch cfg.Mode {
	case ModeProduce:
		return r.runProduce(ctx)
	case ModeConsume, ModeShare:
		return r.runConsume(ctx, setup)
	}
	start := make([]int64, r.partitions) // a new topic is empty
	if !created {
		if start, err = offsetsAt(setup, cfg, r.partitions, protocol.TimestampLatest); err != nil {
			return nil, err
		}
	}
	r.tracker = newTracker(start)
	r.prod.tracker = r.tracker
	return r.runE2E(ctx, setup)
}

// begin starts the clock of the run.
func (r *run) begin() {
	r.start = time.Now()
	warmupEnd := r.start.Add(r.cfg.Warmup)
	r.plan = &plan{warmupEnd: warmupEnd, end: warmupEnd.Add(r.cfg.Duration), limit: r.cfg.Records}
}

// stopper returns the function producers and consumers call to stop the run
// for a reason: the first reason is kept and runCtx is cancelled.
func (r *run) stopper(abort context.CancelCauseFunc) func(error) {
	return func(err error) {
		r.mu.Lock()
		if r.stopErr == nil {
			r.stopErr = err
		}
		r.mu.Unlock()
		abort(err)
	}
}

// producerConfig is the SDK producer's configuration, logging through the
// run's logger.
func (r *run) producerConfig() client.ProducerConfig {
	pc := r.cfg.producerConfig()
	pc.Logger = r.log
	return pc
}

func (r *run) stderrf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "sluice-bench: "+format+"\n", args...)
}

// startProgress starts the progress line when --progress asks for it.
func (r *run) startProgress() *progress {
	if r.cfg.Progress == ProgressOff || (r.cfg.Progress == ProgressAuto && !isTerminal(r.stderr)) {
		return nil
	}
	return startProgress(r.stderr, r.progressLine())
}

// produce runs the producers until the plan ends or ctx ends, and waits for
// the outcomes of what they sent.
func (r *run) produce(ctx context.Context, stop func(error)) {
	drain, cancelDrain := context.WithCancel(context.Background())
	defer cancelDrain()
	// After an interrupt or a stop, records in flight get drainTimeout.
	defer context.AfterFunc(ctx, func() { time.AfterFunc(drainTimeout, cancelDrain) })()
	var wg sync.WaitGroup
	for i := 0; i < r.cfg.Producers; i++ {
		var pacer *Pacer
		if r.cfg.Rate > 0 {
			pacer = NewPacer(r.cfg.Rate/float64(r.cfg.Producers), r.start)
		}
		if r.cfg.Body == BodyJSON {
			wg.Go(func() { r.jsonPoster(ctx, drain, i, pacer) })
			continue
		}
		if r.cfg.Protocol == ProtocolKafka {
			cl, err := r.newKafkaProducer(i)
			if err != nil {
				stop(fmt.Errorf("producer %d: %w", i, err))
				break
			}
			wg.Go(func() { r.kafkaProducer(ctx, drain, i, cl, pacer, stop) })
			continue
		}
		pc := r.producerConfig()
		if r.cfg.TxnRecords > 0 {
			pc.TransactionalID = r.txnID(i)
		}
		p, err := client.NewProducer(pc)
		if err != nil {
			stop(fmt.Errorf("producer %d: %w", i, err))
			break
		}
		wg.Go(func() { r.sdkProducer(ctx, drain, i, p, pacer, stop) })
	}
	wg.Wait()
}

func (r *run) runProduce(ctx context.Context) (*Summary, error) {
	runCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	r.begin()
	prog := r.startProgress()
	r.produce(runCtx, r.stopper(abort))
	r.end = time.Now()
	prog.Stop()
	return r.summary(ctx, 0), nil
}

func (r *run) runConsume(ctx, setup context.Context) (*Summary, error) {
	if r.cfg.Records > 0 {
		if err := r.checkHolds(setup, r.cfg.Records); err != nil {
			return nil, err
		}
	}
	r.cons.limit, r.cons.reached = r.cfg.Records, make(chan struct{})
	runCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	stop := r.stopper(abort)
	r.begin()
	var consumers []member
	var err error
	if r.cfg.Mode == ModeShare {
		consumers, err = r.newShareMembers(setup)
	} else {
		consumers, err = r.newConsumers()
	}
	if err != nil {
		return nil, err
	}
	prog := r.startProgress()
	wait := r.startConsumers(runCtx, consumers, stop)
	var timeUp <-chan time.Time
	if r.cfg.Duration > 0 {
		t := time.NewTimer(r.cfg.Duration)
		defer t.Stop()
		timeUp = t.C
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
loop:
	for {
		select {
		case <-r.cons.reached:
			break loop
		case <-timeUp:
			break loop
		case <-runCtx.Done():
			break loop
		case <-tick.C:
			if r.cfg.Records > 0 && atEnd(consumers, r.partitions) {
				stop(fmt.Errorf("read every partition to its end after %s records, fewer than --records %s",
					count(r.cons.counted.Load()), count(r.cfg.Records)))
			}
		}
	}
	abort(nil) // stops the consumers; a stop reason already given stays
	wait()
	r.end = time.Now()
	prog.Stop()
	closeConsumers(consumers)
	return r.summary(ctx, 0), nil
}

func (r *run) runE2E(ctx, setup context.Context) (*Summary, error) {
	runCtx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	stop := r.stopper(abort)
	consumers, err := r.newConsumers()
	if err != nil {
		return nil, err
	}
	joinStart := time.Now()
	wait := r.startConsumers(runCtx, consumers, stop)
	if err := waitAssigned(setup, consumers, r.partitions); err != nil {
		abort(err)
		wait()
		closeConsumers(consumers)
		return nil, fmt.Errorf("group %s: %w", r.cfg.Group, err)
	}
	r.joinSec = time.Since(joinStart).Seconds()
	r.begin()
	prog := r.startProgress()
	r.produce(runCtx, stop)
	r.tracker.producingEnded()
	grace := time.NewTimer(r.cfg.Grace)
	defer grace.Stop()
	select {
	case <-r.tracker.done:
	case <-grace.C:
	case <-runCtx.Done():
	}
	abort(nil) // stops the consumers; a stop reason already given stays
	wait()
	r.end = time.Now()
	prog.Stop()
	closeConsumers(consumers)
	unconsumed := r.tracker.unconsumed()
	if unconsumed > 0 && ctx.Err() == nil {
		r.unconsumedFailed = unconsumed
		r.failures.Add(fmt.Errorf("acknowledged but not consumed within --grace %v after producing ended", r.cfg.Grace), unconsumed)
	}
	return r.summary(ctx, unconsumed), nil
}

// startConsumers runs a polling goroutine per consumer until ctx ends; the
// returned function waits for them.
func (r *run) startConsumers(ctx context.Context, cs []member, stop func(error)) func() {
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.consume(ctx, i, c, stop)
		}()
	}
	return wg.Wait
}

// checkHolds refuses a consume run of more records than the topic holds.
func (r *run) checkHolds(ctx context.Context, want int64) error {
	first, err := offsetsAt(ctx, r.cfg, r.partitions, protocol.TimestampEarliest)
	if err != nil {
		return err
	}
	last, err := offsetsAt(ctx, r.cfg, r.partitions, protocol.TimestampLatest)
	if err != nil {
		return err
	}
	var have int64
	for p := range first {
		have += last[p] - first[p]
	}
	if have < want {
		return fmt.Errorf("%w %s holds %s records, fewer than --records %s (produce more first, or consume for a --duration)",
			errTopic, r.cfg.Topic, count(have), count(want))
	}
	return nil
}

// atEnd reports whether the consumers together own every partition and have
// each read to the high watermark of its last fetch.
func atEnd(cs []member, partitions int) bool {
	owned := 0
	for _, c := range cs {
		for _, p := range c.states() {
			if !p.known || p.hw < 0 || p.pos < p.hw {
				return false
			}
			owned++
		}
	}
	return owned == partitions
}

// summary computes the figures; unconsumed is e2e's count of records
// acknowledged but not consumed.
func (r *run) summary(ctx context.Context, unconsumed int64) *Summary {
	c := r.cfg
	s := &Summary{Mode: c.Mode, Protocol: c.Protocol, Topic: c.Topic, Partitions: c.Partitions, ReplicationFactor: c.ReplicationFactor,
		Interrupted: ctx.Err() != nil, WarmupSec: c.Warmup.Seconds(), Rate: c.Rate}
	s.ElapsedSec = round(seconds(r.start, r.end), 3)
	if producesIn(c.Mode) {
		s.Body, s.RecordSize, s.Acks, s.Keys, s.Producers = c.Body, c.RecordSize, acksName(c.Acks), c.Keys.String(), c.Producers
		s.Compression = c.Compression.String()
		if c.Protocol == ProtocolKafka {
			s.Body = "" // franz-go sends Kafka produce requests, not a frontend body
		}
		lat := NewLatencies()
		for _, l := range r.prod.lats {
			lat.Merge(l)
		}
		s.Produce = newSideSummary(r.prod.counted.Load(), r.prod.bytes.Load(), r.prod.warmup.Load(),
			seconds(r.plan.warmupEnd, r.prod.last()), lat)
		s.Produce.Sent = r.prod.sent.Load()
		s.Produce.Failed = r.failures.Count() - r.unconsumedFailed
		if c.TxnRecords > 0 {
			commits := NewLatencies()
			for _, l := range r.commits {
				commits.Merge(l)
			}
			t := &TxnSummary{RecordsPerTxn: c.TxnRecords}
			if cl := commits.Summary(); cl != nil {
				t.Committed, t.CommitLatency = cl.Count, cl
			}
			s.Transactions = t
		}
	}
	if c.Mode != ModeProduce {
		s.Consumers, s.Group = c.Consumers, c.Group
		var lat *Latencies
		if c.Mode == ModeE2E {
			lat = NewLatencies()
			for _, l := range r.cons.lats {
				lat.Merge(l)
			}
		}
		first, last := r.cons.first(), r.cons.last()
		cs := newSideSummary(r.cons.counted.Load(), r.cons.bytes.Load(), r.cons.warmup.Load(), seconds(first, last), lat)
		if drains(c.Mode) {
			cs.JoinSec = round(seconds(r.start, first), 3)
			cs.RecordsPerSecWithJoin, cs.MBPerSecWithJoin = rates(cs.Records, cs.Bytes, seconds(r.start, last))
		} else {
			cs.JoinSec, cs.Unconsumed = round(r.joinSec, 3), unconsumed
		}
		s.Consume = cs
	}
	s.Failed, s.Errors = r.failures.Count(), r.failures.Errors()
	r.mu.Lock()
	if r.stopErr != nil {
		s.Error = r.stopErr.Error()
	}
	r.mu.Unlock()
	s.setMain()
	return s
}
