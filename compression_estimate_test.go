package kprod

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/kprod/kprod/internal/recbatch"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The estimate moves as Java's CompressionRatioEstimator's: up at once
// (by 0.05 at least) after a batch that compressed worse, down by 0.005
// a batch after one that compressed better, never below what was seen.
func TestObserveCompression(t *testing.T) {
	for _, tc := range []struct{ est, observed, want float32 }{
		{0.8, 0.84, 0.85},
		{0.6, 0.7, 0.7},
		{0.6, 0.4, 0.595},
		{0.004, 0.001, 0.001},
		{0.5, 0.5, 0.5},
	} {
		var ts topicState
		ts.ratio.Store(math.Float32bits(tc.est))
		ts.observeCompression(tc.observed)
		if got := ts.compressionEstimate(); math.Abs(float64(got-tc.want)) > 1e-6 {
			t.Errorf("estimate %v, observed %v: got %v, want %v", tc.est, tc.observed, got, tc.want)
		}
	}
	var fresh topicState
	if got := fresh.compressionEstimate(); got != 1 {
		t.Errorf("a topic without sealed batches estimates %v, want 1", got)
	}
}

// newBatchSize: without compression, or for a record larger than
// batch.size, the buffer is the limit; with compression, the smallest
// pooled size that holds what is estimated to compress to batch.size,
// and at most 16 × batch.size with the estimate raised to fit, nor more
// than twice what the partition's last batch held.
func TestNewBatchSize(t *testing.T) {
	const bs = 16384
	lz4, err := recbatch.NewCompressor(recbatch.LZ4, 9)
	if err != nil {
		t.Fatal(err)
	}
	plain := newAccumulator(newBufferPool(1<<25, bs), bs, 0, recbatch.SealOptions{}, func() {})
	comp := newAccumulator(newBufferPool(1<<25, bs), bs, 0, recbatch.SealOptions{Compressor: lz4}, func() {})
	small := newAccumulator(newBufferPool(3*bs, bs), bs, 0, recbatch.SealOptions{Compressor: lz4}, func() {})
	at := func(ratio float32, lastRaw int) *partq {
		q := &partq{topic: &topicState{}}
		q.topic.ratio.Store(math.Float32bits(ratio))
		q.lastRaw.Store(int64(lastRaw))
		return q
	}
	const filled = 1 << 30 // the last batch held more than any buffer
	for _, tc := range []struct {
		acc       *accumulator
		ratio     float32
		lastRaw   int
		limit     int
		wantSize  int
		wantRatio float32 // 0: the topic's
	}{
		{plain, 0.3, filled, bs, bs, -1},
		{comp, 1, filled, bs, bs, 0},
		{comp, 0.9, filled, bs, 2 * bs, 0},
		{comp, 0.3, filled, bs, 4 * bs, 0},
		{comp, 0.1, filled, bs, 16 * bs, 0},
		{comp, 0.01, filled, bs, 16 * bs, recbatch.EstimateForCapacity(bs, 16*bs)},
		{comp, 0.3, filled, 3 * bs, lz4.BatchBound(3 * bs), -1},                  // one large record: room for lz4's worst case
		{small, 0.1, filled, bs, 2 * bs, recbatch.EstimateForCapacity(bs, 2*bs)}, // buffer.memory 3 × batch.size
		// The partition's last batch bounds the growth: none yet, a
		// small one (sent by linger.ms), a full batch.size one, 40 KiB.
		{comp, 0.1, 0, bs, bs, recbatch.EstimateForCapacity(bs, bs)},
		{comp, 0.1, 3000, bs, bs, recbatch.EstimateForCapacity(bs, bs)},
		{comp, 0.1, bs, bs, 2 * bs, recbatch.EstimateForCapacity(bs, 2*bs)},
		{comp, 0.1, 40 << 10, bs, 8 * bs, recbatch.EstimateForCapacity(bs, 8*bs)},
		{comp, 0.9, bs, bs, 2 * bs, 0},
	} {
		size, ratio := tc.acc.newBatchSize(at(tc.ratio, tc.lastRaw), tc.limit)
		want := tc.wantRatio
		switch want {
		case 0:
			want = tc.ratio
		case -1:
			want = 0
		}
		if size != tc.wantSize || ratio != want {
			t.Errorf("compressed %v, ratio %v, last batch %d, limit %d: size %d ratio %v, want %d and %v",
				tc.acc.compressed, tc.ratio, tc.lastRaw, tc.limit, size, ratio, tc.wantSize, want)
		}
		if ratio > 0 && recbatch.RecordsCapacity(tc.limit, ratio) > size {
			t.Errorf("ratio %v needs %d bytes, the buffer has %d", ratio, recbatch.RecordsCapacity(tc.limit, ratio), size)
		}
	}
}

