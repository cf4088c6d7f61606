// Package recbatch builds Kafka record batches (message format v2, magic 2)
// the way the Java client's MemoryRecordsBuilder does: records are encoded
// into the batch's buffer as they are sent, and the batch header, the record
// count and the CRC are written once, when the batch is sealed.
//
// Why incrementally: the producer's hot path is "append one record to the
// open batch of its partition". Encoding each record straight into a pooled
// []byte at Append time means the record's key, value and headers need not be
// kept (the caller may reuse them as soon as Append returns), the exact batch
// size is always known for the batch.size check, and sealing costs one pass
// over the records (CRC, plus compression if configured) instead of a second
// encoding pass. In steady state — buffers recycled through Reset — Append
// allocates nothing.
//
// Layout of a sealed batch (all integers big endian; see
// https://kafka.apache.org/documentation/#recordbatch):
//
//	offset  size  field
//	 0       8    baseOffset            (0: the broker assigns offsets)
//	 8       4    batchLength           (bytes after this field)
//	12       4    partitionLeaderEpoch  (-1 from producers)
//	16       1    magic                 (2)
//	17       4    crc                   (CRC-32C of bytes 21..end)
//	21       2    attributes
//	23       4    lastOffsetDelta
//	27       8    baseTimestamp
//	35       8    maxTimestamp
//	43       8    producerId
//	51       2    producerEpoch
//	53       4    baseSequence
//	57       4    recordCount
//	61       -    records (compressed as one blob if a codec is set)
//
// Because producerId, producerEpoch and baseSequence sit inside the CRC'd
// region but outside the (possibly compressed) records, SetProducerState can
// patch them into an already sealed batch and fix up the CRC without touching
// the records. That is what lets the idempotent producer seal a batch once and
// assign its sequence number when the batch is first drained, or bump the
// epoch (KIP-360) before a retry.
//
// Compression follows the Java client byte for byte where it matters to
// brokers and other clients: gzip is plain RFC 1952, snappy uses the xerial
// snappy-java stream framing (SnappyOutputStream, 32 KiB blocks), lz4 uses
// the LZ4 frame format with the flags Kafka's Lz4BlockOutputStream writes
// (64 KiB independent blocks, no checksums), and zstd is a standard zstd
// frame. The Decompressor is the inverse, for tests and fuzzing, and for
// Builder.Records (a batch split after MESSAGE_TOO_LARGE is read back from
// its own bytes); it is written to reject malformed input with an error,
// never a panic.
package recbatch
