package recbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

// Kafka's snappy is not the raw snappy block format nor Google's framing
// format but snappy-java's SnappyOutputStream framing (the Java client wraps
// the batch in one): a 16-byte header — the magic 0x82 'SNAPPY' 0x00, then
// version 1 and minimum compatible version 1 as big-endian int32s — followed
// by blocks of at most 32 KiB of input, each a big-endian int32 length and a
// raw snappy block. Java's SnappyInputStream also accepts a bare raw snappy
// block (no header), which some non-Java clients send, so the decoder does
// too.
var xerialHeader = [16]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

// xerialBlockSize is SnappyOutputStream's default block size, which the Java
// client uses by default.
const xerialBlockSize = 32 << 10

// xerialBound is the most appendXerial can write for n bytes of input: the
// header, then per block its length word and s2.MaxEncodedLen of its size
// (the room appendXerial makes before encoding it). A dst with that much
// spare capacity is never grown.
func xerialBound(n int) int {
	full := n / xerialBlockSize
	size := len(xerialHeader) + full*(4+s2.MaxEncodedLen(xerialBlockSize))
	if rest := n % xerialBlockSize; rest > 0 {
		size += 4 + s2.MaxEncodedLen(rest)
	}
	return size
}

func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialHeader[:]...)
	for len(src) > 0 {
		block := src[:min(len(src), xerialBlockSize)]
		src = src[len(block):]

		at := len(dst)
		bound := s2.MaxEncodedLen(len(block))
		dst = slices.Grow(dst, 4+bound)[:at+4+bound]
		// EncodeSnappy encodes in place when given the room, which it
		// has; it emits only standard snappy (no s2 extensions).
		enc := s2.EncodeSnappy(dst[at+4:], block)
		if len(enc) > 0 && &enc[0] != &dst[at+4] {
			copy(dst[at+4:], enc) // not expected, but keep the output right
		}
		binary.BigEndian.PutUint32(dst[at:], uint32(len(enc)))
		dst = dst[:at+4+len(enc)]
	}
	return dst
}

var errXerial = errors.New("recbatch: malformed xerial snappy stream")

// appendSnappyDecoded decodes a xerial-framed stream, or a bare snappy block
// when the xerial header is absent (SnappyInputStream's fallback), appending
// at most limit bytes to dst. Blocks are decoded with the strict standard
// snappy decoder: s2's extensions are not snappy and Java would reject them.
func appendSnappyDecoded(dst, src []byte, limit int) ([]byte, error) {
	start := len(dst)
	if len(src) < len(xerialHeader) || !bytes.Equal(src[:8], xerialHeader[:8]) {
		return appendSnappyBlock(dst, src, limit)
	}
	if int32(binary.BigEndian.Uint32(src[8:])) < 1 { // SnappyCodec.MINIMUM_COMPATIBLE_VERSION
		return dst, errXerial
	}
	p := src[len(xerialHeader):]
	for len(p) > 0 {
		if len(p) < 4 {
			return dst[:start], errXerial
		}
		size := int64(int32(binary.BigEndian.Uint32(p)))
		p = p[4:]
		if size < 0 || size > int64(len(p)) {
			return dst[:start], errXerial
		}
		var err error
		if dst, err = appendSnappyBlock(dst, p[:size], limit-(len(dst)-start)); err != nil {
			return dst[:start], err
		}
		p = p[size:]
	}
	return dst, nil
}

func appendSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > limit {
		return dst, ErrDecompressLimit
	}
	at := len(dst)
	dst = slices.Grow(dst, n)
	room := dst[at : at+n]
	out, err := snappy.DecodeStrict(room, block)
	if err != nil {
		return dst[:at], err
	}
	if len(out) != n || (n > 0 && &out[0] != &room[0]) {
		return dst[:at], errXerial
	}
	return dst[:at+n], nil
}