// Buffers of every pooled size go back to their own free list and are
// handed out again; pooled bytes never exceed what is available.
func TestPoolSizeClasses(t *testing.T) {
	const bs = 1024
	p := newBufferPool(16*bs, bs)
	ctx := context.Background()
	a, err := p.allocate(ctx, 4*bs, time.Second)
	if err != nil || cap(a) != 4*bs {
		t.Fatalf("allocate 4 KiB: cap %d, %v", cap(a), err)
	}
	p.release(a, 4*bs)
	b, err := p.allocate(ctx, 4*bs, time.Second)
	if err != nil || &b[:1][0] != &a[:1][0] {
		t.Fatal("a released 4 × batch.size buffer was not handed out again")
	}
	p.release(b, 4*bs)
	if p.freeBytes != 4*bs || p.availableBytes() != 16*bs {
		t.Fatalf("free %d available %d", p.freeBytes, p.availableBytes())
	}
	// A fresh 16 KiB buffer needs the whole budget: the pooled 4 KiB goes.
	c, err := p.allocate(ctx, 16*bs, time.Second)
	if err != nil || cap(c) != 16*bs {
		t.Fatalf("allocate 16 KiB: cap %d, %v", cap(c), err)
	}
	if p.freeBytes != 0 {
		t.Fatalf("%d bytes still pooled with nothing available", p.freeBytes)
	}
	p.release(c, 16*bs)
	// Sizes that are not pooled are dropped on release.
	d, _ := p.allocate(ctx, 3*bs, time.Second)
	if p.freeBytes != 0 {
		t.Fatalf("%d bytes pooled beside a fresh 3 KiB buffer in a 16 KiB budget", p.freeBytes)
	}
	p.release(d, 3*bs)
	if p.freeBytes != 0 || p.availableBytes() != 16*bs {
		t.Fatalf("a 3 KiB buffer was pooled (free %d, available %d)", p.freeBytes, p.availableBytes())
	}
}

// With lz4 and records that compress well, batches fill up to batch.size
// of compressed bytes on the wire, as in the Java client, instead of
// batch.size of uncompressed records: records sent to a partition, and
// keyless ones, for which the sticky partitioner counts estimated bytes
// too, so that it stays on a partition until its batch is full.
func TestCompressedBatchesFillByEstimate(t *testing.T) {
	var batches [2]int
	for i, sticky := range []bool{false, true} {
		t.Run(map[bool]string{false: "partition", true: "sticky"}[sticky], func(t *testing.T) {
			batches[i] = compressedBatchesFill(t, sticky)
		})
	}
	t.Logf("batches in the last rounds: %d for one partition, %d keyless", batches[0], batches[1])
}

