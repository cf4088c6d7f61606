package recbatch

import (
	"fmt"
	"runtime"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kprod/kprod/kerr"
)

// Codec is a batch compression codec, numbered as in the low three bits of
// the batch attributes.
type Codec int8

// The codecs Kafka defines.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

// String returns the codec's name as in compression.type.
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// ParseCodec parses a compression.type value. Like the Java client's
// validator it accepts exactly the lower-case names none, gzip, snappy, lz4
// and zstd.
func ParseCodec(s string) (Codec, error) {
	switch s {
	case "none":
		return None, nil
	case "gzip":
		return Gzip, nil
	case "snappy":
		return Snappy, nil
	case "lz4":
		return LZ4, nil
	case "zstd":
		return Zstd, nil
	}
	return None, fmt.Errorf("%w: compression.type %q: must be one of none, gzip, snappy, lz4, zstd", kerr.ErrInvalidConfig, s)
}

// Compression levels as the Java client defines them (KIP-390,
// compression.gzip.level, compression.lz4.level, compression.zstd.level).
const (
	// GzipDefaultLevel is java.util.zip.Deflater.DEFAULT_COMPRESSION,
	// which zlib (and so Java) runs as level 6.
	GzipDefaultLevel = -1
	GzipMinLevel     = 1
	GzipMaxLevel     = 9

	LZ4DefaultLevel = 9
	LZ4MinLevel     = 1
	LZ4MaxLevel     = 17

	ZstdDefaultLevel = 3
	ZstdMinLevel     = -131072 // Zstd.minCompressionLevel(): -(1<<17)
	ZstdMaxLevel     = 22
)

// DefaultLevel is the Java client's default level for c (0 for codecs that
// have no level).
func DefaultLevel(c Codec) int {
	switch c {
	case Gzip:
		return GzipDefaultLevel
	case LZ4:
		return LZ4DefaultLevel
	case Zstd:
		return ZstdDefaultLevel
	}
	return 0
}

// ValidateLevel checks level against the range the Java client accepts for
// c; codecs without a level accept anything. The error wraps
// kerr.ErrInvalidConfig and names the property.
func ValidateLevel(c Codec, level int) error {
	switch c {
	case Gzip:
		if (level < GzipMinLevel || level > GzipMaxLevel) && level != GzipDefaultLevel {
			return fmt.Errorf("%w: compression.gzip.level %d: must be %d..%d or %d (default)",
				kerr.ErrInvalidConfig, level, GzipMinLevel, GzipMaxLevel, GzipDefaultLevel)
		}
	case LZ4:
		if level < LZ4MinLevel || level > LZ4MaxLevel {
			return fmt.Errorf("%w: compression.lz4.level %d: must be %d..%d",
				kerr.ErrInvalidConfig, level, LZ4MinLevel, LZ4MaxLevel)
		}
	case Zstd:
		if level < ZstdMinLevel || level > ZstdMaxLevel {
			return fmt.Errorf("%w: compression.zstd.level %d: must be %d..%d",
				kerr.ErrInvalidConfig, level, ZstdMinLevel, ZstdMaxLevel)
		}
	case None, Snappy:
	default:
		return fmt.Errorf("%w: unknown compression codec %d", kerr.ErrInvalidConfig, int8(c))
	}
	return nil
}

// Compressor compresses records sections with one codec at one level. Build
// one per producer (per codec) and share it: it is safe for concurrent use.
// The per-codec encoder state is kept on a free list rather than rebuilt per
// batch — a zstd or lz4-HC encoder carries hundreds of KiB of tables — so in
// steady state compressing allocates nothing.
type Compressor struct {
	codec Codec
	level int

	gz   freeList[*gzipEncoder]
	lz   freeList[*lz4Encoder]
	zstd freeList[*zstd.Encoder]

	// scratch holds compression output buffers that Builder.Seal lends
	// and copies back from; like the encoders, kept across batches.
	scratch freeList[[]byte]

	gzLevel int                  // klauspost flate level
	lzDepth lz4.CompressionLevel // 0: fast compressor; else HC search depth
	zOpts   []zstd.EOption
}

// NewCompressor returns a Compressor for codec c at level (Java semantics,
// see ValidateLevel; DefaultLevel gives the Java default). For None it
// returns a Compressor that Seal treats as no compression.
func NewCompressor(c Codec, level int) (*Compressor, error) {
	if err := ValidateLevel(c, level); err != nil {
		return nil, err
	}
	// Enough idle encoders for every P to be compressing at once; more
	// concurrent sealers than that just allocate a transient one.
	n := runtime.GOMAXPROCS(0)
	comp := &Compressor{
		codec: c,
		level: level,
		gz:    newFreeList[*gzipEncoder](n),
		lz:    newFreeList[*lz4Encoder](n),
		zstd:  newFreeList[*zstd.Encoder](n),

		scratch: newFreeList[[]byte](n),
	}
	switch c {
	case Gzip:
		comp.gzLevel = level
		if level == GzipDefaultLevel {
			// klauspost's flate would run its own default (5);
			// Java's Deflater default is zlib's 6.
			comp.gzLevel = 6
		}
		if _, err := gzip.NewWriterLevel(nil, comp.gzLevel); err != nil {
			return nil, fmt.Errorf("%w: compression.gzip.level %d: %v", kerr.ErrInvalidConfig, level, err)
		}
	case LZ4:
		comp.lzDepth = lz4Depth(level)
	case Zstd:
		zl := level
		if zl == 0 {
			zl = ZstdDefaultLevel // zstd's level 0 means "default"
		}
		comp.zOpts = []zstd.EOption{
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(zl)),
			// EncodeAll is all we use; one goroutine per call.
			zstd.WithEncoderConcurrency(1),
			// The batch CRC already covers the compressed bytes.
			zstd.WithEncoderCRC(false),
			// An empty input still yields a valid frame.
			zstd.WithZeroFrames(true),
		}
		enc, err := zstd.NewWriter(nil, comp.zOpts...)
		if err != nil {
			return nil, fmt.Errorf("%w: compression.zstd.level %d: %v", kerr.ErrInvalidConfig, level, err)
		}
		comp.zstd.put(enc)
	}
	return comp, nil
}

