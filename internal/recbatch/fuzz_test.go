package recbatch

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// The checked-in fuzz targets run only their seed corpus under go test; run
// e.g. `go test -run=NONE -fuzz=FuzzDecompressLZ4 -fuzztime=20s
// -fuzzminimizetime=20x ./internal/recbatch/` to explore. (The default
// minimisation budget, 60 s per new input, makes the slower codecs look
// stalled.)

const fuzzLimit = 4 << 20

func fuzzSeeds(f *testing.F, c Codec) {
	r := rand.New(rand.NewPCG(21, 22))
	comp, err := NewCompressor(c, DefaultLevel(c))
	if err != nil {
		f.Fatal(err)
	}
	for _, in := range [][]byte{{}, []byte("a"), textish(r, 1000), textish(r, 70_000), randomBytes(r, 300)} {
		z, err := comp.AppendCompressed(nil, in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(z)
		f.Add(z[:len(z)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff})
	f.Add([]byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0x73, 0xff, 0xff, 0xff, 0x7f})
}

func fuzzDecompress(f *testing.F, c Codec) {
	fuzzSeeds(f, c)
	d, err := NewDecompressor(fuzzLimit)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(d.Close)
	f.Fuzz(func(t *testing.T, in []byte) {
		if c == LZ4 {
			// Random bytes almost never carry a valid descriptor
			// checksum; fix it half the time so that block parsing and
			// decoding get explored, not just header rejection.
			in = fixLZ4DescriptorChecksum(in)
		}
		prefix := []byte("keep")
		out, err := d.AppendDecompressed(bytes.Clone(prefix), in, c)
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("dst prefix lost (err %v)", err)
		}
		if err != nil && len(out) != len(prefix) {
			t.Fatalf("error %v but dst extended by %d bytes", err, len(out)-len(prefix))
		}
		if len(out)-len(prefix) > fuzzLimit {
			t.Fatalf("%d bytes over the limit", len(out)-len(prefix))
		}
	})
}

func fixLZ4DescriptorChecksum(in []byte) []byte {
	if len(in) < 7 || in[len(in)-1]&1 == 0 {
		return in
	}
	in = bytes.Clone(in)
	end := 6
	if in[4]&0x08 != 0 {
		end += 8
	}
	if len(in) > end {
		in[end] = byte(xxh32(in[4:end], 0) >> 8)
	}
	return in
}

func FuzzDecompressGzip(f *testing.F)   { fuzzDecompress(f, Gzip) }
func FuzzDecompressSnappy(f *testing.F) { fuzzDecompress(f, Snappy) }
func FuzzDecompressLZ4(f *testing.F)    { fuzzDecompress(f, LZ4) }
func FuzzDecompressZstd(f *testing.F)   { fuzzDecompress(f, Zstd) }

// FuzzCompressRoundTrip: whatever goes in comes back out, for every codec
// at its default and extreme levels. Inputs are capped at 64 KiB to keep the
// high zstd and lz4 levels fast enough to fuzz.
func FuzzCompressRoundTrip(f *testing.F) {
	r := rand.New(rand.NewPCG(23, 24))
	f.Add([]byte{}, uint8(1), uint8(0))
	f.Add(textish(r, 5000), uint8(3), uint8(2))
	f.Add(randomBytes(r, 2000), uint8(4), uint8(1))
	f.Add(bytes.Repeat([]byte{0}, 10_000), uint8(2), uint8(0))
	d, err := NewDecompressor(fuzzLimit)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(d.Close)
	levels := map[Codec][]int{
		None:   {0},
		Gzip:   {GzipDefaultLevel, GzipMinLevel, GzipMaxLevel},
		Snappy: {0},
		LZ4:    {LZ4DefaultLevel, LZ4MinLevel, LZ4MaxLevel},
		Zstd:   {ZstdDefaultLevel, -5, 1, ZstdMaxLevel},
	}
	comps := map[[2]int]*Compressor{}
	f.Fuzz(func(t *testing.T, in []byte, codec, level uint8) {
		in = in[:min(len(in), 64<<10)]
		c := Codec(codec % 5)
		l := levels[c][int(level)%len(levels[c])]
		comp := comps[[2]int{int(c), l}]
		if comp == nil {
			var err error
			if comp, err = NewCompressor(c, l); err != nil {
				t.Fatalf("NewCompressor(%v, %d): %v", c, l, err)
			}
			comps[[2]int{int(c), l}] = comp
		}
		z, err := comp.AppendCompressed(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.AppendDecompressed(nil, z, c)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%v level %d: round trip failed: %v", c, l, err)
		}
	})
}

// FuzzBuilder builds a batch from arbitrary records, seals it with an
// arbitrary codec, and decodes it with kmsg: every field must survive.
func FuzzBuilder(f *testing.F) {
	f.Add([]byte("\x00\x05hello\x03key\x01\x02hv"), int64(1_700_000_000_000), uint8(0))
	f.Add(bytes.Repeat([]byte{0xff, 0x00, 0x10}, 50), int64(-1), uint8(3))
	f.Add([]byte{}, int64(0), uint8(4))
	d, err := NewDecompressor(fuzzLimit)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(d.Close)
	var comps [5]*Compressor
	for c := range comps {
		comps[c], _ = NewCompressor(Codec(c), DefaultLevel(Codec(c)))
	}
	f.Fuzz(func(t *testing.T, data []byte, base int64, codec uint8) {
		recs := recordsFromFuzz(data, base)
		if len(recs) == 0 {
			return
		}
		var b Builder
		b.Reset(nil, base)
		for _, r := range recs {
			b.Append(r.ts, r.key, r.value, r.headers)
		}
		wire := b.Seal(SealOptions{Compressor: comps[codec%5]})
		checkRecords(t, decodeWithKmsg(t, d, wire), base, recs)
	})
}

// recordsFromFuzz carves records out of fuzz data: a control byte says which
// of key/value/header are null, then length-prefixed chunks follow.
func recordsFromFuzz(data []byte, base int64) []testRecord {
	take := func() []byte {
		if len(data) == 0 {
			return nil
		}
		n := min(int(data[0]), len(data)-1)
		out := data[1 : 1+n]
		data = data[1+n:]
		return out
	}
	var recs []testRecord
	for len(data) > 0 && len(recs) < 1000 {
		ctl := data[0]
		data = data[1:]
		r := testRecord{ts: base}
		if len(data) >= 2 {
			r.ts = base + int64(int16(binary.LittleEndian.Uint16(data)))
			data = data[2:]
		}
		if r.key = take(); ctl&1 != 0 {
			r.key = nil
		} else if r.key == nil {
			r.key = []byte{}
		}
		if r.value = take(); ctl&2 != 0 {
			r.value = nil
		} else if r.value == nil {
			r.value = []byte{}
		}
		for range ctl >> 4 {
			h := Header{Key: string(take()), Value: take()}
			if ctl&4 != 0 {
				h.Value = nil
			} else if h.Value == nil {
				h.Value = []byte{}
			}
			r.headers = append(r.headers, h)
		}
		recs = append(recs, r)
	}
	return recs
}
