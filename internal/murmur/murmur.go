// Package murmur is the Java client's murmur2 hash, bit for bit.
//
// Why it must be exact: the default partitioner maps a keyed record to
// toPositive(murmur2(key)) % numPartitions. Records with the same key have to
// land in the same partition whichever client produced them, so a Go
// producer and a Java producer writing the same keys must agree on every hash
// — including Java's quirks: the length is mixed into the seed, the tail
// bytes are folded in little-endian order, and toPositive masks the sign bit
// rather than taking an absolute value.
package murmur

// Murmur2 is org.apache.kafka.common.utils.Utils.murmur2: MurmurHash2 with
// seed 0x9747b28c, computed in 32-bit two's-complement arithmetic as Java's
// int does.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	n4 := length &^ 3
	for i := 0; i < n4; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	// Java's switch falls through from case 3 to case 1.
	switch length & 3 {
	case 3:
		h ^= uint32(data[n4+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[n4+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[n4])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// ToPositive is Utils.toPositive: it clears the sign bit, so that
// math.MinInt32 maps to 0 rather than overflowing as an absolute value would.
func ToPositive(n int32) int32 { return n & 0x7fffffff }

// Partition is the partition the Java client's default partitioner (and
// BuiltInPartitioner.partitionForKey) picks for a non-null key. Records with
// a null key are not hashed (the sticky partitioner places them), so callers
// handle nil keys before calling this. numPartitions must be positive.
func Partition(key []byte, numPartitions int32) int32 {
	return ToPositive(Murmur2(key)) % numPartitions
}
