package kprod

import (
	"time"

	"github.com/kprod/kprod/internal/recbatch"
)

// Header is a record header: a key and an optional value (nil is a null
// value, which Kafka keeps apart from an empty one).
type Header = recbatch.Header

// Record is one Kafka record. The caller fills Topic, Key, Value,
// Headers and optionally Timestamp and a partition; on success kprod
// fills Partition, Offset and Timestamp before the callback runs.
//
// The record, its key, value and headers must not be changed from Send
// until its callback has run: kprod encodes the record into its batch
// during Send (and a batch split after MESSAGE_TOO_LARGE is read back
// from those bytes), but the callback receives this same *Record.
type Record struct {
	Topic string

	// Key is hashed (murmur2, as the Java client does) to pick the
	// partition; nil is a null key.
	Key []byte
	// Value is the payload; nil is a null value (a tombstone on
	// compacted topics).
	Value   []byte
	Headers []Header

	// Timestamp is the record's CreateTime; zero means the time of Send,
	// which Send then writes here (unless the record fails before it is
	// buffered). So a Record sent again after its callback keeps the
	// first Send's time: zero Timestamp first for a new one (a Java
	// ProducerRecord without a timestamp gets a new one every send).
	// For topics with message.timestamp.type=LogAppendTime, it holds the
	// broker's append time after delivery.
	Timestamp time.Time

	// Partition is the partition to write to when PartitionSet is true
	// (see ToPartition); otherwise the partitioner picks one. After
	// delivery it holds the partition the record was written to; when the
	// record fails, the partition it was buffered for, or -1 if it failed
	// before (unless the caller set it), as Java's RecordMetadata.
	Partition int32
	// PartitionSet says that Partition was chosen by the caller.
	PartitionSet bool

	// Offset is set when the record has its outcome: on success its
	// offset in its partition, or -1 with acks=0 (the broker does not
	// say); -1 when it failed.
	Offset int64

	// LeaderEpoch is the epoch of the partition leader that the record was
	// produced to, or -1 if unknown or the record failed.
	LeaderEpoch int32
}

// failedUnbuffered sets the fields of a record that failed before it was
// buffered, as Java's failed RecordMetadata: no offset, no leader epoch,
// and no partition unless the caller chose it (the error names one that
// kprod chose).
func (r *Record) failedUnbuffered() {
	r.Offset, r.LeaderEpoch = -1, -1
	if !r.PartitionSet {
		r.Partition = -1
	}
}

// ToPartition sets an explicit partition for the record and returns it.
func (r *Record) ToPartition(p int32) *Record {
	r.Partition = p
	r.PartitionSet = true
	return r
}

// StringRecord is a convenience for a record with a string key and value;
// an empty key is a null key.
func StringRecord(topic, key, value string) *Record {
	r := &Record{Topic: topic, Value: []byte(value)}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}
