package main

import (
	"context"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaClient runs IBM/sarama's AsyncProducer. Its idempotent producer
// requires one request in flight per broker (Net.MaxOpenRequests=1), which
// is what limits its throughput here. Producer.MaxMessageBytes caps a
// partition's batch in sarama, so it plays batch.size; Flush.Bytes and
// Flush.Frequency play batch.size and linger.ms for a broker's request.
// sarama has no sticky partitioner: nil-key records go to random
// partitions (its default). Keyed records (-keys) get its murmur2
// partitioner, Java's hash, rather than its default FNV-1a one.
type saramaClient struct {
	p     sarama.AsyncProducer
	topic string
	wg    sync.WaitGroup
}

func newSarama(w *workload, a *acker) (producer, clientInfo, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_0_0_0
	cfg.ClientID = w.clientID
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Bytes = w.batch
	cfg.Producer.MaxMessageBytes = w.batch
	if isLZ4(w.compression) {
		cfg.Producer.Compression = sarama.CompressionLZ4
	}
	notes := "idempotent, so Net.MaxOpenRequests=1; random partitioner (its default)"
	if w.keys > 0 {
		cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
		notes = "idempotent, so Net.MaxOpenRequests=1; murmur2 partitioner (keys)"
	}
	p, err := sarama.NewAsyncProducer(w.brokers, cfg)
	if err != nil {
		return nil, clientInfo{}, err
	}
	c := &saramaClient{p: p, topic: w.topic}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		for m := range p.Successes() {
			a.ack(m.Timestamp, nil)
		}
	}()
	go func() {
		defer c.wg.Done()
		for e := range p.Errors() {
			a.ack(e.Msg.Timestamp, e.Err)
		}
	}()
	return c, clientInfo{
		Idempotent: yes(true),
		Notes:      notes,
		Version:    moduleVersion("sarama"),
	}, nil
}

func (c *saramaClient) produce(ctx context.Context, k, v []byte, sent time.Time) error {
	m := &sarama.ProducerMessage{Topic: c.topic, Value: sarama.ByteEncoder(v), Timestamp: sent}
	if k != nil {
		// A nil ByteEncoder in the Encoder interface is not a nil key.
		m.Key = sarama.ByteEncoder(k)
	}
	select {
	case c.p.Input() <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush: sarama has none; its Flush.Frequency sends within 5 ms and the
// harness waits for the acknowledgements.
func (c *saramaClient) flush(context.Context) error { return nil }

func (c *saramaClient) close() error {
	c.p.AsyncClose()
	c.wg.Wait()
	return nil
}
