// Package kerr holds every error kprod returns: the client-side sentinels
// (closed producer, request timeout, lost connection, full buffer, ...) and
// the Kafka broker error codes as one type, *BrokerError, that says whether
// the error is retriable.
//
// All errors are meant to be tested with errors.Is and errors.As:
//
//	if errors.Is(err, kerr.ErrRecordTooLarge) { ... }
//	var be *kerr.BrokerError
//	if errors.As(err, &be) && be.Code == kerr.NotLeaderOrFollower.Code { ... }
//
// The root package kprod re-exports the sentinels users need most.
package kerr

import (
	"errors"
	"fmt"
)

// Client-side sentinels. Errors kprod returns wrap one of these (or a
// *BrokerError) and add what happened and what to do in their message.
var (
	// ErrClosed: the producer (or connection) was closed; nothing more
	// can be sent through it.
	ErrClosed = errors.New("kprod: producer is closed")

	// ErrInvalidConfig: a configuration value is out of range, has the
	// wrong form or conflicts with another. The wrapping error names the
	// property (by its Java name) and what is allowed.
	ErrInvalidConfig = errors.New("kprod: invalid configuration")

	// ErrRequestTimeout: a request got no response within
	// request.timeout.ms. The connection it was sent on is closed, as the
	// Java client does. Retriable.
	ErrRequestTimeout = errors.New("kprod: request timed out (request.timeout.ms)")

	// ErrConnectionLost: the connection to a broker broke while requests
	// were in flight on it. Retriable.
	ErrConnectionLost = errors.New("kprod: connection to broker lost")

	// ErrDial: a connection to a broker could not be set up (refused,
	// unreachable, or the setup took longer than
	// socket.connection.setup.timeout.ms). Retriable.
	ErrDial = errors.New("kprod: cannot connect to broker")

	// ErrUnsupportedVersion: the broker supports no version of a request
	// that kprod implements.
	ErrUnsupportedVersion = errors.New("kprod: broker does not support a request version kprod implements")

	// ErrTooManyInFlight: the connection already has
	// max.in.flight.requests.per.connection requests outstanding.
	ErrTooManyInFlight = errors.New("kprod: too many requests in flight on the connection")

	// ErrUnknownTopic: the topic did not appear in the cluster metadata
	// within max.block.ms.
	ErrUnknownTopic = errors.New("kprod: unknown topic")

	// ErrUnknownPartition: the record names a partition the topic does not
	// have. When the topic did not grow to it within max.block.ms, the
	// error wraps ErrMetadataTimeout too and is retriable, as Java's
	// TimeoutException for it; a partition a Partitioner picked out of
	// range is not.
	ErrUnknownPartition = errors.New("kprod: unknown partition")

	// ErrSerialization: a key or value serializer failed (Java's
	// SerializationException). Only that record fails; kprod.TypedProducer
	// wraps it in a *kprod.SerializationError naming the topic and side.
	ErrSerialization = errors.New("kprod: cannot serialize record")

	// ErrMetadataTimeout: metadata could not be fetched within max.block.ms.
	ErrMetadataTimeout = errors.New("kprod: metadata not available in time (max.block.ms)")

	// ErrRecordTooLarge: the record's encoded size exceeds
	// max.request.size or buffer.memory, or the broker refused it as
	// larger than the topic's max.message.bytes (MESSAGE_TOO_LARGE, which
	// matches it, as both are Java's RecordTooLargeException). Only that
	// record fails.
	ErrRecordTooLarge = errors.New("kprod: record too large")

	// ErrBufferFull: no room in buffer.memory within max.block.ms, or
	// none at once for a Send from a callback, which cannot wait.
	// Retriable, but not from inside the callback that got it: memory
	// frees only as batches complete, which the callback holds up.
	ErrBufferFull = errors.New("kprod: buffer full (buffer.memory)")

	// ErrDeliveryTimeout: the record was not acknowledged within
	// delivery.timeout.ms after it was sent.
	ErrDeliveryTimeout = errors.New("kprod: record not delivered within delivery.timeout.ms")

	// ErrInvalidRecord: the record itself is not acceptable (empty topic
	// name, negative partition, ...).
	ErrInvalidRecord = errors.New("kprod: invalid record")

	// ErrFatal: the producer hit an error it cannot recover from (for
	// example the idempotent producer was refused a producer id, or a
	// produce with CLUSTER_AUTHORIZATION_FAILED); every record fails with
	// it until the producer is closed and a new one made.
	ErrFatal = errors.New("kprod: producer is in a fatal state")

	// ErrBatchRejected: the broker refused the record's batch because
	// another record of it was invalid (the response names that one,
	// which gets the broker's error); this record was not written and
	// can be sent again. Retriable (by the caller: kprod does not send it
	// again itself, as Java does not).
	ErrBatchRejected = errors.New("kprod: not written: another record of its batch was invalid")

	// ErrInCallback: a call that waits for records to be delivered
	// (Flush, SendSync, CommitTransaction, AbortTransaction) was made from
	// a callback, which runs on the goroutine that delivers them and
	// would wait for itself forever. Make the call from another goroutine.
	ErrInCallback = errors.New("kprod: not allowed inside a callback")

	// ErrAborted: the record was still buffered or in flight when Close's
	// context ended, or when Close was called from a callback (which
	// cannot wait for deliveries); it may or may not have been written.
	ErrAborted = errors.New("kprod: record aborted before it was delivered")

	// ErrAuthentication: the broker did not accept the client's SASL
	// credentials: wrong user or password, a mechanism the listener does
	// not enable, an expired or rejected OAuth token, or SASL spoken to a
	// listener without it. The error also wraps the broker's
	// *BrokerError (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
	// ...) when it sent one. Not retriable: the metadata wait fails at
	// once with it rather than after max.block.ms.
	ErrAuthentication = errors.New("kprod: authentication failed")

	// ErrTLS: TLS could not be set up with the broker: its certificate is
	// not trusted or not for the host dialed, it rejected ours, no TLS
	// version or cipher in common, or security.protocol does not match
	// the listener (TLS spoken to a plaintext listener, or the reverse).
	// The message says which. Not retriable, except when it also wraps
	// ErrDial: the connection was closed or timed out during the TLS
	// handshake, which a plaintext listener causes but so can a broker
	// that is restarting.
	ErrTLS = errors.New("kprod: TLS failed")
)

