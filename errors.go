package kprod

import "github.com/kprod/kprod/kerr"

// The errors a producer returns or passes to callbacks wrap one of these
// sentinels (or a *kerr.BrokerError); test with errors.Is. Package kerr
// has the complete set and the broker error codes.
var (
	// ErrClosed: Send during or after Close (a record Close found still
	// being buffered is refused), or a record failed because the producer
	// closed while it waited for memory or metadata.
	ErrClosed = kerr.ErrClosed
	// ErrInvalidConfig: a bad configuration value; the message names the
	// Java property and what is allowed. errors.As gives a *ConfigError
	// for every bad name or value (not for a properties file that cannot
	// be read, or a malformed escape in a property's name).
	ErrInvalidConfig = kerr.ErrInvalidConfig
	// ErrRecordTooLarge: the record is larger than max.request.size or
	// buffer.memory, or than the topic's max.message.bytes (the broker's
	// MESSAGE_TOO_LARGE, for a record alone in its batch); only that
	// record fails, unless, with idempotence, its batch may have been
	// written by an earlier attempt and so could not be split
	// (docs/guarantees.md): then all of the batch fails.
	ErrRecordTooLarge = kerr.ErrRecordTooLarge
	// ErrBufferFull: buffer.memory stayed full for max.block.ms, or had no
	// room at once for a Send from a callback, which cannot wait.
	// Retriable (kerr.IsRetriable), but not from inside the callback
	// that got it: memory frees only as batches complete, which the
	// callback holds up; send again after it returns.
	ErrBufferFull = kerr.ErrBufferFull
	// ErrDeliveryTimeout: not acknowledged within delivery.timeout.ms.
	ErrDeliveryTimeout = kerr.ErrDeliveryTimeout
	// ErrUnknownTopic: the topic did not appear within max.block.ms.
	ErrUnknownTopic = kerr.ErrUnknownTopic
	// ErrUnknownPartition: the record names a partition that does not
	// exist (within max.block.ms: then it wraps ErrMetadataTimeout too,
	// and kerr.IsRetriable says so), or a Partitioner picked one.
	ErrUnknownPartition = kerr.ErrUnknownPartition
	// ErrInvalidRecord: the record is malformed (e.g. empty topic).
	ErrInvalidRecord = kerr.ErrInvalidRecord
	// ErrSerialization: a TypedProducer's key or value serializer
	// failed; only that record fails. errors.As gives a
	// *SerializationError.
	ErrSerialization = kerr.ErrSerialization
	// ErrAborted: the record was still buffered or in flight when Close's
	// context ended, or when Close was called from a callback (which
	// cannot wait for deliveries); it may or may not have been written.
	ErrAborted = kerr.ErrAborted
	// ErrBatchRejected: the record was valid, but the broker refused its
	// batch for another record of it (whose callback gets the broker's
	// error, e.g. INVALID_RECORD with its message); send it again
	// (kerr.IsRetriable says so).
	ErrBatchRejected = kerr.ErrBatchRejected
	// ErrInCallback: Flush, SendSync, CommitTransaction or
	// AbortTransaction was called from a callback, which runs on the
	// goroutine that delivers records; call it from another goroutine.
	// (Close from a callback closes without waiting, as Java's close(0).)
	ErrInCallback = kerr.ErrInCallback
	// ErrRequestTimeout: a request got no response within
	// request.timeout.ms (retried while delivery.timeout.ms allows).
	ErrRequestTimeout = kerr.ErrRequestTimeout
	// ErrConnectionLost: a connection broke with requests in flight
	// (retried while delivery.timeout.ms allows).
	ErrConnectionLost = kerr.ErrConnectionLost
	// ErrMetadataTimeout: Send waited max.block.ms for the topic's
	// metadata and no broker answered (is bootstrap.servers right, and
	// the cluster reachable?). A topic the cluster does not have is
	// ErrUnknownTopic instead. It is also wrapped by ErrUnknownPartition
	// when brokers answered but the topic did not grow to the record's
	// partition in time.
	ErrMetadataTimeout = kerr.ErrMetadataTimeout
	// ErrDial: a connection to a broker could not be set up (refused,
	// unreachable, or slower than socket.connection.setup.timeout.ms);
	// retried. It is the last error that ErrMetadataTimeout names.
	ErrDial = kerr.ErrDial
	// ErrUnsupportedVersion: the broker supports no version of a request
	// that kprod implements: the broker is too old for kprod.
	ErrUnsupportedVersion = kerr.ErrUnsupportedVersion
	// ErrFatal: the producer cannot go on (fenced, refused a producer
	// id, ...); close it.
	ErrFatal = kerr.ErrFatal
	// ErrTransactionState: a transactional method (or Send on a
	// transactional producer) was called in the wrong state, e.g. Send
	// outside BeginTransaction ... CommitTransaction. A caller error.
	ErrTransactionState = kerr.ErrTransactionState
	// ErrTransactionAbortable: the transaction cannot be committed;
	// call AbortTransaction, then begin a new one.
	ErrTransactionAbortable = kerr.ErrTransactionAbortable
	// ErrTransactionAborted: the record's transaction was aborted
	// before the record was acknowledged; it was not committed (if it
	// was sent, it may be in the log as part of the aborted transaction).
	ErrTransactionAborted = kerr.ErrTransactionAborted
	// ErrProducerFenced: a newer producer with the same
	// transactional.id took over; fatal (it also wraps ErrFatal).
	ErrProducerFenced = kerr.ErrProducerFenced
	// ErrTransactionTimeout: InitTransactions, CommitTransaction or
	// AbortTransaction ran out of its ctx or max.block.ms before the
	// coordinator answered, or while it waited for the transaction's
	// records; the outcome is not known: call it again. (Also
	// SendOffsetsToTransaction cut short while it waited for the call
	// before it: its offsets were not sent.)
	ErrTransactionTimeout = kerr.ErrTransactionTimeout
)