// The sticky partitioner counts what each record added to its batch's
// estimated size, as Java counts RecordAppendResult.appendedBytes: with
// compression the estimated compressed bytes, so that it stays on a
// partition until the (compressed) batch is full, and the batch header
// for the record that opened the batch.
func TestStickyCountsEstimatedBytes(t *testing.T) {
	c := newFake(t, 6)
	cfg := testConfig(c)
	cfg.CompressionType = "lz4"
	cfg.Linger = time.Hour // the batch stays open to be looked at
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	if _, err := p.PartitionsFor(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	ts := p.acc.topic("t")
	ts.ratio.Store(math.Float32bits(0.1))
	for part := range int32(6) {
		// As if earlier batches had held much: the new batch's buffer
		// takes records for a whole compressed batch at the estimate.
		p.acc.queue(ts, part).lastRaw.Store(1 << 20)
	}
	val := make([]byte, 1000)
	for range 3 {
		p.Send(ctx, &Record{Topic: "t", Value: val}, nil)
	}
	cur, produced := stickyUnpack(ts.sticky.Load())
	q := p.acc.queue(ts, cur)
	q.mu.Lock()
	size, nb := q.batches[0].bld.Size(), len(q.batches)
	q.mu.Unlock()
	raw := 3 * recbatch.RecordSize(0, 0, nil, val, nil)
	if nb != 1 || produced != size || size > recbatch.HeaderSize+raw/5 {
		t.Fatalf("3 records of %d bytes: %d batches, the sticky partitioner counted %d bytes, the batch's estimated size is %d, want one batch, the same count, and about a tenth of the records' bytes", len(val), nb, produced, size)
	}
}

// Without compression the count is the batches' exact growth: from a
// batch's 64th record on, its offset delta takes two bytes, which a size
// computed as for a batch's first record misses; Java switches once
// batch.size bytes went to the partition and its last batch is closed
// (a record did not fit), or at 2 × batch.size.
func TestStickyCountsWhatBatchesGrew(t *testing.T) {
	c := newFake(t, 6)
	// Without a producer id the sender drains nothing: every batch
	// stays in its deque, to be measured (a full one would go at once).
	// (A fault, not a held request: kfake answers a connection's
	// requests in order, and Metadata may share the connection.)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: fkerr.CoordinatorLoadInProgress, Count: -1})
	cfg := testConfig(c)
	cfg.Linger = time.Hour
	cfg.DeliveryTimeout = 2 * time.Hour
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	if _, err := p.PartitionsFor(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	defer func() { // nothing can be delivered: Close need not wait
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_ = p.Close(short)
	}()
	ts := p.acc.topic("t")
	stamp := time.Now()
	first, last := int32(-1), 0
	for i := 1; i <= 2000; i++ {
		p.Send(ctx, &Record{Topic: "t", Value: make([]byte, 50), Timestamp: stamp}, nil)
		cur, produced := stickyUnpack(ts.sticky.Load())
		if i == 1 {
			first = cur
		}
		if produced < last {
			cur = -1 // switched, and drew the same partition again
		}
		last = produced
		q := p.acc.queue(ts, first)
		q.mu.Lock()
		grew := 0
		for _, b := range q.batches {
			grew += b.bld.Size()
		}
		closed := q.batches[len(q.batches)-1].full
		q.mu.Unlock()
		if cur != first {
			if grew < 2*cfg.BatchSize && (grew < cfg.BatchSize || !closed) {
				t.Fatalf("switched after record %d with %d bytes on the partition (its last batch closed: %v), want batch.size (%d) and the last batch closed, or 2 × batch.size", i, grew, closed, cfg.BatchSize)
			}
			return
		}
		if produced != grew {
			t.Fatalf("record %d: the sticky partitioner counted %d bytes, the partition's batches grew by %d", i, produced, grew)
		}
	}
	t.Fatal("2000 records of 50 bytes never switched the sticky partition")
}

// compressedBatchesFill sends compressible records with lz4 and returns
// how many batches carried them.
func compressedBatchesFill(t *testing.T, sticky bool) int {
	parts := int32(1)
	if sticky {
		parts = 6
	}
	c := newFake(t, parts)
	var mu sync.Mutex
	var sizes, counts []int
	var measured int // batches of the last rounds, once the estimate settled
	measuring := false
	c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(rp.Records); err == nil {
					mu.Lock()
					sizes = append(sizes, len(rp.Records))
					if measuring {
						measured++
					}
					counts = append(counts, int(rb.NumRecords))
					mu.Unlock()
				}
			}
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.CompressionType = "lz4"
	cfg.Linger = time.Second // batches leave full
	p := newTestProducer(t, cfg)
	// In rounds, so that batches are sealed (and the estimate learns)
	// while later ones start: it improves by 0.005 a batch, as in Java.
	const rounds, each = 30, 8000
	const n = rounds * each
	val := bytes.Repeat([]byte("compressible "), 8) // 104 B
	o := newOutcomes(t)
	ctx := ctxT(t, 60*time.Second)
	for round := range rounds {
		if round == rounds-10 {
			mu.Lock()
			measuring = true
			mu.Unlock()
		}
		for range each {
			r := &Record{Topic: "t", Value: val}
			if !sticky {
				r.ToPartition(0)
			}
			p.Send(ctx, r, o.cb())
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ok, failed := o.errCount(); ok != n {
		t.Fatalf("%d ok, %d failed (%v)", ok, failed, firstErr(o))
	}
	mu.Lock()
	defer mu.Unlock()
	perBatch := cfg.BatchSize / (len(val) + 8) // uncompressed records that fit in batch.size
	most, biggest := 0, 0
	for i := range sizes {
		most = max(most, counts[i])
		biggest = max(biggest, sizes[i])
	}
	t.Logf("%d batches (%d in the last 10 rounds); at most %d records (%d uncompressed fit batch.size); the largest %d bytes on the wire",
		len(sizes), measured, most, perBatch, biggest)
	if most < 4*perBatch {
		t.Errorf("at most %d records in a batch; uncompressed batch.size holds about %d, and these compress more than 4 times", most, perBatch)
	}
	if biggest > cfg.BatchSize+cfg.BatchSize/10 {
		t.Errorf("a batch of %d bytes on the wire, batch.size is %d", biggest, cfg.BatchSize)
	}
	return measured
}

// A record larger than batch.size gets a batch of its own whose buffer
// has room for the codec's worst case: the seal keeps it in the memory
// charged for it, even when the record does not compress.
func TestOversizedCompressedBatchSealsInPlace(t *testing.T) {
	for _, name := range []string{CompressionGzip, CompressionSnappy, CompressionLz4, CompressionZstd} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			codec, err := recbatch.ParseCodec(name)
			if err != nil {
				t.Fatal(err)
			}
			c, err := recbatch.NewCompressor(codec, cfg.compressionLevel(codec))
			if err != nil {
				t.Fatal(err)
			}
			seal := recbatch.SealOptions{Compressor: c}
			acc := newAccumulator(newBufferPool(cfg.BufferMemory, cfg.BatchSize), cfg.BatchSize, cfg.Linger, seal, func() {})
			val := make([]byte, 4*cfg.BatchSize)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range val {
				val[i] = byte(rng.Uint32()) // random: it does not compress
			}
			limit := recbatch.RecordSize(0, 0, nil, val, nil) + recbatch.HeaderSize
			size, _ := acc.newBatchSize(acc.queue(acc.topic("t"), 0), limit)
			buf := make([]byte, 0, size)
			var bld recbatch.Builder
			bld.Reset(buf, 0)
			bld.Append(0, nil, val, nil)
			if !bld.IsFull(limit) {
				t.Errorf("a one-record batch at its exact size is not full")
			}
			wire := bld.Seal(seal)
			if unsafe.SliceData(wire) != unsafe.SliceData(buf) {
				t.Errorf("the sealed %s batch (%d bytes, from %d) moved out of its %d-byte buffer", name, len(wire), limit, size)
			}
		})
	}
}