// Codec is the codec this Compressor writes.
func (c *Compressor) Codec() Codec { return c.codec }

// Level is the level this Compressor was built with, as given.
func (c *Compressor) Level() int { return c.level }

// AppendCompressed appends src, compressed in the Kafka wire format of the
// codec, to dst and returns the extended slice. For None it appends src as
// is. It grows dst only when dst lacks capacity, so a caller that reuses dst
// allocates nothing in steady state. Errors are not expected from any codec
// (all write to memory) but are reported rather than hidden.
func (c *Compressor) AppendCompressed(dst, src []byte) ([]byte, error) {
	switch c.codec {
	case None:
		return append(dst, src...), nil
	case Gzip:
		e := c.gz.get()
		if e == nil {
			w, err := gzip.NewWriterLevel(nil, c.gzLevel)
			if err != nil {
				return dst, err
			}
			e = &gzipEncoder{w: w}
		}
		out, err := e.appendCompressed(dst, src)
		c.gz.put(e)
		return out, err
	case Snappy:
		return appendXerial(dst, src), nil
	case LZ4:
		e := c.lz.get()
		if e == nil {
			e = new(lz4Encoder)
		}
		out, err := e.appendFrame(dst, src, c.lzDepth)
		c.lz.put(e)
		return out, err
	case Zstd:
		e := c.zstd.get()
		if e == nil {
			var err error
			if e, err = zstd.NewWriter(nil, c.zOpts...); err != nil {
				return dst, err
			}
		}
		out := e.EncodeAll(src, dst)
		c.zstd.put(e)
		return out, nil
	}
	return dst, fmt.Errorf("recbatch: unknown codec %d", int8(c.codec))
}

// maxCompressedLen is the room AppendCompressed needs after dst's length
// for n bytes of input so that it does not grow dst: exact for lz4 and
// snappy, whose encoders make room for a block's worst case before
// compressing it; for gzip and zstd the worst case of storing the input
// (deflate's stored blocks, zstd's raw blocks) with ample room for their
// headers, which their encoders fall back to rather than expand the data.
// Seal sizes its scratch buffers with it, so that the
// encoders never re-allocate (and re-copy, and the runtime re-zero) the
// buffer half-way through a batch.
// BatchBound is the largest a batch of size bytes (header included) can
// be once sealed with c's codec: the buffer it needs so that Seal never
// has to move it. nil (no compression) is size.
func (c *Compressor) BatchBound(size int) int {
	if c == nil || size <= HeaderSize {
		return size
	}
	return HeaderSize + c.maxCompressedLen(size-HeaderSize)
}

func (c *Compressor) maxCompressedLen(n int) int {
	switch c.codec {
	case Gzip:
		// 10-byte header, 8-byte trailer, 5 bytes per stored block of
		// at most 64 KiB (klauspost's encoders may cut blocks smaller:
		// allow one per 1 KiB), and an end-of-stream block.
		return n + n>>10 + 64
	case Snappy:
		return xerialBound(n)
	case LZ4:
		return lz4FrameBound(n)
	case Zstd:
		// Frame header (at most 18 bytes), 3 bytes per raw block of at
		// most 128 KiB (allow one per 1 KiB), no checksum.
		return n + n>>10 + 64
	}
	return n
}

// gzipEncoder pairs a reusable gzip.Writer with the sink it writes to, so
// that neither is allocated per batch.
type gzipEncoder struct {
	w    *gzip.Writer
	sink appendWriter
}

func (e *gzipEncoder) appendCompressed(dst, src []byte) ([]byte, error) {
	e.sink.b = dst
	e.w.Reset(&e.sink)
	_, err := e.w.Write(src)
	if cerr := e.w.Close(); err == nil {
		err = cerr
	}
	out := e.sink.b
	e.sink.b = nil // don't pin the caller's buffer from the free list
	return out, err
}

// appendWriter is an io.Writer that appends to a byte slice.
type appendWriter struct{ b []byte }

func (a *appendWriter) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// freeList is a bounded stack of reusable values. Unlike sync.Pool it is not
// emptied by the garbage collector, so large encoders survive GC cycles
// instead of being rebuilt every other cycle under load.
type freeList[T any] struct{ ch chan T }

func newFreeList[T any](n int) freeList[T] {
	return freeList[T]{ch: make(chan T, max(n, 1))}
}

// get returns an idle value, or the zero value if there is none.
func (f freeList[T]) get() T {
	select {
	case v := <-f.ch:
		return v
	default:
		var zero T
		return zero
	}
}

// put keeps v for reuse, or drops it if the list is full.
func (f freeList[T]) put(v T) {
	select {
	case f.ch <- v:
	default:
	}
}
