package recbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is one record as the caller hands it to Append.
type testRecord struct {
	ts      int64
	key     []byte
	value   []byte
	headers []Header
}

var allCodecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

func mustCompressor(t testing.TB, c Codec) *Compressor {
	t.Helper()
	comp, err := NewCompressor(c, DefaultLevel(c))
	if err != nil {
		t.Fatalf("NewCompressor(%v): %v", c, err)
	}
	return comp
}

func mustDecompressor(t testing.TB) *Decompressor {
	t.Helper()
	d, err := NewDecompressor(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// textish returns n bytes of compressible, log-line-like text.
func textish(r *rand.Rand, n int) []byte {
	words := []string{"kafka", "producer", "record", "batch", "partition", "offset", "leader", "epoch", "{\"id\":", "\"ts\":", ", ", "\n"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		if r.IntN(4) == 0 {
			fmt.Fprintf(&b, "%d", r.IntN(100000))
		}
	}
	return b.Bytes()[:n]
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Cases exercising every encoding corner: null vs empty keys and values,
// null header values, empty header keys, negative and positive timestamp
// deltas, varint length boundaries, a 1 MiB value (several xerial, lz4 and
// zstd blocks), incompressible data, and many records.
func testCases() map[string]struct {
	base    int64
	records []testRecord
} {
	r := rand.New(rand.NewPCG(1, 2))
	const base = 1_700_000_000_000
	cases := map[string]struct {
		base    int64
		records []testRecord
	}{}

	cases["single"] = struct {
		base    int64
		records []testRecord
	}{base, []testRecord{{ts: base, key: []byte("k"), value: []byte("v")}}}

	mixed := []testRecord{
		{ts: base, key: nil, value: []byte("null key")},
		{ts: base + 5, key: []byte{}, value: []byte("empty key")},
		{ts: base - 3, key: []byte("null value"), value: nil},
		{ts: base + 1, key: []byte("empty value"), value: []byte{}},
		{ts: base, key: nil, value: nil},
		{ts: base + 1000, key: []byte("h"), value: []byte("headers"), headers: []Header{
			{Key: "a", Value: []byte("1")},
			{Key: "null", Value: nil},
			{Key: "empty", Value: []byte{}},
			{Key: "", Value: []byte("empty key")},
			{Key: "dup", Value: []byte("x")},
			{Key: "dup", Value: []byte("y")},
		}},
		{ts: base - 1_000_000_000, key: []byte("far past"), value: []byte("negative delta, multi-byte varint")},
		{ts: base + 1<<40, key: []byte("far future"), value: []byte("large positive delta")},
		{ts: base + 2, key: bytes.Repeat([]byte("K"), 63), value: bytes.Repeat([]byte("V"), 64)},     // varint 1/2-byte boundary
		{ts: base + 3, key: bytes.Repeat([]byte("K"), 8191), value: bytes.Repeat([]byte("V"), 8192)}, // 2/3-byte boundary
	}
	cases["mixed"] = struct {
		base    int64
		records []testRecord
	}{base, mixed}

	large := []testRecord{
		{ts: base, key: []byte("small-before"), value: []byte("x")},
		{ts: base + 1, key: []byte("large-text"), value: textish(r, 1<<20)},
		{ts: base + 2, key: []byte("large-random"), value: randomBytes(r, 1<<20)},
		{ts: base + 3, key: nil, value: nil, headers: []Header{{Key: "big", Value: textish(r, 100_000)}}},
	}
	cases["large"] = struct {
		base    int64
		records []testRecord
	}{base, large}

	var many []testRecord
	for i := range 10_000 {
		rec := testRecord{ts: base + int64(r.IntN(2000)) - 1000, value: textish(r, r.IntN(200))}
		if i%3 != 0 {
			rec.key = fmt.Appendf(nil, "key-%d", i%97)
		}
		if i%7 == 0 {
			rec.headers = []Header{{Key: "trace", Value: fmt.Appendf(nil, "%x", r.Uint64())}}
		}
		many = append(many, rec)
	}
	cases["many"] = struct {
		base    int64
		records []testRecord
	}{base, many}

	// A base that is not any record's timestamp: the deltas must still be
	// relative to it, and maxTimestamp the true maximum.
	cases["base-not-first"] = struct {
		base    int64
		records []testRecord
	}{0, []testRecord{{ts: -5, value: []byte("a")}, {ts: 7, value: []byte("b")}, {ts: -9, value: []byte("c")}}}
	return cases
}

// decodedBatch is a batch decoded by kmsg, the independent decoder.
type decodedBatch struct {
	batch   kmsg.RecordBatch
	records []kmsg.Record
}

// decodeWithKmsg parses wire with kmsg, checks every length and the CRC
// (recomputed with hash/crc32 here, not with the package's code), and
// parses each record, checking that its length prefix is exact by
// re-encoding it with kmsg.
func decodeWithKmsg(t testing.TB, d *Decompressor, wire []byte) decodedBatch {
	t.Helper()
	var out decodedBatch
	rb := &out.batch
	if err := rb.ReadFrom(wire); err != nil {
		t.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
	}
	if int(rb.Length) != len(wire)-12 {
		t.Fatalf("batchLength %d, wire %d bytes", rb.Length, len(wire))
	}
	if len(rb.Records) != len(wire)-HeaderSize {
		t.Fatalf("records section %d bytes, want %d", len(rb.Records), len(wire)-HeaderSize)
	}
	if rb.Magic != 2 {
		t.Fatalf("magic %d", rb.Magic)
	}
	if want := crc32.Checksum(wire[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(rb.CRC) != want {
		t.Fatalf("crc %08x, want %08x", uint32(rb.CRC), want)
	}
	// kmsg's encoder must reproduce our header byte for byte.
	if re := rb.AppendTo(nil); !bytes.Equal(re, wire) {
		t.Fatalf("kmsg re-encoding differs from our batch")
	}
	raw, err := d.AppendDecompressed(nil, rb.Records, Codec(rb.Attributes&7))
	if err != nil {
		t.Fatalf("decompress %v: %v", Codec(rb.Attributes&7), err)
	}
	for len(raw) > 0 {
		l, n := binary.Varint(raw) // zigzag, as Kafka's varint
		if n <= 0 || l < 0 || int64(len(raw)-n) < l {
			t.Fatalf("record %d: bad length prefix", len(out.records))
		}
		end := n + int(l)
		var rec kmsg.Record
		if err := rec.ReadFrom(raw[:end]); err != nil {
			t.Fatalf("record %d: kmsg.Record.ReadFrom: %v", len(out.records), err)
		}
		if int64(rec.Length) != l {
			t.Fatalf("record %d: length %d vs prefix %d", len(out.records), rec.Length, l)
		}
		if re := rec.AppendTo(nil); !bytes.Equal(re, raw[:end]) {
			t.Fatalf("record %d: length prefix does not match its contents", len(out.records))
		}
		out.records = append(out.records, rec)
		raw = raw[end:]
	}
	if int(rb.NumRecords) != len(out.records) {
		t.Fatalf("recordCount %d, decoded %d records", rb.NumRecords, len(out.records))
	}
	if rb.LastOffsetDelta != rb.NumRecords-1 {
		t.Fatalf("lastOffsetDelta %d with %d records", rb.LastOffsetDelta, rb.NumRecords)
	}
	return out
}

func sameNullable(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func checkRecords(t testing.TB, got decodedBatch, base int64, want []testRecord) {
	t.Helper()
	if len(got.records) != len(want) {
		t.Fatalf("%d records, want %d", len(got.records), len(want))
	}
	maxTs := int64(math.MinInt64)
	for i, w := range want {
		maxTs = max(maxTs, w.ts)
		g := got.records[i]
		if g.Attributes != 0 || g.OffsetDelta != int32(i) || g.TimestampDelta64 != w.ts-base {
			t.Fatalf("record %d: attrs %d offsetDelta %d tsDelta %d, want 0 %d %d",
				i, g.Attributes, g.OffsetDelta, g.TimestampDelta64, i, w.ts-base)
		}
		if !sameNullable(g.Key, w.key) {
			t.Fatalf("record %d: key %q (nil %v), want %q (nil %v)", i, trunc(g.Key), g.Key == nil, trunc(w.key), w.key == nil)
		}
		if !sameNullable(g.Value, w.value) {
			t.Fatalf("record %d: value differs (len %d nil %v, want len %d nil %v)", i, len(g.Value), g.Value == nil, len(w.value), w.value == nil)
		}
		if len(g.Headers) != len(w.headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(g.Headers), len(w.headers))
		}
		for j, wh := range w.headers {
			gh := g.Headers[j]
			if gh.Key != wh.Key || !sameNullable(gh.Value, wh.Value) {
				t.Fatalf("record %d header %d: %q=%q (nil %v), want %q=%q (nil %v)",
					i, j, gh.Key, trunc(gh.Value), gh.Value == nil, wh.Key, trunc(wh.Value), wh.Value == nil)
			}
		}
	}
	if got.batch.FirstTimestamp != base || got.batch.MaxTimestamp != maxTs {
		t.Fatalf("timestamps first %d max %d, want %d %d", got.batch.FirstTimestamp, got.batch.MaxTimestamp, base, maxTs)
	}
}

func trunc(b []byte) []byte {
	if len(b) > 20 {
		return b[:20]
	}
	return b
}

// expectedUncompressed encodes the batch with kmsg's encoder, independently
// of ours; an uncompressed seal must equal it byte for byte.
func expectedUncompressed(base int64, recs []testRecord, pid int64, epoch int16, seq int32, attrs int16) []byte {
	var records []byte
	maxTs := int64(math.MinInt64)
	for i, r := range recs {
		maxTs = max(maxTs, r.ts)
		kr := kmsg.Record{TimestampDelta64: r.ts - base, OffsetDelta: int32(i), Key: r.key, Value: r.value}
		for _, h := range r.headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // with Length 0 the prefix is one byte
		records = kr.AppendTo(records)
	}
	rb := kmsg.RecordBatch{
		Length:               int32(HeaderSize - 12 + len(records)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       base,
		MaxTimestamp:         maxTs,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	wire := rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(wire[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

func build(t testing.TB, b *Builder, base int64, recs []testRecord) {
	t.Helper()
	b.Reset(make([]byte, 0, 1024), base)
	for i, r := range recs {
		before := b.UncompressedSize()
		size := RecordSize(int32(i), r.ts-base, r.key, r.value, r.headers)
		if od := b.Append(r.ts, r.key, r.value, r.headers); od != int32(i) {
			t.Fatalf("Append returned offset delta %d, want %d", od, i)
		}
		if grew := b.UncompressedSize() - before; grew != size {
			t.Fatalf("record %d: RecordSize %d, Append wrote %d", i, size, grew)
		}
	}
	if b.NumRecords() != len(recs) {
		t.Fatalf("NumRecords %d, want %d", b.NumRecords(), len(recs))
	}
}

func TestGoldenAllCodecs(t *testing.T) {
	d := mustDecompressor(t)
	for name, tc := range testCases() {
		for _, codec := range allCodecs {
			for _, idem := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/idempotent=%v", name, codec, idem), func(t *testing.T) {
					var b Builder
					build(t, &b, tc.base, tc.records)
					opts := SealOptions{Compressor: mustCompressor(t, codec)}
					wantPID, wantEpoch, wantSeq := int64(-1), int16(-1), int32(-1)
					wantAttrs := int16(codec)
					if idem {
						opts.Idempotent, opts.Transactional = true, true
						opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 1<<40+7, 3, math.MaxInt32-5
						wantPID, wantEpoch, wantSeq = opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence
						wantAttrs |= 0x10
					}
					wire := b.Seal(opts)
					if b.Size() != len(wire) || !bytes.Equal(b.Sealed(), wire) {
						t.Fatalf("Size %d / Sealed disagree with %d sealed bytes", b.Size(), len(wire))
					}
					got := decodeWithKmsg(t, d, wire)
					rb := got.batch
					if rb.FirstOffset != 0 || rb.PartitionLeaderEpoch != -1 || rb.Attributes != wantAttrs ||
						rb.ProducerID != wantPID || rb.ProducerEpoch != wantEpoch || rb.FirstSequence != wantSeq {
						t.Fatalf("header: %+v", rb)
					}
					checkRecords(t, got, tc.base, tc.records)
					if codec == None {
						want := expectedUncompressed(tc.base, tc.records, wantPID, wantEpoch, wantSeq, wantAttrs)
						if !bytes.Equal(wire, want) {
							t.Fatalf("uncompressed batch differs from kmsg's encoding")
						}
						if b.CompressionRatio() != 1 {
							t.Fatalf("CompressionRatio %v for an uncompressed batch", b.CompressionRatio())
						}
					}
				})
			}
		}
	}
}

func TestSetProducerState(t *testing.T) {
	d := mustDecompressor(t)
	recs := testCases()["mixed"].records
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			var b Builder
			build(t, &b, recs[0].ts, recs)
			wire := b.Seal(SealOptions{Compressor: mustCompressor(t, codec), Transactional: true})
			before := bytes.Clone(wire)

			// First drain: the idempotent producer assigns state.
			if err := SetProducerState(wire, 42, 0, 1000); err != nil {
				t.Fatal(err)
			}
			got := decodeWithKmsg(t, d, wire)
			if got.batch.ProducerID != 42 || got.batch.ProducerEpoch != 0 || got.batch.FirstSequence != 1000 {
				t.Fatalf("state after first patch: %+v", got.batch)
			}
			checkRecords(t, got, recs[0].ts, recs)
			// Only the three fields and the CRC changed.
			for i := range wire {
				inPatched := (i >= 43 && i < 57) || (i >= 17 && i < 21)
				if !inPatched && wire[i] != before[i] {
					t.Fatalf("byte %d changed", i)
				}
			}

			// KIP-360 epoch bump before a retry, and back to no state.
			if err := SetProducerState(wire, 42, math.MaxInt16, 0); err != nil {
				t.Fatal(err)
			}
			got = decodeWithKmsg(t, d, wire)
			if got.batch.ProducerEpoch != math.MaxInt16 || got.batch.FirstSequence != 0 {
				t.Fatalf("state after epoch bump: %+v", got.batch)
			}
			if err := SetProducerState(wire, NoProducerID, NoProducerEpoch, NoSequence); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(wire, before) {
				t.Fatal("restoring the original state did not restore the original bytes")
			}
			// Same result as sealing with the state in the first place.
			b2 := Builder{}
			build(t, &b2, recs[0].ts, recs)
			direct := b2.Seal(SealOptions{Compressor: mustCompressor(t, codec), Transactional: true,
				Idempotent: true, ProducerID: 9, ProducerEpoch: 8, BaseSequence: 7})
			if err := SetProducerState(wire, 9, 8, 7); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(wire, direct) {
				t.Fatal("patched batch differs from one sealed with the same state")
			}
		})
	}
}

func TestSetProducerStateRejectsMalformed(t *testing.T) {
	var b Builder
	b.Reset(nil, 0)
	b.Append(0, nil, []byte("v"), nil)
	wire := b.Seal(SealOptions{})
	for name, bad := range map[string][]byte{
		"nil":       nil,
		"short":     wire[:HeaderSize-1],
		"truncated": wire[:len(wire)-1],
		"magic":     append(append([]byte{}, wire[:16]...), append([]byte{1}, wire[17:]...)...),
	} {
		if err := SetProducerState(bad, 1, 1, 1); !errors.Is(err, ErrMalformedBatch) {
			t.Errorf("%s: err %v, want ErrMalformedBatch", name, err)
		}
	}
}

func TestVarint(t *testing.T) {
	// Kafka's zigzag varint is the same as encoding/binary's signed varint.
	vals := []int64{0, 1, -1, 2, -2, 63, -64, 64, -65, 8191, 8192, -8193, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64}
	for _, v := range vals {
		want := binary.AppendVarint(nil, v)
		if varintLen(v) != len(want) {
			t.Errorf("varintLen(%d) = %d, want %d", v, varintLen(v), len(want))
		}
		got := make([]byte, varintLen(v))
		if n := putVarint(got, v); n != len(want) || !bytes.Equal(got, want) {
			t.Errorf("putVarint(%d) = %x, want %x", v, got, want)
		}
	}
}

// With a compression estimate, the records count at ratio*1.05 in the
// size that TryAppend and IsFull judge by.
func TestCompressionEstimateSize(t *testing.T) {
	var b Builder
	b.Reset(nil, 0)
	b.Append(0, nil, make([]byte, 1000), nil)
	raw := b.UncompressedSize() - HeaderSize
	b.SetCompressionEstimate(0.5)
	if want := HeaderSize + int(float32(raw)*0.5*1.05); b.Size() != want {
		t.Fatalf("estimated size %d, want %d", b.Size(), want)
	}
	b.Seal(SealOptions{})
	if !b.IsFull(math.MaxInt32) {
		t.Fatal("a sealed batch is not full")
	}
}

// TryAppend follows Java's rule for room (the first record always fits)
// and appends exactly as Append does.
func TestTryAppend(t *testing.T) {
	var b, ref Builder
	b.Reset(make([]byte, 0, 128), 100)
	ref.Reset(make([]byte, 0, 128), 100)
	big := make([]byte, 10_000)
	if !b.TryAppend(100, nil, big, nil, 100) {
		t.Fatal("first record refused")
	}
	ref.Append(100, nil, big, nil)
	if b.TryAppend(100, nil, []byte("x"), nil, 100) {
		t.Fatal("second record accepted over the limit")
	}
	if b.NumRecords() != 1 || !bytes.Equal(b.Seal(SealOptions{}), ref.Seal(SealOptions{})) {
		t.Fatal("a refused record changed the batch")
	}

	b.Reset(nil, 100)
	ref.Reset(nil, 100)
	hdr := []Header{{Key: "h", Value: []byte("hv")}}
	b.TryAppend(100, []byte("k"), []byte("v"), hdr, 1<<20)
	ref.Append(100, []byte("k"), []byte("v"), hdr)
	exact := b.UncompressedSize() + RecordSize(1, 5, []byte("k2"), nil, nil)
	if b.TryAppend(105, []byte("k2"), nil, nil, exact-1) {
		t.Fatal("record accepted one byte over the limit")
	}
	if !b.TryAppend(105, []byte("k2"), nil, nil, exact) {
		t.Fatal("record refused at the exact limit")
	}
	ref.Append(105, []byte("k2"), nil, nil)
	if got, want := b.Seal(SealOptions{}), ref.Seal(SealOptions{}); !bytes.Equal(got, want) {
		t.Fatalf("TryAppend built\n%x\nAppend built\n%x", got, want)
	}
	if b.TryAppend(0, nil, nil, nil, math.MaxInt32) {
		t.Fatal("a sealed batch took a record")
	}
}

func TestAppendAfterSealPanics(t *testing.T) {
	var b Builder
	b.Reset(nil, 0)
	b.Append(0, nil, nil, nil)
	b.Seal(SealOptions{})
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	b.Append(0, nil, nil, nil)
}

func TestResealAndReuse(t *testing.T) {
	d := mustDecompressor(t)
	recs := testCases()["mixed"].records
	var b Builder
	for round := range 3 {
		for _, codec := range allCodecs {
			build(t, &b, recs[0].ts, recs)
			wire := b.Seal(SealOptions{Compressor: mustCompressor(t, codec)})
			if codec != None && b.CompressionRatio() >= 1 {
				t.Errorf("round %d %v: ratio %v on compressible data", round, codec, b.CompressionRatio())
			}
			checkRecords(t, decodeWithKmsg(t, d, wire), recs[0].ts, recs)
			// Sealing again, differently, gives a valid batch too, with
			// the new producer state and the records as first sealed:
			// compressed at most once, by the first compressing Seal.
			wire = b.Seal(SealOptions{Compressor: mustCompressor(t, Gzip), Idempotent: true, ProducerID: 1})
			checkRecords(t, decodeWithKmsg(t, d, wire), recs[0].ts, recs)
			want := codec
			if codec == None {
				want = Gzip
			}
			if got := Codec(binary.BigEndian.Uint16(wire[offAttributes:]) & attrCodecMask); got != want {
				t.Errorf("round %d: resealed %v batch has codec %v", round, codec, got)
			}
			if pid := int64(binary.BigEndian.Uint64(wire[offProducerID:])); pid != 1 {
				t.Errorf("round %d %v: resealed with producer id %d, want 1", round, codec, pid)
			}
			buf := b.Release()
			if len(buf) != 0 || cap(buf) == 0 {
				t.Fatalf("Release returned len %d cap %d", len(buf), cap(buf))
			}
		}
	}
}

func TestEmptyBatch(t *testing.T) {
	var b Builder
	b.Reset(nil, 123)
	wire := b.Seal(SealOptions{})
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(wire); err != nil {
		t.Fatal(err)
	}
	if len(wire) != HeaderSize || rb.NumRecords != 0 || rb.LastOffsetDelta != -1 || rb.MaxTimestamp != 123 {
		t.Fatalf("empty batch: %d bytes %+v", len(wire), rb)
	}
}

func TestResetSmallBuffer(t *testing.T) {
	var b Builder
	b.Reset(make([]byte, 0, 10), 0) // smaller than a header
	b.Append(0, []byte("k"), []byte("v"), nil)
	d := mustDecompressor(t)
	checkRecords(t, decodeWithKmsg(t, d, b.Seal(SealOptions{})), 0, []testRecord{{ts: 0, key: []byte("k"), value: []byte("v")}})
}

// A records buffer of RecordsCapacity(limit, ratio) is never outgrown by
// a batch that TryAppend fills up to limit with that compression
// estimate, nor one of a capacity EstimateForCapacity was asked about.
func TestRecordsCapacityHoldsTheBatch(t *testing.T) {
	const limit = 16384
	for _, ratio := range []float32{0.0595, 0.1, 0.3, 0.7, 0.95, 1} {
		for _, size := range []int{1, 10, 100, 1000} {
			for _, capacity := range []int{RecordsCapacity(limit, ratio), 2 * limit, 16 * limit} {
				est := max(ratio, EstimateForCapacity(limit, capacity))
				buf := make([]byte, 0, capacity)
				var b Builder
				b.Reset(buf, 0)
				b.SetCompressionEstimate(est)
				val := make([]byte, size)
				n := 0
				for b.TryAppend(int64(n), nil, val, nil, limit) {
					n++
				}
				if &b.buf[:1][0] != &buf[:1][0] {
					t.Fatalf("ratio %v (estimate %v), %d-byte values, buffer %d: outgrown after %d records (%d bytes)",
						ratio, est, size, capacity, n, len(b.buf))
				}
				if n == 0 {
					t.Fatal("no record appended")
				}
			}
		}
	}
}

// A compressed batch lives in the buffer it was given, as an uncompressed
// one does: the accumulator charges that buffer to buffer.memory, and a
// second, uncharged buffer per batch in flight would let the real memory
// reach twice buffer.memory. Incompressible records grow it instead.
func TestCompressedSealInPlace(t *testing.T) {
	d := mustDecompressor(t)
	recs := testCases()["mixed"].records
	r := rand.New(rand.NewPCG(41, 42))
	noise := []testRecord{{ts: 7, value: randomBytes(r, 4000)}}
	for _, codec := range allCodecs {
		if codec == None {
			continue
		}
		var b Builder
		buf := make([]byte, 0, 64<<10) // room for every record
		b.Reset(buf, recs[0].ts)
		for _, rec := range recs {
			b.Append(rec.ts, rec.key, rec.value, rec.headers)
		}
		raw := b.UncompressedSize()
		wire := b.Seal(SealOptions{Compressor: mustCompressor(t, codec)})
		if &wire[0] != &buf[:1][0] || cap(wire) != cap(buf) {
			t.Errorf("%v: the sealed batch is not in the records buffer", codec)
		}
		if b.UncompressedSize() != raw || b.CompressionRatio() >= 1 || len(wire) >= raw {
			t.Errorf("%v: %d bytes sealed from %d; UncompressedSize %d, ratio %v",
				codec, len(wire), raw, b.UncompressedSize(), b.CompressionRatio())
		}
		checkRecords(t, decodeWithKmsg(t, d, wire), recs[0].ts, recs)
		if back := b.Release(); &back[:1][0] != &buf[:1][0] {
			t.Errorf("%v: Release returned another buffer", codec)
		}

		// Records that do not compress fit no longer: the buffer grows.
		b.Reset(make([]byte, 0, 4096+HeaderSize), 7)
		b.Append(7, nil, noise[0].value, nil)
		wire = b.Seal(SealOptions{Compressor: mustCompressor(t, codec)})
		checkRecords(t, decodeWithKmsg(t, d, wire), 7, noise)
	}
}

// TryAppendSized with the record's FieldsSize writes what Append writes,
// and RecordSizeFields is RecordSize: the sizes Send computes once for
// several uses are the sizes the batch is built with.
func TestTryAppendSizedMatchesAppend(t *testing.T) {
	for name, tc := range testCases() {
		var want, got Builder
		build(t, &want, tc.base, tc.records)
		got.Reset(make([]byte, 0, 1024), tc.base)
		for i, r := range tc.records {
			f := FieldsSize(r.key, r.value, r.headers)
			if a, b := RecordSizeFields(int32(i), r.ts-tc.base, f), RecordSize(int32(i), r.ts-tc.base, r.key, r.value, r.headers); a != b {
				t.Fatalf("%s record %d: RecordSizeFields %d, RecordSize %d", name, i, a, b)
			}
			if !got.TryAppendSized(r.ts, r.key, r.value, r.headers, f, 1<<30) {
				t.Fatalf("%s record %d: TryAppendSized refused it under a limit of 1 GiB", name, i)
			}
		}
		if w, g := want.Seal(SealOptions{}), got.Seal(SealOptions{}); !bytes.Equal(w, g) {
			t.Fatalf("%s: TryAppendSized built %x, Append %x", name, g, w)
		}
	}
}
