package log

import (
	"encoding/binary"
	"errors"
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

// hashKey is SipHash-2-4 with its 128-bit output, under a fixed key so
// that a pass is deterministic. Two different keys of one pass share a hash
// with probability about n²/2^129 for n keys (10^-24 for 10^9 keys); a
// shared hash would drop the older one's record as if overwritten. SipHash
// replaced a 16-byte SHA-256 prefix: 20-30 ns a short key instead of 85-95
// (FNV-128a is as fast at 9 bytes but 94 ns at 36, and its low bits mix
// poorly). With a public key it is not collision resistant against someone
// crafting keys, which SHA-256 was; no attack is known, and Kafka's
// cleaner uses MD5, whose collisions are practical.
func hashKey(k []byte) keyHash {
	return sipHash128(0x736c756963652d63, 0x6c65616e65722d31, k) // "sluice-c", "leaner-1"
}

// sipHash128 is SipHash-2-4 of p under the key (k0, k1), 128-bit output
// (the reference's two little-endian words).
func sipHash128(k0, k1 uint64, p []byte) keyHash {
	k := p
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d ^ 0xee // 0xee: the 128-bit variant
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	n := len(k)
	for ; len(k) >= 8; k = k[8:] {
		m := binary.LittleEndian.Uint64(k)
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
	}
	last := uint64(n) << 56
	for i := len(k) - 1; i >= 0; i-- {
		last |= uint64(k[i]) << (8 * i)
	}
	v3 ^= last
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= last
	v2 ^= 0xee
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	h0 := v0 ^ v1 ^ v2 ^ v3
	v1 ^= 0xdd
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	return keyHash{h0, v0 ^ v1 ^ v2 ^ v3}
}

func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13) ^ v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16) ^ v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21) ^ v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17) ^ v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}
