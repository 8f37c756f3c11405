package groups

import "testing"

// TestOffsetsLogPartition: Kafka's partitionFor, abs(String.hashCode) % 50,
// over UTF-16 code units (the values were computed with Java's rules:
// 32-bit wrapping, surrogate pairs for characters outside the BMP).
func TestOffsetsLogPartition(t *testing.T) {
	for name, want := range map[string]int32{
		"test-group":             12, // hashCode 627841412
		"lag-watched":            11, // -1920357261
		"console-consumer-12345": 6,
		"grüppe":                 12, // a negative hash of a non-ASCII name
		"🙂x":                     35, // a surrogate pair
		"":                       0,
	} {
		if got := OffsetsLogPartition(name); got != want {
			t.Errorf("OffsetsLogPartition(%q) = %d, want %d", name, got, want)
		}
	}
}
