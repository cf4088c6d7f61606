package recbatch

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"slices"
)

// HeaderSize is the size of the v2 batch header that precedes the records:
// baseOffset(8) batchLength(4) partitionLeaderEpoch(4) magic(1) crc(4)
// attributes(2) lastOffsetDelta(4) baseTimestamp(8) maxTimestamp(8)
// producerId(8) producerEpoch(2) baseSequence(4) recordCount(4).
const HeaderSize = 61

// Magic is the message format version this package writes.
const Magic = 2

// Producer state written when the producer has no idempotence, as the Java
// client's RecordBatch.NO_PRODUCER_ID / NO_PRODUCER_EPOCH / NO_SEQUENCE.
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
)

// Byte offsets of the header fields. Everything from offAttributes to the
// end of the batch is covered by the CRC.
const (
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
)

// Attribute bits. Bit 3 (timestamp type) stays 0 = CreateTime: a producer
// never writes LogAppendTime, the broker stamps that itself.
const (
	attrCodecMask     = 0x07
	attrTransactional = 0x10
	// attrControl (0x20) marks broker-written transaction markers; a
	// producer never sets it.
)

// compressionEstimateFactor pads the estimated compressed size the way the
// Java client's MemoryRecordsBuilder.COMPRESSION_RATE_ESTIMATION_FACTOR does,
// so that batches rarely overshoot batch.size once actually compressed.
const compressionEstimateFactor = 1.05

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrMalformedBatch is returned by SetProducerState when the bytes given are
// not a sealed v2 batch.
var ErrMalformedBatch = errors.New("recbatch: not a well-formed v2 record batch")

// Header is a record header. A nil Value is written as a null value (length
// -1), an empty non-nil Value as an empty one, as in the Java client.
//
// The public kprod package should declare its header type as an alias,
// type Header = recbatch.Header, so that a record's []Header can be passed to
// Append without a conversion (which would have to copy, i.e. allocate).
type Header struct {
	Key   string
	Value []byte
}

// SealOptions says how a batch is finished. The zero value seals an
// uncompressed batch of a producer without idempotence.
type SealOptions struct {
	// Compressor compresses the records section; nil means no
	// compression.
	Compressor *Compressor

	// Idempotent selects whether ProducerID, ProducerEpoch and
	// BaseSequence are written. When false, -1 is written for all three
	// (NoProducerID, NoProducerEpoch, NoSequence), which is what a broker
	// expects from a producer without enable.idempotence: with any other
	// producer id it would run its sequence checks on the batch. The
	// state can also be patched in later with SetProducerState.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32

	// Transactional sets attribute bit 4; only meaningful together with
	// a producer id.
	Transactional bool
}

// There is no partitionLeaderEpoch option: producers always write -1
// (RecordBatch.NO_PARTITION_LEADER_EPOCH in the Java client) and the leader
// overwrites it when it appends the batch to its log.

// Builder accumulates the records of one batch. It is the Go counterpart of
// the Java client's MemoryRecordsBuilder for magic v2.
//
// A Builder is not safe for concurrent use; the accumulator serialises
// appends to a partition's open batch anyway. The zero value is unusable
// until Reset.
//
// Ownership: the buffer passed to Reset (grown as needed by Append) holds the
// records and, once sealed, the batch itself, compressed or not: Seal
// compresses through the Compressor's scratch buffer and copies the result
// back over the records, so a sealed batch holds no memory beyond the
// buffer it was given. The bytes Seal returns stay valid until the next
// Reset or Release: keep the Builder with its batch until the broker has
// acknowledged it, then Release the buffer to its pool and Reset the
// Builder for a new batch.
type Builder struct {
	buf    []byte // header placeholder + records (compressed once sealed with a codec)
	sealed []byte // result of the last Seal; nil while open
	codec  Codec  // the codec buf's records are in: None until a compressing Seal
	rawLen int    // len(buf) before compression; meaningful when codec != None

	baseTs   int64
	maxTs    int64
	n        int32
	estimate float32 // expected compression ratio; 0 = uncompressed
}

// Reset starts a new batch in buf, which should come from a pool: its
// contents are ignored, its capacity reused (Append grows it if a record
// does not fit). firstTimestampMs becomes the batch's baseTimestamp, against
// which every record's timestamp delta is taken; pass the timestamp of the
// record that opens the batch, as the Java client does.
func (b *Builder) Reset(buf []byte, firstTimestampMs int64) {
	if cap(buf) < HeaderSize {
		buf = make([]byte, HeaderSize)
	}
	b.buf = buf[:HeaderSize]
	b.sealed = nil
	b.codec, b.rawLen = None, 0
	b.baseTs = firstTimestampMs
	b.maxTs = firstTimestampMs
	b.n = 0
	b.estimate = 0
}

