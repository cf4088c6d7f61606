package kprod

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkAppend measures the send path (Send → partitioner → Append
// into a pooled batch) with the sender completing batches in the
// background against the in-process cluster. The target is 0 allocations
// per record in steady state: the callback here is one shared func, and
// records are reused once their callback has run.
func BenchmarkAppend(b *testing.B) {
	p := benchProducer(b, func(cfg *Config) {
		if os.Getenv("KPROD_BENCH_NOIDEM") != "" {
			cfg.EnableIdempotence = new(false)
		}
	})
	sendLoop(b, p, func() error { return p.Flush(context.Background()) })
}

// BenchmarkAppendLZ4 is BenchmarkAppend with lz4: batches then fill by
// their estimated compressed size (newBatchSize), from pooled buffers of
// a multiple of batch.size, and should allocate nothing per record
// either.
func BenchmarkAppendLZ4(b *testing.B) {
	p := benchProducer(b, func(cfg *Config) { cfg.CompressionType = "lz4" })
	sendLoop(b, p, func() error { return p.Flush(context.Background()) })
}

// BenchmarkKeyedSpread sends keyed records over 60 partitions at a
// modest pace (30,000 records/s, one record per op), where each
// partition's batch fills slowly and linger.ms decides when it goes. It
// reports the produce requests per 1,000 records: a lingering batch rides
// along when its leader gets a request anyway (Java's drain), so the
// requests follow the leaders' wake-ups, not each partition's linger.
// ns/op is the pace, not a cost.
func BenchmarkKeyedSpread(b *testing.B) {
	p := benchProducerN(b, 60, func(*Config) {})
	ctx := context.Background()
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(strconv.Itoa(i))
	}
	val := make([]byte, 100)
	cb := func(_ *Record, err error) {
		if err != nil {
			b.Error(err)
		}
	}
	const interval = time.Second / 30000
	req0 := p.Metrics().RequestTotal
	b.ResetTimer()
	start := time.Now()
	i := 0
	for b.Loop() {
		if ahead := time.Until(start.Add(time.Duration(i) * interval)); ahead > time.Millisecond {
			time.Sleep(ahead)
		}
		p.Send(ctx, &Record{Topic: "t", Key: keys[i%len(keys)], Value: val}, cb)
		i++
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(p.Metrics().RequestTotal-req0)*1000/float64(b.N), "requests/krec")
}

// benchProducer starts an in-process cluster (BlackholeProduce) with
// topic "t" of 6 partitions and a producer on it, configured by set,
// closed when the benchmark ends. begin runs before the warm-up record
// (which brings metadata, connections and pooled buffers), for a
// transaction to put it in.
func benchProducer(b *testing.B, set func(*Config), begin ...func(*Producer) error) *Producer {
	b.Helper()
	return benchProducerN(b, 6, set, begin...)
}

// benchProducerN is benchProducer with topic "t" of partitions partitions.
func benchProducerN(b *testing.B, partitions int32, set func(*Config), begin ...func(*Producer) error) *Producer {
	b.Helper()
	c := newFakeB(b, partitions)
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	set(&cfg)
	p, err := NewProducer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	for _, f := range begin {
		if err := f(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		b.Fatal(err)
	}
	return p
}

// sendLoop sends b.N records of 100 bytes through p with one shared
// callback, reusing a ring of records once their callbacks have run, then
// calls finish (a Flush or a commit) and reports allocations and the
// CPU time of the whole process (the in-process cluster included) per
// record, which is steadier than ns/op on a shared machine.
func sendLoop(b *testing.B, p *Producer, finish func() error) {
	ctx := context.Background()
	const ring = 1 << 16
	recs := make([]Record, ring)
	free := make(chan int, ring)
	idx := map[*Record]int{}
	for i := range recs {
		free <- i
		idx[&recs[i]] = i
	}
	val := make([]byte, 100)
	ts := time.Now()
	cb := func(r *Record, err error) {
		if err != nil {
			b.Error(err)
		}
		free <- idx[r]
	}
	b.SetBytes(int64(len(val)))
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for b.Loop() {
		i := <-free
		r := &recs[i]
		*r = Record{Topic: "t", Value: val, Timestamp: ts}
		p.Send(ctx, r, cb)
	}
	if err := finish(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}
