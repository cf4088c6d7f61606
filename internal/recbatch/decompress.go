package recbatch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ErrDecompressLimit is returned when a records section would decompress to
// more than the Decompressor's limit.
var ErrDecompressLimit = errors.New("recbatch: decompressed size exceeds limit")

// Decompressor undoes Compressor, for any codec. The producer decompresses
// only to split a batch the broker refused as too large (Builder.Records);
// this also lets tests and fuzzers check what we send against independent
// decoders, and a decompression bomb or a malformed stream is an error,
// never a panic or an unbounded allocation. It is safe for concurrent use.
type Decompressor struct {
	limit int
	gz    freeList[*gzipDecoder]
	zstd  *zstd.Decoder
}

type gzipDecoder struct {
	r   gzip.Reader
	src bytes.Reader
}

// zstdMinBound is the smallest memory bound given to the zstd decoder. 8 MiB
// (window log 23) covers the windows zstd's streaming encoders pick at every
// non-"ultra" level (1..19); level 3, the Java default, uses 2 MiB.
const zstdMinBound = 8 << 20

// NewDecompressor returns a Decompressor that refuses to produce more than
// limit bytes from one records section.
func NewDecompressor(limit int) (*Decompressor, error) {
	// The zstd decoder also caps the window a frame may declare with
	// this bound, and a frame's window can exceed its content (a streaming
	// encoder such as Java's declares 2 MiB or more at level 3 whatever it
	// compresses), so a small limit alone would reject valid frames. The
	// decoder gets at least zstdMinBound; the limit proper is checked on
	// the output.
	zd, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(uint64(max(limit, zstdMinBound))),
	)
	if err != nil {
		return nil, err
	}
	return &Decompressor{
		limit: max(limit, 0),
		gz:    newFreeList[*gzipDecoder](runtime.GOMAXPROCS(0)),
		zstd:  zd,
	}, nil
}

// Close releases the zstd decoder's resources.
func (d *Decompressor) Close() { d.zstd.Close() }

// AppendDecompressed appends the decompressed form of src, compressed with
// codec c as Kafka frames it, to dst. On error dst is returned unextended.
func (d *Decompressor) AppendDecompressed(dst, src []byte, c Codec) ([]byte, error) {
	switch c {
	case None:
		if len(src) > d.limit {
			return dst, ErrDecompressLimit
		}
		return append(dst, src...), nil
	case Gzip:
		return d.appendGzip(dst, src)
	case Snappy:
		return appendSnappyDecoded(dst, src, d.limit)
	case LZ4:
		return appendLZ4Decoded(dst, src, d.limit)
	case Zstd:
		start := len(dst)
		out, err := d.zstd.DecodeAll(src, dst)
		if err != nil {
			if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return dst[:start], ErrDecompressLimit
			}
			return dst[:start], err
		}
		if len(out)-start > d.limit {
			return dst[:start], ErrDecompressLimit
		}
		return out, nil
	}
	return dst, fmt.Errorf("recbatch: unknown codec %d", int8(c))
}

func (d *Decompressor) appendGzip(dst, src []byte) ([]byte, error) {
	g := d.gz.get()
	if g == nil {
		g = new(gzipDecoder)
	}
	defer d.gz.put(g)
	g.src.Reset(src)
	defer g.src.Reset(nil) // don't pin src from the free list
	start := len(dst)
	// Java's GZIPInputStream reads concatenated members too; so does
	// gzip.Reader in its default multistream mode.
	if err := g.r.Reset(&g.src); err != nil {
		return dst, err
	}
	for {
		if len(dst)-start > d.limit {
			return dst[:start], ErrDecompressLimit
		}
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, max(512, len(dst)-start))
		}
		n, err := g.r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return dst[:start], err
		}
	}
	if len(dst)-start > d.limit {
		return dst[:start], ErrDecompressLimit
	}
	return dst, nil
}
