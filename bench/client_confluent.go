//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func init() { goClients["confluent"] = newConfluent }

// confluentClient runs confluent-kafka-go, librdkafka through cgo (its
// bundled static build). go.delivery.report.fields=none: the delivery
// report does not copy key and value back into Go, which no other client
// does either. queue.buffering.max.kbytes=32768 is Java's buffer.memory;
// queue.buffering.max.messages, which librdkafka also enforces (100,000
// records by default: 9.5 MiB of 100 B values), is raised so that the
// bytes decide, as for the other clients. Keyed records (-keys) get
// partitioner=murmur2_random, Java's hash (librdkafka's default is CRC32).
type confluentClient struct {
	p     *kafka.Producer
	topic string
	done  chan struct{}
}

func newConfluent(w *workload, a *acker) (producer, clientInfo, error) {
	comp := "none"
	if isLZ4(w.compression) {
		comp = "lz4"
	}
	cm := kafka.ConfigMap{
		"bootstrap.servers":            strings.Join(w.brokers, ","),
		"client.id":                    w.clientID,
		"acks":                         "all",
		"enable.idempotence":           true,
		"linger.ms":                    5,
		"batch.size":                   w.batch,
		"compression.type":             comp,
		"queue.buffering.max.kbytes":   bufferMemory / 1024,
		"queue.buffering.max.messages": 10_000_000,
		"go.delivery.report.fields":    "none",
	}
	notes := ""
	if w.keys > 0 {
		cm["partitioner"] = "murmur2_random"
		notes = "; partitioner=murmur2_random (keys)"
	}
	p, err := kafka.NewProducer(&cm)
	if err != nil {
		return nil, clientInfo{}, err
	}
	c := &confluentClient{p: p, topic: w.topic, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for e := range p.Events() {
			switch m := e.(type) {
			case *kafka.Message:
				a.ack(m.Opaque.(time.Time), m.TopicPartition.Error)
			case kafka.Error:
				if m.IsFatal() {
					fmt.Fprintf(os.Stderr, "confluent: fatal: %v\n", m)
				}
			}
		}
	}()
	_, lib := kafka.LibraryVersion()
	return c, clientInfo{
		Idempotent: yes(true),
		Notes:      "enable.idempotence=true; librdkafka " + lib + " (bundled static build)" + notes,
		Version:    moduleVersion("confluent"),
	}, nil
}

func (c *confluentClient) produce(ctx context.Context, k, v []byte, sent time.Time) error {
	m := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &c.topic, Partition: kafka.PartitionAny},
		Key:            k,
		Value:          v,
		Opaque:         sent,
	}
	for {
		err := c.p.Produce(m, nil)
		var ke kafka.Error
		if err == nil || !errors.As(err, &ke) || ke.Code() != kafka.ErrQueueFull {
			return err
		}
		// The local queue is full (buffer memory): wait for deliveries.
		select {
		case <-time.After(100 * time.Microsecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *confluentClient) flush(ctx context.Context) error {
	for c.p.Flush(100) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (c *confluentClient) close() error {
	c.p.Close()
	<-c.done
	return nil
}