// Release hands back the records buffer (length 0, possibly grown since
// Reset) so that it can be returned to its pool, and drops the Builder's
// reference to it. The sealed bytes live in that buffer, so release only
// once the batch is done with.
func (b *Builder) Release() []byte {
	buf := b.buf[:0]
	b.buf = nil
	b.sealed = nil
	b.codec, b.rawLen = None, 0
	return buf
}

// SetCompressionEstimate tells the size estimate (Size, TryAppend, IsFull)
// to expect the records to shrink to ratio of their uncompressed size when
// sealed, as the Java client's CompressionRatioEstimator does per topic. A
// ratio <= 0 (the default after Reset) means no compression: the estimate is
// then the exact uncompressed size.
func (b *Builder) SetCompressionEstimate(ratio float32) { b.estimate = ratio }

// NumRecords is the number of records appended since Reset.
func (b *Builder) NumRecords() int { return int(b.n) }

// FirstTimestamp is the batch's baseTimestamp, as given to Reset.
func (b *Builder) FirstTimestamp() int64 { return b.baseTs }

// MaxTimestamp is the largest record timestamp appended so far (the
// baseTimestamp while the batch is empty).
func (b *Builder) MaxTimestamp() int64 { return b.maxTs }

// UncompressedSize is the exact size of the batch if sealed without
// compression: HeaderSize plus the encoded records. It stays so after a
// compressing Seal.
func (b *Builder) UncompressedSize() int {
	if b.codec != None {
		return b.rawLen
	}
	return len(b.buf)
}

// Size is the batch's size on the wire: exact once sealed; before that the
// uncompressed size, or with a compression estimate set, the header plus
// the records scaled by that estimate (Java's estimatedSizeInBytes).
func (b *Builder) Size() int {
	if b.sealed != nil {
		return len(b.sealed)
	}
	return b.estimatedSize()
}

func (b *Builder) estimatedSize() int {
	if b.estimate <= 0 {
		return len(b.buf)
	}
	records := float32(len(b.buf)-HeaderSize) * b.estimate * compressionEstimateFactor
	return HeaderSize + int(records)
}

// RecordsCapacity is how large a records buffer (header included) a batch
// needs so that, with the compression estimate ratio, TryAppend reaches
// limit before the buffer is full: the uncompressed bytes that are
// estimated to compress to limit, plus capacitySlack for the estimate's
// rounding. ratio <= 0, or too close to 1 to matter, needs limit.
func RecordsCapacity(limit int, ratio float32) int {
	if ratio <= 0 || limit <= HeaderSize {
		return limit
	}
	need := HeaderSize + int(math.Ceil(float64(limit-HeaderSize)/float64(ratio*compressionEstimateFactor))) + capacitySlack
	return max(need, limit)
}

// EstimateForCapacity is the smallest compression estimate with which a
// batch of limit bytes fits in a records buffer of capacity bytes (the
// inverse of RecordsCapacity): for a buffer smaller than RecordsCapacity
// asks, the estimate to use instead, so that appends stop before the
// buffer would have to grow.
func EstimateForCapacity(limit, capacity int) float32 {
	room := capacity - HeaderSize - capacitySlack - 1 // - 1: float rounding
	if room <= 0 || limit <= HeaderSize {
		return 1
	}
	return float32(limit-HeaderSize) / (float32(room) * compressionEstimateFactor)
}

// capacitySlack covers estimatedSize's rounding down: with an estimate
// of r, a batch may hold up to 1/(r × 1.05) bytes more than the estimate
// says, 16 bytes at the smallest estimate the accumulator uses.
const capacitySlack = 64

// CompressionRatio is, after Seal, the size of the sealed records section
// divided by its uncompressed size: what the Java client feeds back into its
// per-topic compression ratio estimate. It is 1 for an uncompressed or empty
// batch and before Seal.
func (b *Builder) CompressionRatio() float32 {
	raw := b.UncompressedSize() - HeaderSize
	if b.sealed == nil || raw <= 0 {
		return 1
	}
	return float32(len(b.sealed)-HeaderSize) / float32(raw)
}

// Sealed returns what the last Seal returned, or nil if the batch is open.
func (b *Builder) Sealed() []byte { return b.sealed }

// RecordSize is the exact encoded size of one record, including its leading
// length varint. A nil key or value is encoded as null (length -1), a
// non-nil empty one as empty; likewise for header values.
func RecordSize(offsetDelta int32, tsDelta int64, key, value []byte, headers []Header) int {
	return RecordSizeFields(offsetDelta, tsDelta, FieldsSize(key, value, headers))
}

// RecordSizeFields is RecordSize for a record whose FieldsSize is fields.
func RecordSizeFields(offsetDelta int32, tsDelta int64, fields int) int {
	body := bodySize(offsetDelta, tsDelta, fields)
	return varintLen(int64(body)) + body
}

