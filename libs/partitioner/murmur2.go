package partitioner

// Constants of Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2).
const (
	murmurSeed uint32 = 0x9747b28c
	murmurM    uint32 = 0x5bd1e995
	murmurR           = 24
)

// Murmur2 returns Kafka's 32-bit murmur2 hash of data, bit for bit the value
// of Utils.murmur2 in Kafka's Java client (as an int32, which may be
// negative). A nil or empty key hashes to 0x106e08d9.
func Murmur2(data []byte) int32 { return murmur2(data) }

// Murmur2String is Murmur2 of a string's bytes, without converting it.
func Murmur2String(s string) int32 { return murmur2(s) }

// murmur2 works on strings and byte slices alike. Java's signed int
// arithmetic wraps exactly like uint32 arithmetic here, and its >>> is a
// logical shift, as on uint32.
func murmur2[T string | []byte](data T) int32 {
	n := len(data)
	h := murmurSeed ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= murmurM
		k ^= k >> murmurR
		k *= murmurM
		h *= murmurM
		h ^= k
	}
	// The tail: Java's switch falls through from case 3 to case 1.
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= murmurM
	}
	h ^= h >> 13
	h *= murmurM
	h ^= h >> 15
	return int32(h)
}

// toPositive is Kafka's Utils.toPositive: the hash with its sign bit cleared
// (not its absolute value, which would overflow for math.MinInt32).
func toPositive(h int32) int { return int(h & 0x7fffffff) }

// ForKey returns the partition of a keyed record among partitions
// partitions, as Kafka's default partitioner computes it:
// toPositive(murmur2(key)) % partitions. It returns -1 when partitions < 1.
// Records without a key should use a Sticky instead.
func ForKey(key []byte, partitions int) int {
	if partitions < 1 {
		return -1
	}
	return toPositive(murmur2(key)) % partitions
}

// ForKeyString is ForKey for a key held as a string.
func ForKeyString(key string, partitions int) int {
	if partitions < 1 {
		return -1
	}
	return toPositive(murmur2(key)) % partitions
}
