package recbatch

import "math/bits"

// Kafka's record fields use protobuf-style zigzag varints. The 32-bit
// (varint) and 64-bit (varlong) forms encode any int32 value to the same
// bytes, so one pair of helpers serves both.

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// uvarintLen is the number of 7-bit groups needed for x (at least one).
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func varintLen(v int64) int { return uvarintLen(zigzag(v)) }

// putVarint writes v at the start of p, which the caller has sized with
// varintLen, and returns the number of bytes written. Writing into an
// already-sized slice (rather than appending) is what keeps Append free of
// per-field capacity checks and allocations.
func putVarint(p []byte, v int64) int {
	x := zigzag(v)
	i := 0
	for x >= 0x80 {
		p[i] = byte(x) | 0x80
		x >>= 7
		i++
	}
	p[i] = byte(x)
	return i + 1
}
