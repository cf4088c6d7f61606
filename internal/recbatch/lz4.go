package recbatch

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/pierrec/lz4/v4"
)

// Kafka's lz4 is the LZ4 frame format, as written by the Java client's
// Lz4BlockOutputStream: FLG = version 01 + independent blocks, no block or
// content checksum, no content size; BD = 64 KiB maximum block size; then
// blocks, each behind a little-endian length whose top bit marks a block
// stored uncompressed; then a zero-length end mark. We write that frame
// ourselves around pierrec/lz4's block compressors rather than use its
// frame Writer: that pins exactly the flags Java writes (Java's reader
// rejects some others, e.g. dependent blocks) and lets the compressor state
// be reused without any per-frame allocation.
const (
	lz4Magic     = 0x184D2204
	lz4FLG       = 0x60 // version 01, block independence
	lz4BD        = 0x40 // max block size 64 KiB
	lz4BlockSize = 64 << 10
	// lz4HeaderChecksum is (xxh32(FLG BD, seed 0) >> 8) & 0xFF, the frame
	// descriptor checksum; constant because FLG and BD are (a test
	// recomputes it).
	lz4HeaderChecksum = 0x82
	lz4Uncompressed   = 0x80000000
)

// lz4Depth maps a Java compression.lz4.level to a pierrec compressor. Java
// uses lz4-java's fast compressor for the default level 9 (that is what it
// always used before the level became configurable) and its high-compression
// compressor at the given level otherwise: Kafka's Lz4BlockOutputStream picks
// `level == CompressionType.LZ4.defaultLevel() ? fastCompressor() :
// highCompressor(level)`, DEFAULT_LEVEL being 9 (KIP-390). So the default
// costs what franz-go's lz4 (pierrec's fast mode) costs, and any other level,
// 1 included, is several times slower (BenchmarkSealLZ4Level). LZ4HC's
// search depth at level L is 2^(L-1) for the chain levels, which we extend
// (capped at the 64 KiB window) to the higher ones.
func lz4Depth(level int) lz4.CompressionLevel {
	if level == LZ4DefaultLevel {
		return 0
	}
	return lz4.CompressionLevel(1) << min(max(level-1, 0), 16)
}

// lz4FrameBound is the most appendFrame can write for n bytes of input:
// the frame header, then per block its length word and
// lz4.CompressBlockBound of its size (the room appendFrame makes before
// compressing it), then the end mark. A dst with that much spare capacity is
// never grown.
func lz4FrameBound(n int) int {
	const header, perBlock, endMark = 7, 4, 4
	full := n / lz4BlockSize
	size := header + endMark + full*(perBlock+lz4.CompressBlockBound(lz4BlockSize))
	if rest := n % lz4BlockSize; rest > 0 {
		size += perBlock + lz4.CompressBlockBound(rest)
	}
	return size
}

// lz4Encoder holds the block compressors' hash tables for reuse. The fast
// compressor's (128 KiB of table, 8 KiB of in-use bitmap) are all the
// default level needs; the HC compressor's 256 KiB are allocated only for
// a Compressor at another level.
type lz4Encoder struct {
	fast lz4.Compressor
	hc   *lz4.CompressorHC
}

func (e *lz4Encoder) appendFrame(dst, src []byte, depth lz4.CompressionLevel) ([]byte, error) {
	if depth != 0 {
		if e.hc == nil {
			e.hc = new(lz4.CompressorHC)
		}
		e.hc.Level = depth
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, lz4Magic)
	dst = append(dst, lz4FLG, lz4BD, lz4HeaderChecksum)
	for len(src) > 0 {
		block := src[:min(len(src), lz4BlockSize)]
		src = src[len(block):]

		at := len(dst)
		bound := lz4.CompressBlockBound(len(block))
		dst = slices.Grow(dst, 4+bound)[:at+4+bound]
		var n int
		var err error
		if depth == 0 {
			n, err = e.fast.CompressBlock(block, dst[at+4:])
		} else {
			n, err = e.hc.CompressBlock(block, dst[at+4:])
		}
		if err != nil {
			return dst[:start], err
		}
		if n == 0 || n >= len(block) {
			// Incompressible: store it, as Java does, so a block never
			// costs more than its size plus the length word.
			binary.LittleEndian.PutUint32(dst[at:], uint32(len(block))|lz4Uncompressed)
			n = copy(dst[at+4:], block)
		} else {
			binary.LittleEndian.PutUint32(dst[at:], uint32(n))
		}
		dst = dst[:at+4+n]
	}
	return binary.LittleEndian.AppendUint32(dst, 0), nil // end mark
}

var (
	errLZ4Frame     = errors.New("recbatch: malformed lz4 frame")
	errLZ4Checksum  = errors.New("recbatch: lz4 checksum mismatch")
	errLZ4Truncated = errors.New("recbatch: truncated lz4 frame")
)

