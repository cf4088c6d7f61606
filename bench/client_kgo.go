package main

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoClient runs franz-go's kgo with its defaults (idempotent, sticky
// uniform-bytes partitioner, which hashes keys by murmur2 as Java does)
// plus the workload's settings. kgo's own
// defaults differ from Java's in three places that matter here, so they
// are set to Java's: snappy compression (here none or lz4), a 1 MB batch
// cap (here batch.size) and 50,000 buffered records (here 32 MiB of
// buffered bytes, Java's buffer.memory).
type kgoClient struct {
	cl      *kgo.Client
	promise func(*kgo.Record, error)
}

func newKgo(w *workload, a *acker) (producer, clientInfo, error) {
	codec := kgo.NoCompression()
	if isLZ4(w.compression) {
		codec = kgo.Lz4Compression()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.brokers...),
		kgo.ClientID(w.clientID),
		kgo.DefaultProduceTopic(w.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(w.batch)),
		kgo.ProducerBatchCompression(codec),
		kgo.MaxBufferedBytes(bufferMemory),
		kgo.MaxBufferedRecords(1<<30),
	)
	if err != nil {
		return nil, clientInfo{}, err
	}
	c := &kgoClient{cl: cl}
	c.promise = func(r *kgo.Record, err error) { a.ack(r.Timestamp, err) }
	return c, clientInfo{
		Idempotent: yes(true),
		Notes:      "idempotent (default, 5 in flight); buffer 32 MiB of bytes",
		Version:    moduleVersion("franz-go"),
	}, nil
}

func (c *kgoClient) produce(ctx context.Context, k, v []byte, sent time.Time) error {
	c.cl.Produce(ctx, &kgo.Record{Key: k, Value: v, Timestamp: sent}, c.promise)
	return nil
}

func (c *kgoClient) flush(ctx context.Context) error { return c.cl.Flush(ctx) }
func (c *kgoClient) close() error                    { c.cl.Close(); return nil }