// FieldsSize is the encoded size of a record's key, value and headers,
// each with its length varint: the part of the record's size that does not
// depend on its place in a batch. A caller that needs the size of one
// record more than once (its memory, its batch, the Java client's upper
// bound) computes this once and passes it to RecordSizeFields and
// TryAppendSized.
func FieldsSize(key, value []byte, headers []Header) int {
	n := nullableBytesSize(key) + nullableBytesSize(value) + varintLen(int64(len(headers)))
	for i := range headers {
		h := &headers[i]
		n += varintLen(int64(len(h.Key))) + len(h.Key) + nullableBytesSize(h.Value)
	}
	return n
}

// bodySize is a record's size after its length varint.
func bodySize(offsetDelta int32, tsDelta int64, fields int) int {
	return 1 + // attributes, unused and always 0
		varintLen(tsDelta) +
		varintLen(int64(offsetDelta)) +
		fields
}

func nullableBytesSize(p []byte) int {
	if p == nil {
		return 1 // varint(-1)
	}
	return varintLen(int64(len(p))) + len(p)
}

func putNullableBytes(dst, p []byte) int {
	if p == nil {
		return putVarint(dst, -1)
	}
	i := putVarint(dst, int64(len(p)))
	return i + copy(dst[i:], p)
}

// IsFull reports whether the batch has reached limit bytes and should be
// sent (Java's MemoryRecordsBuilder.isFull). A sealed batch is full.
func (b *Builder) IsFull(limit int) bool {
	return b.sealed != nil || (b.n > 0 && limit <= b.estimatedSize())
}

// Append encodes one record at the end of the batch and returns its offset
// delta (its index in the batch). key, value and headers are copied, so the
// caller may reuse them once Append returns. Append never fails: when the
// buffer is too small it grows it (callers bound batch sizes beforehand with
// TryAppend / RecordSize). Timestamps are not validated here; a timestamp
// before baseTimestamp gives a negative delta, which the format allows.
//
// Appending to a sealed batch is a bug in the caller and panics.
func (b *Builder) Append(tsMs int64, key, value []byte, headers []Header) (offsetDelta int32) {
	if b.sealed != nil {
		panic("recbatch: Append to a sealed batch")
	}
	tsDelta := tsMs - b.baseTs
	body := bodySize(b.n, tsDelta, FieldsSize(key, value, headers))
	return b.append(tsMs, tsDelta, body, key, value, headers)
}

// TryAppend appends the record and returns true if it fits under limit
// bytes (batch.size), else leaves the batch as it is and returns false. The
// rule is the Java client's: an empty batch always takes its first record,
// whatever its size, so that a record larger than batch.size still gets a
// batch of its own; otherwise the record fits if the estimated size plus
// the record's exact size stays within limit (like Java, the new record is
// not assumed to compress). A sealed batch takes nothing.
func (b *Builder) TryAppend(tsMs int64, key, value []byte, headers []Header, limit int) bool {
	return b.TryAppendSized(tsMs, key, value, headers, FieldsSize(key, value, headers), limit)
}

// TryAppendSized is TryAppend for a record whose FieldsSize the caller
// has already computed: fields must be FieldsSize(key, value, headers),
// or the batch is written wrong.
func (b *Builder) TryAppendSized(tsMs int64, key, value []byte, headers []Header, fields, limit int) bool {
	if b.sealed != nil {
		return false
	}
	tsDelta := tsMs - b.baseTs
	body := bodySize(b.n, tsDelta, fields)
	if b.n > 0 && limit < b.estimatedSize()+varintLen(int64(body))+body {
		return false
	}
	b.append(tsMs, tsDelta, body, key, value, headers)
	return true
}

// writeAhead is how far past the record just written append prefetches
// the batch buffer for writing (prefetchWrite): a few 100-byte records
// ahead, so that the lines are there when the copy reaches them. 256, 384,
// 512 and 1024 measured the same (BENCHMARKS.md, "What was tried").
const writeAhead = 512

func (b *Builder) append(tsMs, tsDelta int64, body int, key, value []byte, headers []Header) (offsetDelta int32) {
	offsetDelta = b.n
	if offsetDelta == 0 || tsMs > b.maxTs {
		b.maxTs = tsMs
	}
	total := varintLen(int64(body)) + body

	at := len(b.buf)
	if cap(b.buf)-at < total {
		b.buf = slices.Grow(b.buf, total)
	}
	b.buf = b.buf[:at+total]
	p := b.buf[at:]

	i := putVarint(p, int64(body))
	p[i] = 0 // attributes
	i++
	i += putVarint(p[i:], tsDelta)
	i += putVarint(p[i:], int64(offsetDelta))
	i += putNullableBytes(p[i:], key)
	i += putNullableBytes(p[i:], value)
	i += putVarint(p[i:], int64(len(headers)))
	for hi := range headers {
		h := &headers[hi]
		i += putVarint(p[i:], int64(len(h.Key)))
		i += copy(p[i:], h.Key)
		i += putNullableBytes(p[i:], h.Value)
	}
	if ahead := at + total + writeAhead; ahead+128 <= cap(b.buf) {
		prefetchWrite(b.buf, ahead)
	}
	b.n++
	return offsetDelta
}