// appendLZ4Decoded decodes one LZ4 frame, accepting what the Java client's
// Lz4BlockInputStream accepts: version 01, independent blocks, any of the
// four block sizes, optional content size, block and content checksums
// (verified). Dependent blocks and dictionaries are rejected, as in Java.
// Bytes after the end mark are ignored, as in Java. At most limit bytes are
// appended.
func appendLZ4Decoded(dst, src []byte, limit int) ([]byte, error) {
	le := binary.LittleEndian
	if len(src) < 7 {
		return dst, errLZ4Truncated
	}
	if le.Uint32(src) != lz4Magic {
		return dst, errLZ4Frame
	}
	flg, bd := src[4], src[5]
	if flg>>6 != 1 || flg&0x20 == 0 || flg&0x03 != 0 || bd&0x8f != 0 {
		return dst, errLZ4Frame
	}
	sizeID := int(bd>>4) & 7
	if sizeID < 4 {
		return dst, errLZ4Frame
	}
	maxBlock := 1 << (2*sizeID + 8)
	hasBlockSum, hasContentSize, hasContentSum := flg&0x10 != 0, flg&0x08 != 0, flg&0x04 != 0

	descEnd := 6
	if hasContentSize {
		descEnd += 8
	}
	if len(src) < descEnd+1 {
		return dst, errLZ4Truncated
	}
	if src[descEnd] != byte(xxh32(src[4:descEnd], 0)>>8) {
		return dst, errLZ4Checksum
	}
	p := src[descEnd+1:]
	start := len(dst)
	for {
		if len(p) < 4 {
			return dst[:start], errLZ4Truncated
		}
		word := le.Uint32(p)
		p = p[4:]
		if word == 0 {
			break
		}
		size := int(word &^ lz4Uncompressed)
		if size > maxBlock {
			return dst[:start], errLZ4Frame
		}
		if len(p) < size {
			return dst[:start], errLZ4Truncated
		}
		block := p[:size]
		p = p[size:]
		if hasBlockSum {
			if len(p) < 4 {
				return dst[:start], errLZ4Truncated
			}
			if le.Uint32(p) != xxh32(block, 0) {
				return dst[:start], errLZ4Checksum
			}
			p = p[4:]
		}
		room := limit - (len(dst) - start)
		if word&lz4Uncompressed != 0 {
			if size > room {
				return dst[:start], ErrDecompressLimit
			}
			dst = append(dst, block...)
			continue
		}
		// A block decodes to at most maxBlock bytes; offering no more
		// than the remaining allowance makes an over-long block fail
		// in the decoder instead of growing dst past the limit.
		capped := room < maxBlock
		room = min(room, maxBlock)
		at := len(dst)
		dst = slices.Grow(dst, room)
		n, err := lz4.UncompressBlock(block, dst[at:at+room])
		if err != nil {
			if capped {
				return dst[:start], ErrDecompressLimit
			}
			return dst[:start], errLZ4Frame
		}
		dst = dst[:at+n]
	}
	if hasContentSum {
		if len(p) < 4 {
			return dst[:start], errLZ4Truncated
		}
		if le.Uint32(p) != xxh32(dst[start:], 0) {
			return dst[:start], errLZ4Checksum
		}
	}
	if hasContentSize && le.Uint64(src[6:]) != uint64(len(dst)-start) {
		return dst[:start], errLZ4Frame
	}
	return dst, nil
}

// xxh32 is XXH32, the checksum of the LZ4 frame format. Only the decoder
// needs it in general (our frames carry no checksums but the descriptor's,
// which is constant), so a plain scalar version is enough.
func xxh32(b []byte, seed uint32) uint32 {
	const (
		p1 uint32 = 2654435761
		p2 uint32 = 2246822519
		p3 uint32 = 3266489917
		p4 uint32 = 668265263
		p5 uint32 = 374761393
	)
	rotl := func(x uint32, r uint) uint32 { return x<<r | x>>(32-r) }
	round := func(acc, in uint32) uint32 { return rotl(acc+in*p2, 13) * p1 }
	le := binary.LittleEndian

	n := len(b)
	var h uint32
	if n >= 16 {
		v1, v2, v3, v4 := seed+p1+p2, seed+p2, seed, seed-p1
		for len(b) >= 16 {
			v1 = round(v1, le.Uint32(b[0:]))
			v2 = round(v2, le.Uint32(b[4:]))
			v3 = round(v3, le.Uint32(b[8:]))
			v4 = round(v4, le.Uint32(b[12:]))
			b = b[16:]
		}
		h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)
	} else {
		h = seed + p5
	}
	h += uint32(n)
	for len(b) >= 4 {
		h = rotl(h+le.Uint32(b)*p3, 17) * p4
		b = b[4:]
	}
	for _, c := range b {
		h = rotl(h+uint32(c)*p5, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}
