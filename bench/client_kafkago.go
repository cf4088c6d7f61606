package main

import (
	"context"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// kafkaGoClient runs segmentio/kafka-go's Writer in Async mode with a
// Completion callback. kafka-go has no idempotent producer and no bound on
// what an async Writer buffers, so the harness bounds the bytes in flight
// to 32 MiB (Java's buffer.memory) itself. BatchBytes plays batch.size and
// BatchTimeout linger.ms; BatchSize (a record count) is set to what fits
// in BatchBytes so that bytes decide. Its default balancer is round-robin
// per record; keyed records (-keys) get its Murmur2Balancer, Java's hash.
type kafkaGoClient struct {
	w    *kafka.Writer
	size int64

	mu       sync.Mutex
	cond     *sync.Cond
	inflight int64
}

func newKafkaGo(w *workload, a *acker) (producer, clientInfo, error) {
	c := &kafkaGoClient{size: int64(w.size)}
	c.cond = sync.NewCond(&c.mu)
	kw := &kafka.Writer{
		Addr:         kafka.TCP(w.brokers...),
		Topic:        w.topic,
		RequiredAcks: kafka.RequireAll,
		Async:        true,
		BatchTimeout: 5 * time.Millisecond,
		BatchBytes:   int64(w.batch),
		BatchSize:    w.batch/w.size + 1, // kafka-go preallocates this many messages per batch
		Transport:    &kafka.Transport{ClientID: w.clientID},
		Completion: func(msgs []kafka.Message, err error) {
			for i := range msgs {
				a.ack(msgs[i].Time, err)
			}
			c.mu.Lock()
			c.inflight -= int64(len(msgs)) * c.size
			c.mu.Unlock()
			c.cond.Broadcast()
		},
	}
	if isLZ4(w.compression) {
		kw.Compression = compress.Lz4
	}
	balancer := "round-robin balancer (its default)"
	if w.keys > 0 {
		kw.Balancer = kafka.Murmur2Balancer{}
		balancer = "murmur2 balancer (keys)"
	}
	c.w = kw
	return c, clientInfo{
		Idempotent: yes(false),
		Notes:      "no idempotent producer; harness caps bytes in flight at 32 MiB; " + balancer,
		Version:    moduleVersion("kafka-go"),
	}, nil
}

func (c *kafkaGoClient) produce(ctx context.Context, k, v []byte, sent time.Time) error {
	c.mu.Lock()
	for c.inflight+c.size > bufferMemory {
		c.cond.Wait()
	}
	c.inflight += c.size
	c.mu.Unlock()
	return c.w.WriteMessages(ctx, kafka.Message{Key: k, Value: v, Time: sent})
}

func (c *kafkaGoClient) flush(context.Context) error { return nil }
func (c *kafkaGoClient) close() error                { return c.w.Close() }
