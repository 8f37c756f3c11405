package tier

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/objstore"
	seglog "github.com/sluicemq/sluice/services/storage/internal/log"
)

// reader serves reads of remote segments from the block cache, fetching
// what is missing in the background: a read that misses starts the fetch
// and returns at once with a channel closed when it is done, so a fetch
// request never waits on the object store while holding anything the
// tail's readers need, and its other partitions are answered meanwhile.
type reader struct {
	store   objstore.Store
	cache   *cache
	metrics *Metrics
	ctx     context.Context // ends at Close: stops the fetches
	timeout time.Duration
	slots   chan struct{} // bounds the fetches in flight
	wg      sync.WaitGroup

	mu       sync.Mutex
	indexes  map[string]*segIndex       // by object
	inflight map[blockKey]chan struct{} // by the block fetched (block -1: the index)
	failed   map[blockKey]failure       // likewise: the last failure, retried after failRetry
}

// segIndex is a remote segment's block index and aborted transactions.
type segIndex struct {
	blocks  []block
	aborted []seglog.AbortedTxn
}

type failure struct {
	err error
	at  time.Time
}

// readAheadBlocks is how many blocks past the one a read is served from
// are fetched in the background (within the fetch slots), so that a
// consumer reading on finds them cached: the object store's latency is
// paid once per readAheadBlocks blocks, not once per block.
const readAheadBlocks = 8

// failRetry is how long a failed fetch's error is answered before the
// next read tries the object store again.
const failRetry = time.Second

// readResult is what a remote read found.
type readResult struct {
	slice   seglog.Slice
	aborted []seglog.AbortedTxn
	// wait, when not nil, is closed when the fetch the read started is
	// done: read again then.
	wait <-chan struct{}
}

// read returns whole batches of seg from the first one holding offset (or
// after it), at most maxBytes but always the first.
func (r *reader) read(seg *cluster.RemoteSegment, offset int64, maxBytes int) (readResult, error) {
	idx, wait, err := r.index(seg)
	if idx == nil {
		return readResult{wait: wait}, err
	}
	i := sort.Search(len(idx.blocks), func(i int) bool { return idx.blocks[i].first > offset }) - 1
	i = max(i, 0)
	for ; i < len(idx.blocks); i++ {
		e, wait, err := r.block(seg, idx, i)
		if e == nil {
			return readResult{wait: wait}, err
		}
		sl, found, err := r.sliceOf(seg, e, offset, maxBytes)
		if err != nil || !found {
			r.cache.unref(e)
			if err != nil {
				return readResult{}, err
			}
			continue // offset is past this block's last batch
		}
		for k := i + 1; k <= i+readAheadBlocks; k++ {
			r.readAhead(seg, idx, k)
		}
		return readResult{slice: sl, aborted: idx.aborted}, nil
	}
	// offset is past the segment's last batch (compaction left no record
	// there): nothing in this segment.
	return readResult{}, nil
}

// sliceOf finds the batch holding offset (or the first after it) in a
// cached block and returns whole batches from it within maxBytes.
func (r *reader) sliceOf(seg *cluster.RemoteSegment, e *cacheEntry, offset int64, maxBytes int) (seglog.Slice, bool, error) {
	first, end, next := int64(-1), int64(0), int64(0)
	err := walkBlock(seg, e, func(pos int64, h record.Header) bool {
		size := int64(h.Size())
		switch {
		case first < 0 && h.LastOffset() >= offset:
			first = pos
		case first >= 0 && pos+size-first > int64(maxBytes):
			next = h.BaseOffset
			return false
		}
		end, next = pos+size, h.LastOffset()+1
		return true
	})
	if err != nil || first < 0 {
		return seglog.Slice{}, false, err
	}
	return seglog.FileSlice(e.f, first, end-first, next, func() { r.cache.unref(e) }), true, nil
}

// walkBlock calls fn with the position and header of each batch of a
// cached block, in order, until fn returns false.
func walkBlock(seg *cluster.RemoteSegment, e *cacheEntry, fn func(pos int64, h record.Header) bool) error {
	var hdr [record.HeaderSize]byte
	for pos := int64(0); pos < e.size; {
		if _, err := e.f.ReadAt(hdr[:], pos); err != nil {
			return fmt.Errorf("remote segment %s: read cached block: %w", seg.Object, err)
		}
		h, err := record.ParseHeader(hdr[:])
		if err != nil {
			return fmt.Errorf("%w %s: %w", errCorruptObject, seg.Object, err)
		}
		if !fn(pos, h) {
			return nil
		}
		pos += int64(h.Size())
	}
	return nil
}

// index returns seg's block index, or starts fetching it.
func (r *reader) index(seg *cluster.RemoteSegment) (*segIndex, <-chan struct{}, error) {
	r.mu.Lock()
	idx := r.indexes[seg.Object]
	r.mu.Unlock()
	if idx != nil {
		return idx, nil, nil
	}
	wait, err := r.start(blockKey{object: seg.Object, block: -1}, func(ctx context.Context) error { return r.fetchIndex(ctx, seg) })
	return nil, wait, err
}

// block returns block i of seg from the cache (with a reference), or
// starts fetching it.
func (r *reader) block(seg *cluster.RemoteSegment, idx *segIndex, i int) (*cacheEntry, <-chan struct{}, error) {
	k := blockKey{object: seg.Object, block: i}
	if e := r.cache.get(k); e != nil {
		r.metrics.CacheHits.Inc()
		return e, nil, nil
	}
	r.metrics.CacheMisses.Inc()
	wait, err := r.startBlock(seg, idx, i)
	return nil, wait, err
}

