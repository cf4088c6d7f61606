package kprod

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/kprod/kprod/internal/recbatch"
	"github.com/kprod/kprod/kerr"
)

// Serializer turns a key or value of type T into the bytes of a record, as
// the Java client's org.apache.kafka.common.serialization.Serializer does.
// A nil result is a null key or value (Kafka keeps null apart from empty).
// Serialize is called on the goroutine that sends, concurrently from any
// number of goroutines. An error fails only that record, with a
// *SerializationError.
type Serializer[T any] interface {
	Serialize(topic string, v T) ([]byte, error)
}

// SerializerFunc adapts a function to the Serializer interface.
type SerializerFunc[T any] func(topic string, v T) ([]byte, error)

// Serialize calls f.
func (f SerializerFunc[T]) Serialize(topic string, v T) ([]byte, error) { return f(topic, v) }

// StringSerializer writes a string's bytes, which for Go strings holding
// UTF-8 is what Java's StringSerializer writes (its default encoding is
// UTF-8). An empty string is an empty, not a null, key or value; use
// Nullable(StringSerializer{}) with *string for nulls.
type StringSerializer struct{}

// Serialize returns []byte(v).
func (StringSerializer) Serialize(_ string, v string) ([]byte, error) { return []byte(v), nil }

// BytesSerializer passes bytes through (Java's ByteArraySerializer): nil is
// null. The slice is not copied, so it must not change until the record's
// callback has run.
type BytesSerializer struct{}

// Serialize returns v.
func (BytesSerializer) Serialize(_ string, v []byte) ([]byte, error) { return v, nil }

// Int16Serializer writes 2 bytes, big-endian, as Java's ShortSerializer.
type Int16Serializer struct{}

// Serialize encodes v.
func (Int16Serializer) Serialize(_ string, v int16) ([]byte, error) {
	return binary.BigEndian.AppendUint16(nil, uint16(v)), nil
}

// Int32Serializer writes 4 bytes, big-endian, as Java's
// IntegerSerializer.
type Int32Serializer struct{}

// Serialize encodes v.
func (Int32Serializer) Serialize(_ string, v int32) ([]byte, error) {
	return binary.BigEndian.AppendUint32(nil, uint32(v)), nil
}

// Int64Serializer writes 8 bytes, big-endian, as Java's LongSerializer.
type Int64Serializer struct{}

// Serialize encodes v.
func (Int64Serializer) Serialize(_ string, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(v)), nil
}

// Float32Serializer writes the IEEE 754 bits in 4 bytes, big-endian, as
// Java's FloatSerializer (floatToRawIntBits).
type Float32Serializer struct{}

// Serialize encodes v.
func (Float32Serializer) Serialize(_ string, v float32) ([]byte, error) {
	return binary.BigEndian.AppendUint32(nil, math.Float32bits(v)), nil
}

// Float64Serializer writes the IEEE 754 bits in 8 bytes, big-endian, as
// Java's DoubleSerializer (doubleToRawLongBits).
type Float64Serializer struct{}

// Serialize encodes v.
func (Float64Serializer) Serialize(_ string, v float64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, math.Float64bits(v)), nil
}

// JSONSerializer encodes values with encoding/json, without its escaping
// of <, > and & (as Jackson, behind the Java JSON serializers, writes
// them). For structs of strings, integers and booleans, and slices of
// them, whose JSON field names are the Java properties' and whose strings
// hold no control characters other than \b \t \n \f \r (Go writes
// the others in lower-case hex), the bytes are Jackson's, so such a JSON
// key hashes to the
// partition a Java producer would pick. Elsewhere they may differ: Go
// sorts map keys (Jackson keeps insertion order), writes 1.0 as 1 and
// escapes U+2028 and U+2029; co-partitioning with Java on such keys needs
// a serializer that writes Jackson's bytes. A value that encodes as JSON
// null (a nil pointer, map, slice or interface) becomes a null key or
// value, as Java JSON serializers return null for null; on a compacted
// topic a null value is a tombstone.
type JSONSerializer[T any] struct{}

