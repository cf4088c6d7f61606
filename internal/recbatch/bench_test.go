package recbatch

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"
)

const benchBatchSize = 16 << 10 // batch.size default

// BenchmarkAppend is the producer's hot path: 100-byte values appended to a
// batch that is Reset (buffer reused) whenever the next record would not fit
// under batch.size. Steady state must be 0 allocs/op.
func BenchmarkAppend(b *testing.B) {
	r := rand.New(rand.NewPCG(31, 32))
	value := textish(r, 100)
	key := []byte("user-000000042")
	headers := []Header{{Key: "trace-id", Value: []byte("0af7651916cd43dd")}}
	buf := make([]byte, 0, benchBatchSize)
	var bl Builder
	ts := int64(1_700_000_000_000)
	bl.Reset(buf, ts)
	b.ReportAllocs()
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		ts++
		if !bl.TryAppend(ts, key, value, headers, benchBatchSize) {
			bl.Reset(bl.Release(), ts)
			bl.Append(ts, key, value, headers)
		}
	}
}

func fillBatch(bl *Builder, r *rand.Rand) {
	ts := int64(1_700_000_000_000)
	bl.Reset(make([]byte, 0, benchBatchSize), ts)
	for i := 0; ; i++ {
		value := textish(r, 100)
		key := []byte("user-000000042")
		if !bl.TryAppend(ts+int64(i), key, value, nil, benchBatchSize) {
			return
		}
	}
}

// BenchmarkSeal seals a full 16 KiB batch of text-like records per codec,
// with the Compressor's encoders and scratch buffers reused, as they are
// across batches in steady state. A compressing Seal keeps the records
// compressed only, so every round first copies the raw records back
// (reopen): 16 KiB of memmove, small beside compressing them.
func BenchmarkSeal(b *testing.B) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			var bl Builder
			fillBatch(&bl, r)
			raw := slices.Clone(bl.buf)
			comp := mustCompressor(b, c)
			opts := SealOptions{Compressor: comp, Idempotent: true, ProducerID: 1}
			bl.Seal(opts) // warm up: encoder state, scratch buffer
			b.ReportAllocs()
			b.SetBytes(int64(bl.UncompressedSize()))
			for b.Loop() {
				bl.reopen(raw)
				bl.Seal(opts)
			}
			b.ReportMetric(float64(len(bl.Sealed()))/float64(bl.UncompressedSize()), "ratio")
		})
	}
}

// perfPayload is the value the side-by-side benchmark (bench/) sends with
// every record: n random upper-case letters, as Java's ProducerPerformance
// makes them. A batch of such records is one incompressible value followed
// by repeats of it, which lz4's fast compressor gets through almost for free.
func perfPayload(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('A' + r.IntN(26))
	}
	return b
}

// BenchmarkBatchCycle is a batch's whole life in the producer, per codec, as
// the accumulator and sender run it once the Builder is kept with its batch:
// Reset with a recycled records buffer, append 1 KiB values (bench/'s
// payload) until batch.size is reached, Seal, Release. One op is one
// batch; steady state must be 0 allocs/op, compressed or not.
func BenchmarkBatchCycle(b *testing.B) {
	value := perfPayload(1024)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			comp := mustCompressor(b, c)
			opts := SealOptions{Compressor: comp, Idempotent: true, ProducerID: 1}
			var bl Builder
			buf := make([]byte, 0, benchBatchSize)
			ts := int64(1_700_000_000_000)
			cycle := func() {
				bl.Reset(buf, ts)
				for bl.TryAppend(ts, nil, value, nil, benchBatchSize) {
					ts++
				}
				bl.Seal(opts)
				buf = bl.Release()
			}
			cycle() // warm up: encoder state, scratch buffer
			b.ReportAllocs()
			b.SetBytes(int64(benchBatchSize))
			for b.Loop() {
				cycle()
			}
		})
	}
}