// readAhead fetches block i in the background when it is not cached, so a
// consumer reading on finds it there.
func (r *reader) readAhead(seg *cluster.RemoteSegment, idx *segIndex, i int) {
	if i < len(idx.blocks) && !r.cache.has(blockKey{object: seg.Object, block: i}) {
		_, _ = r.startBlock(seg, idx, i)
	}
}

// startBlock starts fetching block i of seg (start).
func (r *reader) startBlock(seg *cluster.RemoteSegment, idx *segIndex, i int) (<-chan struct{}, error) {
	return r.start(blockKey{object: seg.Object, block: i}, func(ctx context.Context) error { return r.fetchBlock(ctx, seg, idx, i) })
}

// start runs job, the fetch of what name names, in the background unless
// it is running already, and returns a channel closed when it ends. A job
// that failed less than failRetry ago is not started again: its error is
// returned.
func (r *reader) start(name blockKey, job func(context.Context) error) (<-chan struct{}, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch := r.inflight[name]; ch != nil {
		return ch, nil
	}
	if f, ok := r.failed[name]; ok && time.Since(f.at) < failRetry {
		return nil, f.err
	}
	if r.ctx.Err() != nil {
		return nil, r.ctx.Err()
	}
	ch := make(chan struct{})
	r.inflight[name] = ch
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := r.run(job)
		r.mu.Lock()
		delete(r.inflight, name)
		if err != nil {
			r.failed[name] = failure{err: err, at: time.Now()}
		} else {
			delete(r.failed, name)
		}
		r.mu.Unlock()
		close(ch)
	}()
	return ch, nil
}

// run waits for a fetch slot and runs job with the read timeout.
func (r *reader) run(job func(context.Context) error) error {
	select {
	case r.slots <- struct{}{}:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	defer func() { <-r.slots }()
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	begin := time.Now()
	err := job(ctx)
	r.metrics.ReadSeconds.Observe(time.Since(begin).Seconds())
	if err != nil {
		r.metrics.ReadErrors.Inc()
	}
	return err
}

// fetchIndex reads seg's block index and aborted transactions (adjacent
// sections) in one ranged read and checks them.
func (r *reader) fetchIndex(ctx context.Context, seg *cluster.RemoteSegment) error {
	s := seg.Sections
	from, to := s.IndexPos, s.AbortedPos+s.AbortedLen
	if s.AbortedPos != s.IndexPos+s.IndexLen || from < seg.LogBytes || to > seg.Bytes {
		return fmt.Errorf("%w %s: sections out of place", errCorruptObject, seg.Object)
	}
	b, err := r.store.GetRange(ctx, seg.Object, from, to-from)
	if err != nil {
		return fmt.Errorf("remote segment %s [%d, %d): read its index: %w", seg.Object, seg.BaseOffset, seg.EndOffset, err)
	}
	ib, ab := b[:min(int64(len(b)), s.IndexLen)], b[min(int64(len(b)), s.IndexLen):]
	if err := checkSection(seg, "block index", ib, s.IndexLen, s.IndexCRC); err != nil {
		return err
	}
	if err := checkSection(seg, "aborted transactions", ab, s.AbortedLen, s.AbortedCRC); err != nil {
		return err
	}
	blocks, err := decodeBlocks(seg, ib)
	if err != nil {
		return err
	}
	aborted, err := decodeAborted(seg, ab)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.indexes[seg.Object] = &segIndex{blocks: blocks, aborted: aborted}
	r.mu.Unlock()
	return nil
}

// fetchBlock reads block i of seg, checks its CRC-32C and first offset,
// and caches it.
func (r *reader) fetchBlock(ctx context.Context, seg *cluster.RemoteSegment, idx *segIndex, i int) error {
	bl := idx.blocks[i]
	end := seg.LogBytes
	if i+1 < len(idx.blocks) {
		end = idx.blocks[i+1].pos
	}
	b, err := r.store.GetRange(ctx, seg.Object, bl.pos, end-bl.pos)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w %s: block %d is short: %w", errCorruptObject, seg.Object, i, err)
		}
		return fmt.Errorf("remote segment %s [%d, %d): read block %d: %w", seg.Object, seg.BaseOffset, seg.EndOffset, i, err)
	}
	if got := crc32.Checksum(b, castagnoli); got != bl.crc || int64(len(b)) != end-bl.pos {
		return fmt.Errorf("%w %s: block %d at %d: CRC-32C %08x, want %08x", errCorruptObject, seg.Object, i, bl.pos, got, bl.crc)
	}
	if h, err := record.ParseHeader(b); err != nil || h.BaseOffset != bl.first {
		return fmt.Errorf("%w %s: block %d does not start with offset %d", errCorruptObject, seg.Object, i, bl.first)
	}
	r.metrics.ReadBytes.Add(float64(len(b)))
	return r.cache.put(blockKey{object: seg.Object, block: i}, b)
}

// forget drops what the reader keeps of a segment gone from the remote log.
func (r *reader) forget(object string) {
	r.mu.Lock()
	delete(r.indexes, object)
	r.mu.Unlock()
	r.cache.drop(object)
}

// close stops the fetches and waits for them.
func (r *reader) close() {
	r.wg.Wait()
	r.cache.close()
}
