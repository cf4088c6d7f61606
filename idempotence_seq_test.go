package kprod

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/recbatch"
)

// Sequences wrap from Int32.MaxValue to 0 on the wire, as Java's
// DefaultRecordBatch.incrementSequence and the broker have them; kprod's
// own bookkeeping (next, last acknowledged) goes on counting, so that a
// partition that passed 2^31 records in one epoch keeps its order checks.
func TestSequenceWrap(t *testing.T) {
	cfg := DefaultConfig()
	p := &Producer{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p.pool = newBufferPool(cfg.BufferMemory, cfg.BatchSize)
	p.snd = newSender(p)
	p.acc = newAccumulator(p.pool, cfg.BatchSize, cfg.Linger, recbatch.SealOptions{}, func() {})
	s := p.snd
	s.idem.pid, s.idem.epoch, s.idem.have = 7, 0, true
	q := p.acc.queue(p.acc.topic("t"), 0)
	q.pid, q.epoch = 7, 0
	q.nextSeq = math.MaxInt32 - 1
	q.lastAcked = math.MaxInt32 - 2

	newSealed := func(n int) *batch {
		t.Helper()
		ts := time.Now()
		for range n {
			r := &Record{Topic: "t", Value: []byte("v"), Timestamp: ts}
			if _, err := p.acc.append(context.Background(), q, r, ts.UnixMilli(), func(*Record, error) {}, newRecSizes(nil, r.Value, nil), time.Second, false, &heldBuf{}); err != nil {
				t.Fatal(err)
			}
		}
		b := q.batches[0]
		q.batches = q.batches[1:]
		b.full = true
		s.sealIdempotent(q, b)
		return b
	}
	wire := func(b *batch) int32 { return int32(binary.BigEndian.Uint32(b.wire[53:])) }

	b1 := newSealed(3) // sequences MaxInt32-1, MaxInt32, 0
	if got := wire(b1); got != math.MaxInt32-1 {
		t.Fatalf("first batch's baseSequence %d, want %d", got, math.MaxInt32-1)
	}
	b2 := newSealed(2)
	if got := wire(b2); got != 1 {
		t.Fatalf("the batch after MaxInt32-1 + 3 records has baseSequence %d, want 1 (Java wraps to 0)", got)
	}
	// Acknowledged in order, each is the next expected one: no gap.
	for _, b := range []*batch{b1, b2} {
		if b.seq != q.lastAcked+1 {
			t.Fatalf("batch at %d not the next after last acknowledged %d", b.seq, q.lastAcked)
		}
		s.onBatchDone(b, nil)
	}
	if q.lastAcked+1 != q.nextSeq || q.suspectEnd != -1 {
		t.Fatalf("after both acks: last acknowledged %d, next %d, suspect %d", q.lastAcked, q.nextSeq, q.suspectEnd)
	}
}