// BenchmarkSealLZ4Level compares lz4's fast compressor, which Java and kprod
// use at the default compression.lz4.level 9, with the high-compression
// compressor that every other level selects, on a 16 KiB batch of text-like
// records.
func BenchmarkSealLZ4Level(b *testing.B) {
	for _, level := range []int{LZ4DefaultLevel, 1, 4, 10, 17} {
		name := fmt.Sprintf("level%d", level)
		if level == LZ4DefaultLevel {
			name += "-fast"
		}
		b.Run(name, func(b *testing.B) {
			var bl Builder
			fillBatch(&bl, rand.New(rand.NewPCG(33, 34)))
			comp, err := NewCompressor(LZ4, level)
			if err != nil {
				b.Fatal(err)
			}
			opts := SealOptions{Compressor: comp}
			raw := slices.Clone(bl.buf)
			bl.Seal(opts)
			b.ReportAllocs()
			b.SetBytes(int64(bl.UncompressedSize()))
			for b.Loop() {
				bl.reopen(raw)
				bl.Seal(opts)
			}
			b.ReportMetric(float64(len(bl.Sealed()))/float64(bl.UncompressedSize()), "ratio")
		})
	}
}

func BenchmarkSetProducerState(b *testing.B) {
	var bl Builder
	fillBatch(&bl, rand.New(rand.NewPCG(35, 36)))
	wire := bl.Seal(SealOptions{})
	b.ReportAllocs()
	b.SetBytes(int64(len(wire)))
	for b.Loop() {
		if err := SetProducerState(wire, 1, 2, 3); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCRC is the CRC-32C over a 16 KiB batch, the cost Seal and
// SetProducerState pay on top of encoding.
func BenchmarkCRC(b *testing.B) {
	data := randomBytes(rand.New(rand.NewPCG(37, 38)), benchBatchSize)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		crc32.Checksum(data, castagnoli)
	}
}

func BenchmarkDecompress(b *testing.B) {
	r := rand.New(rand.NewPCG(39, 40))
	in := textish(r, benchBatchSize)
	d := mustDecompressor(b)
	for _, c := range allCodecs {
		b.Run(c.String(), func(b *testing.B) {
			z, _ := mustCompressor(b, c).AppendCompressed(nil, in)
			dst := make([]byte, 0, 2*len(in))
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				var err error
				if dst, err = d.AppendDecompressed(dst[:0], z, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The zero-allocation promise, checked in every test run rather than only
// when someone reads benchmark output. (The race detector allocates on its
// own, so the check is off under -race.)
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	r := rand.New(rand.NewPCG(41, 42))
	value := textish(r, 100)
	key := []byte("key")
	headers := []Header{{Key: "h", Value: nil}}
	var bl Builder
	bl.Reset(make([]byte, 0, benchBatchSize), 0)
	ts := int64(0)
	if n := testing.AllocsPerRun(10_000, func() {
		ts++
		if !bl.TryAppend(ts, key, value, headers, benchBatchSize) {
			bl.Reset(bl.Release(), ts)
			bl.Append(ts, key, value, headers)
		}
	}); n != 0 {
		t.Errorf("Append: %v allocs per record", n)
	}
	for _, c := range allCodecs {
		fillBatch(&bl, r)
		raw := slices.Clone(bl.buf)
		opts := SealOptions{Compressor: mustCompressor(t, c)}
		bl.Seal(opts)
		if n := testing.AllocsPerRun(50, func() { bl.reopen(raw); bl.Seal(opts) }); n != 0 {
			t.Errorf("Seal %v: %v allocs per batch", c, n)
		}
	}

	// A batch's whole life, Reset to Release, with its records buffer
	// and the Compressor kept from batch to batch, as the accumulator
	// and the producer do: nothing allocated, for every codec. The
	// values are bench/'s payload.
	big := perfPayload(1024)
	for _, c := range allCodecs {
		opts := SealOptions{Compressor: mustCompressor(t, c)}
		var bl Builder
		buf := make([]byte, 0, benchBatchSize)
		cycle := func() {
			bl.Reset(buf, ts)
			for bl.TryAppend(ts, nil, big, nil, benchBatchSize) {
				ts++
			}
			bl.Seal(opts)
			buf = bl.Release()
		}
		cycle()
		if n := testing.AllocsPerRun(50, cycle); n != 0 {
			t.Errorf("batch cycle %v: %v allocs per batch", c, n)
		}
	}
}

// reopen puts raw (a copy of buf taken before any Seal) back as the
// batch's records, uncompressed and open to Seal again: for benchmarks and
// tests that seal the same records over and over.
func (b *Builder) reopen(raw []byte) {
	b.buf = append(b.buf[:0], raw...)
	b.sealed = nil
	b.codec, b.rawLen = None, 0
}