// Seal finishes the batch and returns its wire bytes, baseOffset 0: the
// records section is compressed with opts.Compressor if one is given, the
// header is written, and the CRC-32C is computed over attributes..end.
//
// The returned slice aliases the Builder's buffer (see Builder) and stays
// valid until the next Reset or Release. The records are compressed at
// most once: after a compressing Seal they are kept compressed only, and
// sealing again re-encodes just the header (producer state, transactional
// flag) around them, in that codec whatever opts.Compressor says now. Should a
// compressor ever fail, the batch is sealed uncompressed instead, which
// every broker accepts, rather than failing the records.
//
// An empty batch seals to a header-only batch with lastOffsetDelta -1; brokers
// reject those, so callers do not send them.
func (b *Builder) Seal(opts SealOptions) []byte {
	if c := opts.Compressor; c != nil && c.codec != None && b.codec == None {
		b.compress(c)
	}
	out, codec := b.buf, b.codec

	attrs := uint16(codec) & attrCodecMask
	if opts.Transactional {
		attrs |= attrTransactional
	}
	pid, epoch, seq := NoProducerID, NoProducerEpoch, NoSequence
	if opts.Idempotent {
		pid, epoch, seq = opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence
	}

	be := binary.BigEndian
	be.PutUint64(out[0:], 0) // baseOffset: assigned by the broker
	be.PutUint32(out[offLength:], uint32(len(out)-offLeaderEpoch))
	be.PutUint32(out[offLeaderEpoch:], 0xffffffff) // -1
	out[offMagic] = Magic
	be.PutUint16(out[offAttributes:], attrs)
	be.PutUint32(out[offLastOffsetDelta:], uint32(b.n-1))
	be.PutUint64(out[offBaseTimestamp:], uint64(b.baseTs))
	be.PutUint64(out[offMaxTimestamp:], uint64(b.maxTs))
	be.PutUint64(out[offProducerID:], uint64(pid))
	be.PutUint16(out[offProducerEpoch:], uint16(epoch))
	be.PutUint32(out[offBaseSequence:], uint32(seq))
	be.PutUint32(out[offRecordCount:], uint32(b.n))
	be.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	b.sealed = out
	return out
}

// compress replaces the records in b.buf by their compression with c. The
// Compressor lends a scratch buffer large enough for any encoder's worst
// case, so that no encoder grows (re-allocates, and the runtime re-zeroes)
// its output half-way through a batch; the result is copied back over the
// records, which fits unless the records did not compress at all (then
// b.buf grows). A failed compressor leaves the records uncompressed.
func (b *Builder) compress(c *Compressor) {
	raw := b.buf[HeaderSize:]
	scratch := c.scratch.get()
	if cap(scratch) < c.maxCompressedLen(len(raw)) {
		// Sized for the largest batch the records buffer can hold,
		// so that a later, fuller batch does not grow it.
		scratch = make([]byte, 0, c.maxCompressedLen(max(len(raw), cap(b.buf)-HeaderSize)))
	}
	o, err := c.AppendCompressed(scratch[:0], raw)
	if err == nil {
		b.rawLen = len(b.buf)
		b.buf = append(b.buf[:HeaderSize], o...)
		b.codec = c.codec
	}
	c.scratch.put(o[:0])
}

// SetProducerState rewrites producerId, producerEpoch and baseSequence of a
// sealed batch in place and recomputes its CRC. The records, compressed or
// not, are untouched: these fields live in the header, which is why the
// idempotent producer can seal early and assign sequences at drain time, or
// move a batch to a bumped epoch (KIP-360) before retrying it.
//
// It returns ErrMalformedBatch if batch is not a complete v2 batch.
func SetProducerState(batch []byte, producerID int64, producerEpoch int16, baseSequence int32) error {
	if len(batch) < HeaderSize || batch[offMagic] != Magic ||
		int(binary.BigEndian.Uint32(batch[offLength:])) != len(batch)-offLeaderEpoch {
		return ErrMalformedBatch
	}
	be := binary.BigEndian
	be.PutUint64(batch[offProducerID:], uint64(producerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(producerEpoch))
	be.PutUint32(batch[offBaseSequence:], uint32(baseSequence))
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
	return nil
}