// With a low compression estimate, a partition whose first batch holds
// one record charges batch.size, not 16 × batch.size: keyed records over
// many partitions must not tie up buffer.memory in nearly empty buffers.
func TestCompressedBatchChargeFollowsPartition(t *testing.T) {
	c := newFake(t, 12)
	cfg := testConfig(c)
	cfg.CompressionType = "lz4"
	cfg.Linger = time.Hour
	cfg.DeliveryTimeout = 2 * time.Hour
	p := newTestProducer(t, cfg)
	ts := p.acc.topic("t")
	ts.ratio.Store(math.Float32bits(0.0108)) // as after many batches of very compressible records
	before := p.pool.availableBytes()
	for part := range int32(10) {
		p.Send(context.Background(), (&Record{Topic: "t", Value: []byte("x")}).ToPartition(part), nil)
	}
	if charged := before - p.pool.availableBytes(); charged != 10*int64(cfg.BatchSize) {
		t.Errorf("10 one-record batches charged %d bytes, want 10 × batch.size = %d", charged, 10*cfg.BatchSize)
	}

	// A partition whose batch fills gets twice the buffer for its next
	// one at once, while the full one still waits to be sealed.
	before = p.pool.availableBytes()
	val := bytes.Repeat([]byte("a"), 1000)
	for range 17 { // 16 fill batch.size; the 17th opens the next batch
		p.Send(context.Background(), (&Record{Topic: "t", Value: val}).ToPartition(11), nil)
	}
	if charged, want := before-p.pool.availableBytes(), 3*int64(cfg.BatchSize); charged != want {
		t.Errorf("a full batch and the next charged %d bytes, want batch.size + 2 × batch.size = %d", charged, want)
	}
}

// waiting-threads counts the allocations waiting for memory.
func TestPoolWaiting(t *testing.T) {
	const bs = 1024
	p := newBufferPool(2*bs, bs)
	ctx := context.Background()
	a, _ := p.allocate(ctx, bs, time.Second)
	b, _ := p.allocate(ctx, bs, time.Second)
	done := make(chan error, 1)
	go func() {
		buf, err := p.allocate(ctx, bs, 10*time.Second)
		if err == nil {
			p.release(buf, bs)
		}
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for p.waiting() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("waiting-threads %d, want 1", p.waiting())
		}
		time.Sleep(time.Millisecond)
	}
	p.release(a, bs)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := p.waiting(); n != 0 {
		t.Errorf("waiting-threads %d after the wait, want 0", n)
	}
	p.release(b, bs)
}
