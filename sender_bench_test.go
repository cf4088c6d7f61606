package kprod

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/recbatch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkHandleProduceResponse measures the sender's response handling:
// matching a produce response of 6 partitions to its batches, the
// idempotence bookkeeping, running every record's callback and releasing
// the batches. It drives a sender by hand (no sender goroutine, no
// connection): each round appends 6 batches of 100-byte records, drains
// and seals them as sendReady would, then hands the sender the response
// with the timer running. ns/op is per record.
func BenchmarkHandleProduceResponse(b *testing.B) {
	c := newFakeB(b, 6)
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, err := cluster.New(cluster.Config{
		Broker: &broker.Config{ClientID: "bench", SetupTimeout: 10 * time.Second, SetupTimeoutMax: 30 * time.Second,
			RequestTimeout: 30 * time.Second, MaxInFlight: 5, ReconnectBackoff: 50 * time.Millisecond,
			ReconnectBackoffMax: time.Second, Logger: quiet},
		Bootstrap: cfg.BootstrapServers, MetadataMaxAge: time.Minute, RetryBackoff: 100 * time.Millisecond,
		RetryBackoffMax: time.Second, Logger: quiet,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	p := &Producer{cfg: cfg, log: quiet, cl: cl}
	p.pool = newBufferPool(cfg.BufferMemory, cfg.BatchSize)
	p.snd = newSender(p)
	p.acc = newAccumulator(p.pool, cfg.BatchSize, cfg.Linger, recbatch.SealOptions{}, func() {})
	s := p.snd
	s.idem.pid, s.idem.epoch, s.idem.have = 1, 0, true

	const parts, perBatch = 6, 140
	t := p.acc.topic("t")
	qs := make([]*partq, parts)
	for i := range qs {
		qs[i] = p.acc.queue(t, int32(i))
	}
	val := make([]byte, 100)
	ts := time.Now()
	recs := make([]Record, parts*perBatch)
	calls := 0
	cb := func(*Record, error) { calls++ }
	ctx := context.Background()

	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(11)
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "t"
	for i := range parts {
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.Partition = int32(i)
		rp.LogAppendTime = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)

	b.SetBytes(int64(len(val)) * parts * perBatch)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		bs := make([]*batch, 0, parts)
		for i, q := range qs {
			for j := range perBatch {
				r := &recs[i*perBatch+j]
				*r = Record{Topic: "t", Value: val, Timestamp: ts}
				if _, err := p.acc.append(ctx, q, r, ts.UnixMilli(), cb, newRecSizes(nil, val, nil), time.Second, false, &heldBuf{}); err != nil {
					b.Fatal(err)
				}
			}
			if len(q.batches) != 1 {
				b.Fatalf("%d batches in partition %d, want 1", len(q.batches), i)
			}
			bt := q.batches[0]
			q.batches = q.batches[:0]
			bt.full = true
			s.sealIdempotent(q, bt)
			q.inflight++
			bt.inFlight, bt.sent = true, true
			s.inFlightB[bt] = struct{}{}
			bs = append(bs, bt)
		}
		for i := range parts {
			resp.Topics[0].Partitions[i].BaseOffset += perBatch
		}
		p.acc.recycle()
		b.StartTimer()
		s.handle(&produceResult{broker: 0, batches: bs, resp: resp, sentAt: ts})
	}
	b.StopTimer()
	if want := b.N * parts * perBatch; calls != want {
		b.Fatalf("%d callbacks, want %d", calls, want)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*parts*perBatch), "ns/record")
}
