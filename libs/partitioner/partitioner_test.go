package partitioner

import (
	"math"
	"sync"
	"testing"
)

func TestMurmur2KafkaVectors(t *testing.T) {
	// From Kafka's UtilsTest.testMurmur2 (Java client).
	for key, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := Murmur2([]byte(key)); got != want {
			t.Errorf("Murmur2(%q) = %d, want %d", key, got, want)
		}
		if got := Murmur2String(key); got != want {
			t.Errorf("Murmur2String(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestMurmur2LibrdkafkaVectors(t *testing.T) {
	// From librdkafka's unittest_murmur2, which checks its C port against
	// the Java client; every tail length 0-3 appears.
	for key, want := range map[string]uint32{
		"kafka":                                  0xd067cf64,
		"giberish123456789":                      0x8f552b0c,
		"1234":                                   0x9fc97b14,
		"234":                                    0xe7c009ca,
		"34":                                     0x873930da,
		"4":                                      0x5a4b5ca1,
		"PreAmbleWillBeRemoved,ThePrePartThatIs": 0x78424f1c,
		"reAmbleWillBeRemoved,ThePrePartThatIs":  0x4a62b377,
		"eAmbleWillBeRemoved,ThePrePartThatIs":   0xe0e4e09e,
		"AmbleWillBeRemoved,ThePrePartThatIs":    0x62b8b43f,
		"":                                       0x106e08d9,
	} {
		if got := uint32(Murmur2([]byte(key))); got != want {
			t.Errorf("Murmur2(%q) = %#08x, want %#08x", key, got, want)
		}
	}
	if got := uint32(Murmur2(nil)); got != 0x106e08d9 {
		t.Errorf("Murmur2(nil) = %#08x", got)
	}
}

func TestForKey(t *testing.T) {
	cases := []struct {
		key        string
		partitions int
		want       int
	}{
		// toPositive(0xd067cf64) = 0x5067cf64 = 1348980580.
		{"kafka", 10, 1348980580 % 10},
		{"kafka", 1, 0},
		// -973932308 & 0x7fffffff = 1173551340.
		{"21", 7, 1173551340 % 7},
		{"21", 0, -1},
		{"21", -3, -1},
	}
	for _, c := range cases {
		if got := ForKey([]byte(c.key), c.partitions); got != c.want {
			t.Errorf("ForKey(%q, %d) = %d, want %d", c.key, c.partitions, got, c.want)
		}
		if got := ForKeyString(c.key, c.partitions); got != c.want {
			t.Errorf("ForKeyString(%q, %d) = %d, want %d", c.key, c.partitions, got, c.want)
		}
	}
	// toPositive clears the sign bit rather than negating: MinInt32 -> 0.
	if toPositive(math.MinInt32) != 0 || toPositive(-1) != math.MaxInt32 {
		t.Error("toPositive differs from Kafka's")
	}
	for i := range 10000 {
		key := []byte{byte(i), byte(i >> 8), 'k'}
		if p := ForKey(key, 13); p < 0 || p >= 13 {
			t.Fatalf("ForKey(%v, 13) = %d", key, p)
		}
	}
}

func TestStickyStaysUntilNext(t *testing.T) {
	s := NewSticky(6)
	p := s.Partition()
	if p < 0 || p >= 6 {
		t.Fatalf("partition %d", p)
	}
	for range 100 {
		if s.Partition() != p {
			t.Fatal("partition moved without Next")
		}
	}
	seen := map[int]int{}
	for range 6000 {
		prev := s.Partition()
		next := s.Next()
		if next == prev || next < 0 || next >= 6 || s.Partition() != next {
			t.Fatalf("Next from %d gave %d", prev, next)
		}
		seen[next]++
	}
	for part := range 6 {
		if seen[part] < 700 { // about 1000 each
			t.Fatalf("partition %d chosen %d times of 6000: %v", part, seen[part], seen)
		}
	}
}

func TestStickyEdgeCounts(t *testing.T) {
	one := NewSticky(1)
	if one.Partition() != 0 || one.Next() != 0 || one.NextAfter(0) != 0 {
		t.Fatal("one partition must always be 0")
	}
	none := NewSticky(0)
	if none.Partition() != -1 || none.Next() != -1 {
		t.Fatal("no partitions must give -1")
	}
	none.SetPartitions(3)
	if p := none.Partition(); p < 0 || p >= 3 || none.Partitions() != 3 {
		t.Fatalf("after growing: %d", p)
	}
	s := NewSticky(8)
	s.SetPartitions(16) // growing keeps an in-range partition
	if p := s.Partition(); p >= 8 {
		t.Fatalf("partition %d moved on growth", p)
	}
	for range 100 {
		s.SetPartitions(16)
		s.Next()
		s.SetPartitions(2) // shrinking moves an out-of-range partition into range
		if p := s.Partition(); p < 0 || p >= 2 {
			t.Fatalf("partition %d after shrink to 2", p)
		}
	}
}

func TestStickyNextAfterMovesOnce(t *testing.T) {
	s := NewSticky(4)
	p := s.Partition()
	q := s.NextAfter(p)
	if q == p {
		t.Fatal("NextAfter(current) did not move")
	}
	if r := s.NextAfter(p); r != q {
		t.Fatal("a second NextAfter with the old partition moved again")
	}
}

func TestStickyConcurrent(t *testing.T) {
	s := NewSticky(5)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				p := s.Partition()
				if p < 0 || p >= 5 {
					t.Errorf("partition %d", p)
					return
				}
				s.NextAfter(p)
				s.Next()
			}
		})
	}
	wg.Wait()
}

func BenchmarkForKey(b *testing.B) {
	key := []byte("user-0123456789")
	b.SetBytes(int64(len(key)))
	b.ReportAllocs()
	for b.Loop() {
		ForKey(key, 12)
	}
}
