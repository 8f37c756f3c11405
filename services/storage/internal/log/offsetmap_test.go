package log

import (
	"errors"
	"fmt"
	"testing"
)

// TestHashKey: every length up to 64 of one message hashes differently,
// and a key hashes the same each time.
func TestHashKey(t *testing.T) {
	msg := make([]byte, 64)
	seen := map[keyHash]int{}
	for n := range len(msg) + 1 {
		h := hashKey(msg[:n])
		if m, ok := seen[h]; ok {
			t.Fatalf("%d and %d zero bytes hash alike", m, n)
		}
		if hashKey(msg[:n]) != h {
			t.Fatalf("%d zero bytes hash differently twice", n)
		}
		seen[h] = n
	}
}

// TestOffsetMap: inserts up to the load limit, updates, lookups of present
// and absent keys, and an insert past the limit refused while updates still
// work.
func TestOffsetMap(t *testing.T) {
	for _, slots := range []int{1, 4, 7, 100, 1000} {
		t.Run(fmt.Sprint(slots), func(t *testing.T) {
			m := newOffsetMap(slots)
			defer m.release()
			limit := slots * mapLoadNum / mapLoadDen
			key := func(i int) keyHash { return hashKey(fmt.Appendf(nil, "key-%d", i)) }
			for i := range limit {
				if err := m.put(key(i), int64(i)); err != nil {
					t.Fatalf("put %d of %d: %v", i, limit, err)
				}
			}
			if err := m.put(key(limit), 1); !errors.Is(err, errMapFull) {
				t.Fatalf("put past the limit: %v, want errMapFull", err)
			}
			for i := range limit {
				if err := m.put(key(i), int64(i)+1000); err != nil {
					t.Fatalf("update %d in a full map: %v", i, err)
				}
			}
			for i := range limit + 10 {
				off, ok := m.get(key(i))
				if want := i < limit; ok != want || (ok && off != int64(i)+1000) {
					t.Fatalf("get %d: %d, %v", i, off, ok)
				}
			}
		})
	}
}

// TestOffsetMapCollisions: hashes crafted to start their probes at the same
// slot, or at the last one (wrapping around), stay distinct keys.
func TestOffsetMapCollisions(t *testing.T) {
	m := newOffsetMap(8)
	defer m.release()
	last := ^uint64(0) // probe start 7, the last slot
	hashes := []keyHash{{last, 1}, {last, 2}, {last, 3}, {0, 1}, {0, 2}, {last, 1 << 63}}
	for i, h := range hashes {
		if err := m.put(h, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range hashes {
		if off, ok := m.get(h); !ok || off != int64(i) {
			t.Fatalf("get %v: %d, %v; want %d", h, off, ok, i)
		}
	}
	for _, h := range []keyHash{{last, 4}, {0, 3}, {1 << 62, 1}} {
		if _, ok := m.get(h); ok {
			t.Fatalf("get %v: found an absent hash", h)
		}
	}
	if m.slots[7].hash != hashes[0] || m.slots[0].hash != hashes[1] {
		t.Fatalf("probes did not wrap around: %+v", m.slots)
	}
}

// TestOffsetMapSizing: a map of mapSlotsFor(n) slots holds n keys, a
// budget's capacity fits in the budget, and a new map from the pool is
// empty.
func TestOffsetMapSizing(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 10, 299, 300, 1 << 20} {
		slots := mapSlotsFor(n)
		if got := slots * mapLoadNum / mapLoadDen; got < n {
			t.Fatalf("%d slots hold %d keys, want %d", slots, got, n)
		}
		if got := mapCapacity(mapBudget(mapBytesFor(n))); got < n {
			t.Fatalf("mapBytesFor(%d) holds %d keys", n, got)
		}
		if mapSlotsFor(mapCapacity(int64(n)*mapSlotBytes))*mapSlotBytes > n*mapSlotBytes {
			t.Fatalf("the capacity of %d bytes needs more than that", n*mapSlotBytes)
		}
	}
	for _, n := range []int64{1, 100, 3000, 1 << 20, 2 << 20, 4194303} {
		slots := mapTableSlots(DefaultMapBytes, n)
		if slots < mapSlotsFor(n) || (slots < DefaultMapBytes/mapSlotBytes && slots >= 2*mapSlotsFor(n)) {
			t.Fatalf("a table for %d keys has %d slots", n, slots)
		}
	}
	if got := mapTableSlots(DefaultMapBytes, 3<<20); got != DefaultMapBytes/mapSlotBytes {
		t.Fatalf("a table for over half the budget has %d slots, not the budget's", got)
	}
	if got := mapCapacity(DefaultMapBytes); got != 4194303 {
		t.Fatalf("default capacity %d", got)
	}
	m := newOffsetMap(100)
	for i := range 75 {
		if err := m.put(keyHash{uint64(i) << 56, 1}, 5); err != nil {
			t.Fatal(err)
		}
	}
	m.release()
	m = newOffsetMap(50)
	defer m.release()
	for i := range 75 {
		if _, ok := m.get(keyHash{uint64(i) << 56, 1}); ok || m.used != 0 || len(m.slots) != 50 {
			t.Fatalf("reused map not empty: %d used, %d slots", m.used, len(m.slots))
		}
	}
}

// BenchmarkHashKey: the key hash of a short key.
func BenchmarkHashKey(b *testing.B) {
	key := []byte("key-123456789012")
	b.SetBytes(int64(len(key)))
	var sink uint64
	for range b.N {
		sink += hashKey(key)[0]
	}
	_ = sink
}