// Serialize encodes v as JSON.
func (JSONSerializer[T]) Serialize(_ string, v T) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n")) // Encode ends with a newline
	if bytes.Equal(b, []byte("null")) {
		return nil, nil
	}
	return b, nil
}

// Nullable makes a serializer of *T from one of T: a nil pointer is a null
// key or value, anything else is s's encoding of the pointed-to value.
// Java serializers take null for every type; in Go, use Nullable where a
// key or value may be null, e.g. Nullable[string](StringSerializer{}).
func Nullable[T any](s Serializer[T]) Serializer[*T] {
	return SerializerFunc[*T](func(topic string, v *T) ([]byte, error) {
		if v == nil {
			return nil, nil
		}
		return s.Serialize(topic, *v)
	})
}

// SerializationError is a key or value a TypedProducer's serializer could
// not encode (Java's SerializationException). It wraps ErrSerialization
// and the serializer's own error, so errors.Is works with both.
type SerializationError struct {
	Topic string
	Key   bool  // the key failed; false: the value
	Err   error // the serializer's error, or a panic turned into one
}

func (e *SerializationError) Error() string {
	side := "value"
	if e.Key {
		side = "key"
	}
	return fmt.Sprintf("%v: the %s of a record for %q: %v", kerr.ErrSerialization, side, e.Topic, e.Err)
}

// Unwrap returns ErrSerialization and the serializer's error.
func (e *SerializationError) Unwrap() []error { return []error{kerr.ErrSerialization, e.Err} }

// TypedRecord is a record whose key and value are Go values, encoded by a
// TypedProducer's serializers (Java's ProducerRecord<K, V>). The fields
// mean what Record's do; on success Partition, Offset, Timestamp and
// LeaderEpoch are filled in before the callback runs. Key and Value are
// serialized during Send; the headers must not change until the callback.
type TypedRecord[K, V any] struct {
	Topic     string
	Key       K
	Value     V
	Headers   []Header
	Timestamp time.Time

	Partition    int32
	PartitionSet bool

	Offset      int64
	LeaderEpoch int32
}

// ToPartition sets an explicit partition for the record and returns it.
func (r *TypedRecord[K, V]) ToPartition(p int32) *TypedRecord[K, V] {
	r.Partition = p
	r.PartitionSet = true
	return r
}

// TypedProducer sends TypedRecords through a Producer, serializing keys
// and values with the serializers it was made with (Java:
// KafkaProducer<K, V> with key.serializer and value.serializer). Many
// TypedProducers of different types may share one Producer; Flush and
// Close that Producer (see Producer()).
//
// The order of work is: serialize the key, then the value, then what
// Producer.Send does (interceptors, partitioner, buffering). So
// Config.Interceptors see serialized records; a record that fails to
// serialize is counted in record-error-total, reported to their
// OnAcknowledgement and then to its callback, and nothing else happens
// to it.
type TypedProducer[K, V any] struct {
	p     *Producer
	key   Serializer[K]
	value Serializer[V]
}

// NewTypedProducer returns a TypedProducer sending through p.
func NewTypedProducer[K, V any](p *Producer, key Serializer[K], value Serializer[V]) *TypedProducer[K, V] {
	return &TypedProducer[K, V]{p: p, key: key, value: value}
}

// Producer returns the Producer records are sent through.
func (tp *TypedProducer[K, V]) Producer() *Producer { return tp.p }

