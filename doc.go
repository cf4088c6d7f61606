// Package kprod is a Kafka producer with the Java client's architecture
// and guarantees: records go from any number of goroutines through a
// RecordAccumulator (per-partition deques of batches in pooled buffers) to
// one sender goroutine that drains them per broker into produce requests,
// retries what is safe to retry, and completes every record exactly once.
//
// # Using it
//
//	cfg := kprod.DefaultConfig()
//	cfg.BootstrapServers = []string{"127.0.0.1:9092"}
//	p, err := kprod.NewProducer(cfg)
//	...
//	p.Send(ctx, &kprod.Record{Topic: "events", Key: k, Value: v}, func(r *kprod.Record, err error) {
//		// r.Partition and r.Offset are set on success
//	})
//	err = p.Flush(ctx) // every record sent so far has its outcome
//	err = p.Close(ctx) // delivers what is buffered, stops every goroutine
//
// Send never blocks on the network; it blocks only for the topic's first
// metadata and when buffer.memory is full, for at most max.block.ms (from
// a callback it does not wait for memory: it fails with ErrBufferFull).
// SendSync waits for the outcome.
//
// # Configuration
//
// Config has every producer property with the Java client's default
// (DefaultConfig) and its Java name in each field's doc. A Java
// producer.properties file loads as is (ConfigFromFile, ConfigFromProperties,
// Config.Set); an unknown name or a bad value is an error naming the
// property (errors.Is(err, ErrInvalidConfig), errors.As to *ConfigError).
//
// # Callbacks
//
// A record's callback runs exactly once: with the record's partition,
// offset and timestamp, or with an error (success, broker error, timeout,
// Close, or a ctx that ended before the record was buffered). Callbacks of
// buffered records run on the producer's sender goroutine, those of one
// partition in offset order, one at a time: they must not block. A record
// that fails before it is buffered gets its callback on the caller's
// goroutine before Send returns. A callback that panics on the sender
// goroutine is logged (at error level, with its stack), and the other
// callbacks run on, as in Java.
//
// # Errors
//
// Errors wrap a sentinel of this package (ErrClosed, ErrRecordTooLarge,
// ErrBufferFull, ErrDeliveryTimeout, ErrUnknownTopic, ...) or a broker
// error code (*kerr.BrokerError, e.g. kerr.NotEnoughReplicas), and say what
// happened and what to do. kerr.IsRetriable tells whether sending the
// record again may succeed (the producer has already retried what it
// could, within delivery.timeout.ms).
//
// # Delivery guarantees
//
// By default the producer is idempotent (enable.idempotence=true, acks=all,
// as Java since 3.0): retries never duplicate or reorder records within a
// partition, even with 5 requests in flight. acks=1 and acks=0, or
// enable.idempotence=false, trade that for latency; docs/guarantees.md
// says exactly what each mode promises across retries, leader changes,
// broker crashes and producer restarts. Without idempotence and with more
// than one request in flight, a retried batch may land after a later one.
//
// # Internals
//
// DESIGN.md in the repository follows a record through the pipeline, lists
// every goroutine and who ends it, and gives the lock order.
package kprod