// retriableSentinels are client-side errors after which sending the same
// again may succeed.
var retriableSentinels = []error{ErrRequestTimeout, ErrConnectionLost, ErrDial, ErrTooManyInFlight, ErrMetadataTimeout, ErrBatchRejected, ErrDeliveryTimeout, ErrBufferFull}

// IsRetriable reports whether sending again may succeed after err: a
// retriable broker error, or a retriable client-side error (lost
// connection, request or delivery timeout, metadata not found in time,
// no buffer memory in time, a batch refused for another record, ...), as
// Java's RetriableException does (its BufferExhaustedException and
// waitOnMetadata's TimeoutException are ones). It does not say whether
// the producer already retried: a record whose callback has an error is
// done with, and sending it again is the application's choice. Nor does
// it say when: ErrBufferFull from a Send made inside a callback is worth
// sending again only after the callback returns, as memory frees when
// batches complete, which the callback holds up. An authentication
// failure (ErrAuthentication) never is retriable, whatever else it wraps.
func IsRetriable(err error) bool {
	if err == nil || errors.Is(err, ErrAuthentication) {
		return false
	}
	if errors.Is(err, ErrDeliveryTimeout) {
		return true // whatever its last error was (Java's TimeoutException)
	}
	var be *BrokerError
	if errors.As(err, &be) {
		return be.Retriable
	}
	for _, s := range retriableSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// BrokerError is a Kafka error code, as brokers return it in responses.
// Every known code is a package variable (NotLeaderOrFollower, ...);
// compare with errors.Is, which matches on the code.
type BrokerError struct {
	Code        int16
	Name        string // Kafka's name, e.g. NOT_LEADER_OR_FOLLOWER
	Description string // what it means, and what to do where that is known
	Retriable   bool
}

func (e *BrokerError) Error() string {
	return fmt.Sprintf("kafka error %s (%d): %s", e.Name, e.Code, e.Description)
}

// Is matches any *BrokerError with the same code, so that an error built
// by ForCode for a code kprod did not know still compares equal; and
// MESSAGE_TOO_LARGE matches ErrRecordTooLarge, so that one check catches a
// record too large for the client or for the topic.
func (e *BrokerError) Is(target error) bool {
	if target == ErrRecordTooLarge {
		return e.Code == MessageTooLarge.Code
	}
	t, ok := target.(*BrokerError)
	return ok && t.Code == e.Code
}

// ResponseError is a broker error code returned for one request or
// partition, with the broker's own message when it sent one.
type ResponseError struct {
	Err       *BrokerError
	Message   string // the broker's error message, may be empty
	Broker    int32  // node id, -1 if unknown
	Topic     string // empty when not partition-scoped
	Partition int32
}

func (e *ResponseError) Error() string {
	where := ""
	if e.Topic != "" {
		where = fmt.Sprintf(" for %s[%d]", e.Topic, e.Partition)
	}
	if e.Broker >= 0 {
		where += fmt.Sprintf(" from broker %d", e.Broker)
	}
	msg := e.Err.Error()
	if e.Message != "" {
		msg += " (broker says: " + e.Message + ")"
	}
	return msg + where
}

func (e *ResponseError) Unwrap() error { return e.Err }