// Send serializes the record's key and value and sends it as
// Producer.Send does; cb (which may be nil) is called exactly once with r
// and its outcome. A serializer error or panic fails only this record,
// with a *SerializationError, on the caller's goroutine.
func (tp *TypedProducer[K, V]) Send(ctx context.Context, r *TypedRecord[K, V], cb func(*TypedRecord[K, V], error)) {
	silent := cb == nil // see Producer.Send: a transaction must not commit without it
	if silent {
		cb = func(*TypedRecord[K, V], error) {}
	}
	if r == nil {
		// silent as given: the wrapper is no caller that hears of it.
		tp.p.sendWith(ctx, nil, func(_ *Record, err error) { cb(nil, err) }, silent)
		return
	}
	rec := &Record{Topic: r.Topic, Headers: r.Headers, Timestamp: r.Timestamp, Partition: r.Partition, PartitionSet: r.PartitionSet}
	done := func(rec *Record, err error) {
		r.Partition, r.Offset, r.LeaderEpoch = rec.Partition, rec.Offset, rec.LeaderEpoch
		if err == nil {
			r.Timestamp = rec.Timestamp
		}
		cb(r, err)
	}
	if tp.p.closed.Load() {
		// Unserialized: a closed producer refuses the record with
		// ErrClosed, which record-error-total does not count, whatever
		// its serializers would have said (Java checks first too). The
		// interceptors, which see serialized records, get only its
		// outcome, as for a serializer's failure.
		tp.p.failUnsent(rec, &sendClosedError{topic: r.Topic}, done)
		return
	}
	var err error
	if rec.Key, err = serialize(tp.key, r.Topic, r.Key, true); err == nil {
		rec.Value, err = serialize(tp.value, r.Topic, r.Value, false)
	}
	if err != nil {
		rec.Key, rec.Value = nil, nil
		if tp.p.txn != nil {
			tp.p.txn.sendFailed(rec, 0, err, silent)
		}
		tp.p.failUnsent(rec, err, done)
		return
	}
	tp.p.sendWith(ctx, rec, done, silent)
}

// SendSync sends a record and waits for its outcome. On success r holds
// its partition, offset and timestamp.
func (tp *TypedProducer[K, V]) SendSync(ctx context.Context, r *TypedRecord[K, V]) error {
	if err := tp.p.refuseInCallback("SendSync", "the record's callback (Send does not)"); err != nil {
		return err
	}
	ch := make(chan error, 1)
	tp.Send(ctx, r, func(_ *TypedRecord[K, V], err error) { ch <- err })
	return <-ch
}

// failUnsent fails a record that never reached Send (its serializer
// failed, or the producer is closed): it counts in record-error-total (as
// in Java's doSend; not on a closed producer, as for Send), the
// interceptors learn of it, then its callback.
func (p *Producer) failUnsent(r *Record, err error, cb func(*Record, error)) {
	r.failedUnbuffered()
	if _, closed := err.(*sendClosedError); !closed {
		p.metrics.errors.add(time.Now(), 1)
	}
	p.onAcknowledgement(r, err)
	cb(r, err)
}

// serialize runs s, turning an error or a panic into a
// *SerializationError.
func serialize[T any](s Serializer[T], topic string, v T, key bool) (b []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &SerializationError{Topic: topic, Key: key, Err: fmt.Errorf("serializer %T panicked: %v", s, p)}
		}
	}()
	if b, err = s.Serialize(topic, v); err != nil {
		return nil, &SerializationError{Topic: topic, Key: key, Err: err}
	}
	return b, nil
}

// recordSizeUpperBound is the size the Java client checks against
// max.request.size and buffer.memory before buffering a record
// (KafkaProducer.ensureValidRecordSize): the uncompressed size of a batch
// holding only this record, with the record's varints at their largest
// (AbstractRecords.estimateSizeInBytesUpperBound for magic v2, i.e.
// RECORD_BATCH_OVERHEAD 61 + MAX_RECORD_OVERHEAD 21 + the key, value and
// headers with their lengths). Compression plays no part in it, in Java
// as here.
func recordSizeUpperBound(key, value []byte, headers []Header) int {
	return sizeUpperBound(recbatch.FieldsSize(key, value, headers))
}

// sizeUpperBound is recordSizeUpperBound of a record whose
// recbatch.FieldsSize is fields.
func sizeUpperBound(fields int) int {
	const batchOverhead, maxRecordOverhead = 61, 21
	return batchOverhead + maxRecordOverhead + fields
}
