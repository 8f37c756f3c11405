package log

import (
	"errors"
	"hash/maphash"
	"math/bits"
	"sync"
	"weak"
)

// offsetMap is a cleaning pass's key map: the 128-bit hash of each key of
// the mapped segments -> the key's latest offset there. It is an array of
// fixed 24-byte slots with linear probing, in the manner of Kafka's
// SkimpyOffsetMap: it never grows, so its memory is what the pass sized it
// to, at most CleanOptions.MapBytes. The first 64 bits of the hash pick the
// probe start (the hash is already uniform, so no second hashing); a slot
// holding the same 128 bits is the same key. A pass sizes the table from the
// offsets its segments span (every key has at least one offset), so at most
// mapLoadNum/mapLoadDen of the slots are ever taken. Used by one goroutine.
type offsetMap struct {
	slots []mapSlot
	used  int // slots taken
	limit int // slots that may be taken: len(slots) at the maximum load
}

// mapSlot is one entry; next is 0 in an empty slot, so a zeroed table is
// empty.
type mapSlot struct {
	hash keyHash
	next int64 // the key's latest offset + 1
}

// keyHash is a key's 128-bit hash (hashKey).
type keyHash [2]uint64

// mapSlotBytes is the memory of one slot (CleanOptions.MapBytes counts
// these). The maximum load is mapLoadNum/mapLoadDen: with linear probing a
// lookup of an absent key (every new key, and every key of a clean segment
// that the dirty ones do not hold) probes about (1+1/(1-a)²)/2 slots at load
// a: 8.5 at 0.75, 50 at Kafka's 0.9, so the map gives up a sixth of the
// entries 0.9 would hold for short probes.
const (
	mapSlotBytes = 24
	mapLoadNum   = 3
	mapLoadDen   = 4
)

// errMapFull: an insert found the map at its maximum load. The pass sizes the
// map for the offsets it maps, so this is a bug, reported as an error.
var errMapFull = errors.New("log: cleaner key map full")

// mapCapacity is how many keys a map of budget bytes may hold.
func mapCapacity(budget int64) int64 {
	return budget / mapSlotBytes * mapLoadNum / mapLoadDen
}

// mapSlotsFor is how many slots hold keys entries at the maximum load.
func mapSlotsFor(keys int64) int64 {
	return (keys*mapLoadDen + mapLoadNum - 1) / mapLoadNum
}

// mapTableSlots is the size of the table a pass mapping keys keys gets
// under budget: the budget's slots halved as often as keys still fit. A
// table a pass outgrows is garbage until the next collection, so sizes
// step by powers of two: a growing table leaves at most half its new size
// behind, and a pass needing more than half the budget gets all of it,
// which every later pass reuses (peak heap: the budget, not twice it).
func mapTableSlots(budget, keys int64) int64 {
	n, need := budget/mapSlotBytes, mapSlotsFor(keys)
	for n/2 >= need && n/2 > 0 {
		n /= 2
	}
	return n
}

// spareMap keeps a weak reference to the table of the last finished pass,
// of any log, for the next one: passes on one log are serialized, and
// Kafka likewise gives each cleaner thread one buffer, where a table per
// Log would pin MapBytes per partition. Back-to-back passes reuse it; once
// a collection finds it unused it is freed, so an idle cleaner holds no
// table, and a new one is never allocated while a dropped one is still
// held. (A sync.Pool lost it whenever the next pass ran on another P,
// doubling the peak heap.)
var spareMap struct {
	sync.Mutex
	p weak.Pointer[offsetMap]
}

// newOffsetMap returns an empty map of n slots, reusing the spare table
// when it is large enough.
func newOffsetMap(n int) *offsetMap {
	spareMap.Lock()
	m := spareMap.p.Value()
	spareMap.p = weak.Pointer[offsetMap]{}
	spareMap.Unlock()
	if m == nil || cap(m.slots) < n {
		m = &offsetMap{slots: make([]mapSlot, n)}
	} else {
		m.slots = m.slots[:n]
		clear(m.slots)
	}
	m.used, m.limit = 0, n*mapLoadNum/mapLoadDen
	return m
}

// release keeps the table for a later pass; m must not be used after.
func (m *offsetMap) release() {
	if cap(m.slots) == 0 {
		return
	}
	spareMap.Lock()
	spareMap.p = weak.Make(m)
	spareMap.Unlock()
}

// start is the slot where the probe for h begins.
func (m *offsetMap) start(h keyHash) int {
	hi, _ := bits.Mul64(h[0], uint64(len(m.slots)))
	return int(hi)
}

// put records offset as the latest of the key hashed h. It fails only when
// h is new and the map is at its maximum load.
func (m *offsetMap) put(h keyHash, offset int64) error {
	if len(m.slots) == 0 {
		return errMapFull
	}
	for i := m.start(h); ; {
		s := &m.slots[i]
		switch {
		case s.next == 0:
			if m.used >= m.limit {
				return errMapFull
			}
			*s = mapSlot{hash: h, next: offset + 1}
			m.used++
			return nil
		case s.hash == h:
			s.next = offset + 1
			return nil
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

// get returns the latest offset of the key hashed h, if mapped. The probe
// ends at an empty slot, which the load limit guarantees.
func (m *offsetMap) get(h keyHash) (int64, bool) {
	if len(m.slots) == 0 {
		return 0, false
	}
	for i := m.start(h); ; {
		s := &m.slots[i]
		switch {
		case s.next == 0:
			return 0, false
		case s.hash == h:
			return s.next - 1, true
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

// keySeeds are the seeds of the two halves of a key's hash, chosen at
// random per process: the map lives only for one pass, so no hash needs to
// be the same in another process, and keys cannot be crafted to collide
// without knowing the seeds.
var keySeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// hashKey is a key's 128-bit hash: two 64-bit hash/maphash hashes (AES
// based where the CPU has it; about 5 ns each for a short key) under
// independent random seeds. Two different keys of one pass share a hash
// with probability about n²/2^129 for n keys (10^-24 for 10^9 keys); a
// shared hash would drop the older one's record as if overwritten. Kafka's
// cleaner keys its map by MD5.
func hashKey(k []byte) keyHash {
	return keyHash{maphash.Bytes(keySeeds[0], k), maphash.Bytes(keySeeds[1], k)}
}
