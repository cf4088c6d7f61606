package recbatch

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kprod/kprod/kerr"
)

func TestParseCodec(t *testing.T) {
	for _, c := range allCodecs {
		got, err := ParseCodec(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCodec(%q) = %v, %v", c.String(), got, err)
		}
	}
	for _, bad := range []string{"", "GZIP", "Snappy", "lz4hc", "zstandard", "producer"} {
		if _, err := ParseCodec(bad); !errors.Is(err, kerr.ErrInvalidConfig) {
			t.Errorf("ParseCodec(%q): err %v, want ErrInvalidConfig", bad, err)
		}
	}
	if s := Codec(7).String(); s != "codec(7)" {
		t.Errorf("unknown codec String %q", s)
	}
}

func TestValidateLevel(t *testing.T) {
	ok := map[Codec][]int{
		None:   {0, -5, 100},
		Snappy: {0, 99},
		Gzip:   {-1, 1, 6, 9},
		LZ4:    {1, 9, 17},
		Zstd:   {-131072, -1, 0, 3, 22},
	}
	bad := map[Codec][]int{
		Gzip: {0, -2, 10},
		LZ4:  {0, -1, 18},
		Zstd: {-131073, 23},
		7:    {0},
	}
	for c, levels := range ok {
		for _, l := range levels {
			if err := ValidateLevel(c, l); err != nil {
				t.Errorf("ValidateLevel(%v, %d): %v", c, l, err)
			}
			if _, err := NewCompressor(c, l); err != nil {
				t.Errorf("NewCompressor(%v, %d): %v", c, l, err)
			}
		}
	}
	for c, levels := range bad {
		for _, l := range levels {
			if err := ValidateLevel(c, l); !errors.Is(err, kerr.ErrInvalidConfig) {
				t.Errorf("ValidateLevel(%v, %d): err %v, want ErrInvalidConfig", c, l, err)
			}
			if _, err := NewCompressor(c, l); !errors.Is(err, kerr.ErrInvalidConfig) {
				t.Errorf("NewCompressor(%v, %d): err %v, want ErrInvalidConfig", c, l, err)
			}
		}
	}
	for c, want := range map[Codec]int{Gzip: -1, LZ4: 9, Zstd: 3, Snappy: 0, None: 0} {
		if DefaultLevel(c) != want {
			t.Errorf("DefaultLevel(%v) = %d, want %d", c, DefaultLevel(c), want)
		}
	}
}

func crossInputs() map[string][]byte {
	r := rand.New(rand.NewPCG(3, 4))
	return map[string][]byte{
		"empty":      {},
		"one":        {'x'},
		"small":      []byte("hello, kafka"),
		"text-100k":  textish(r, 100_000),
		"zeros-200k": make([]byte, 200_000),
		"random-1m":  randomBytes(r, 1<<20),
		"mixed-1m":   append(textish(r, 1<<19), randomBytes(r, 1<<19)...),
		"block-edge": textish(r, 2*lz4BlockSize), // exactly two lz4 / four xerial blocks
	}
}

// levelsToTry covers each codec's default, both ends and the Java-default
// special cases.
var levelsToTry = map[Codec][]int{
	None:   {0},
	Gzip:   {-1, 1, 9},
	Snappy: {0},
	LZ4:    {9, 1, 2, 10, 17},
	Zstd:   {3, -131072, 1, 7, 22},
}

// independentDecode decompresses with other implementations than ours.
func independentDecode(t *testing.T, c Codec, comp []byte) []byte {
	t.Helper()
	switch c {
	case None:
		return comp
	case Gzip:
		zr, err := stdgzip.NewReader(bytes.NewReader(comp))
		if err != nil {
			t.Fatalf("stdlib gzip: %v", err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("stdlib gzip: %v", err)
		}
		return out
	case Zstd:
		zd, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer zd.Close()
		out, err := zd.DecodeAll(comp, nil)
		if err != nil {
			t.Fatalf("klauspost zstd: %v", err)
		}
		return out
	case LZ4:
		out, err := io.ReadAll(lz4.NewReader(bytes.NewReader(comp)))
		if err != nil {
			t.Fatalf("pierrec lz4 reader: %v", err)
		}
		return out
	case Snappy:
		out, err := xerial.Decode(comp)
		if err != nil {
			t.Fatalf("klauspost xerial: %v", err)
		}
		return out
	}
	t.Fatalf("codec %v", c)
	return nil
}

func TestCompressionCrossCheck(t *testing.T) {
	d := mustDecompressor(t)
	for name, in := range crossInputs() {
		for _, c := range allCodecs {
			for _, level := range levelsToTry[c] {
				comp, err := NewCompressor(c, level)
				if err != nil {
					t.Fatal(err)
				}
				prefix := []byte("prefix")
				out, err := comp.AppendCompressed(bytes.Clone(prefix), in)
				if err != nil {
					t.Fatalf("%s %v/%d: %v", name, c, level, err)
				}
				if !bytes.HasPrefix(out, prefix) {
					t.Fatalf("%s %v/%d: dst prefix clobbered", name, c, level)
				}
				z := out[len(prefix):]
				if got := independentDecode(t, c, z); !bytes.Equal(got, in) {
					t.Fatalf("%s %v/%d: independent decoder got %d bytes, want %d", name, c, level, len(got), len(in))
				}
				got, err := d.AppendDecompressed([]byte("x"), z, c)
				if err != nil || !bytes.Equal(got[1:], in) || got[0] != 'x' {
					t.Fatalf("%s %v/%d: own decoder: %v", name, c, level, err)
				}
				switch c {
				case LZ4:
					checkLZ4Frame(t, z, in)
				case Snappy:
					checkXerialFrame(t, z, in)
				}
			}
		}
	}
}

// checkLZ4Frame checks the frame against what the Java client writes and
// reads: magic, FLG 0x60, BD 0x40, correct descriptor checksum, blocks of at
// most 64 KiB, stored blocks never larger than the input, end mark last.
func checkLZ4Frame(t *testing.T, z, in []byte) {
	t.Helper()
	if !bytes.HasPrefix(z, []byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82}) {
		t.Fatalf("lz4 frame header % x", z[:min(7, len(z))])
	}
	p := z[7:]
	total := 0
	for {
		w := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if w == 0 {
			break
		}
		size := int(w & 0x7fffffff)
		if size > 64<<10 {
			t.Fatalf("lz4 block of %d bytes", size)
		}
		if w&0x80000000 != 0 {
			total += size
		} else {
			blk := make([]byte, 64<<10)
			n, err := lz4.UncompressBlock(p[:size], blk)
			if err != nil {
				t.Fatal(err)
			}
			if size >= n {
				t.Fatalf("compressed block (%d) not smaller than its content (%d)", size, n)
			}
			total += n
		}
		p = p[size:]
	}
	if len(p) != 0 || total != len(in) {
		t.Fatalf("lz4 frame: %d trailing bytes, %d content bytes of %d", len(p), total, len(in))
	}
}

// checkXerialFrame walks the xerial framing by hand and decodes each inner
// block with klauspost's snappy decoders, both the lenient and the strict
// (reference-compatible) one.
func checkXerialFrame(t *testing.T, z, in []byte) {
	t.Helper()
	want := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(z, want) {
		t.Fatalf("xerial header % x", z[:min(16, len(z))])
	}
	var got []byte
	for p := z[16:]; len(p) > 0; {
		size := int(binary.BigEndian.Uint32(p))
		blk := p[4 : 4+size]
		p = p[4+size:]
		a, err := snappy.Decode(nil, blk)
		if err != nil {
			t.Fatalf("snappy.Decode: %v", err)
		}
		b, err := snappy.DecodeStrict(nil, blk)
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("snappy.DecodeStrict: %v", err)
		}
		if len(a) > 32<<10 || len(a) == 0 {
			t.Fatalf("xerial block holds %d bytes", len(a))
		}
		got = append(got, a...)
	}
	if !bytes.Equal(got, in) {
		t.Fatal("xerial blocks do not concatenate to the input")
	}
}

func TestXXH32(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02cc5d05},
		{"a", 0x550d7456},
		{"abc", 0x32d153ff},
	} {
		if got := xxh32([]byte(c.in), 0); got != c.want {
			t.Errorf("xxh32(%q) = %08x, want %08x", c.in, got, c.want)
		}
	}
	if got := byte(xxh32([]byte{lz4FLG, lz4BD}, 0) >> 8); got != lz4HeaderChecksum {
		t.Errorf("lz4 descriptor checksum %02x, constant says %02x", got, lz4HeaderChecksum)
	}
}

// Frames written by pierrec's own writer, with the features Java's reader
// understands (block and content checksums, content size, every block
// size), must decode with ours; that also checks xxh32 on long inputs.
func TestDecodeForeignLZ4(t *testing.T) {
	d := mustDecompressor(t)
	in := append(textish(rand.New(rand.NewPCG(5, 6)), 3<<20), make([]byte, 100)...)
	for _, bs := range []lz4.BlockSize{lz4.Block64Kb, lz4.Block256Kb, lz4.Block1Mb, lz4.Block4Mb} {
		for _, sums := range []bool{false, true} {
			var buf bytes.Buffer
			w := lz4.NewWriter(&buf)
			opts := []lz4.Option{lz4.BlockSizeOption(bs), lz4.BlockChecksumOption(sums), lz4.ChecksumOption(sums)}
			if sums {
				opts = append(opts, lz4.SizeOption(uint64(len(in))))
			}
			if err := w.Apply(opts...); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(in); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			frame := buf.Bytes()
			got, err := d.AppendDecompressed(nil, frame, LZ4)
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("block size %v checksums %v: %v", bs, sums, err)
			}
			if sums {
				// Flip a content byte in the last block: a checksum must catch it.
				bad := bytes.Clone(frame)
				bad[len(bad)-20] ^= 1
				if _, err := d.AppendDecompressed(nil, bad, LZ4); err == nil {
					t.Fatalf("corrupted frame accepted")
				}
			}
		}
	}
}

func TestDecodeRawSnappyFallback(t *testing.T) {
	d := mustDecompressor(t)
	in := textish(rand.New(rand.NewPCG(7, 8)), 50_000)
	got, err := d.AppendDecompressed(nil, snappy.Encode(nil, in), Snappy)
	if err != nil || !bytes.Equal(got, in) {
		t.Fatalf("raw snappy block: %v", err)
	}
	// s2-only encodings are not snappy; Java would reject them.
	s2only := s2.EncodeBetter(nil, bytes.Repeat([]byte("abcdefgh12345678"), 10_000))
	if _, err := snappy.DecodeStrict(nil, s2only); err == nil {
		t.Fatal("this input's s2 encoding decodes as plain snappy: pick an input s2 encodes with its own extensions")
	}
	if _, err := d.AppendDecompressed(nil, s2only, Snappy); err == nil {
		t.Fatal("s2 extension accepted as snappy")
	}
}

func TestDecompressLimit(t *testing.T) {
	d, err := NewDecompressor(1000)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range allCodecs {
		big, err := mustCompressor(t, c).AppendCompressed(nil, make([]byte, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.AppendDecompressed(nil, big, c); !errors.Is(err, ErrDecompressLimit) {
			t.Errorf("%v: err %v, want ErrDecompressLimit", c, err)
		}
		small, _ := mustCompressor(t, c).AppendCompressed(nil, make([]byte, 1000))
		if got, err := d.AppendDecompressed(nil, small, c); err != nil || len(got) != 1000 {
			t.Errorf("%v at the limit: %d bytes, %v", c, len(got), err)
		}
	}
}

func TestDecompressRejectsGarbage(t *testing.T) {
	d := mustDecompressor(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		good, _ := mustCompressor(t, c).AppendCompressed(nil, textish(r, 100_000))
		for i := range 200 {
			var in []byte
			switch i % 3 {
			case 0:
				in = randomBytes(r, r.IntN(200))
			case 1:
				in = good[:r.IntN(len(good))] // truncated
			case 2:
				in = bytes.Clone(good) // one byte flipped
				in[r.IntN(len(in))] ^= byte(1 + r.IntN(255))
			}
			d.AppendDecompressed(nil, in, c) // must not panic; errors expected
		}
		if _, err := d.AppendDecompressed(nil, good[:len(good)/2], c); err == nil {
			t.Errorf("%v: truncated input accepted", c)
		}
	}
	if _, err := d.AppendDecompressed(nil, nil, 6); err == nil {
		t.Error("unknown codec accepted")
	}
}

func TestCompressorConcurrent(t *testing.T) {
	d := mustDecompressor(t)
	in := textish(rand.New(rand.NewPCG(11, 12)), 40_000)
	for _, c := range allCodecs {
		comp := mustCompressor(t, c)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				var dst []byte
				for range 20 {
					var err error
					dst, err = comp.AppendCompressed(dst[:0], in)
					if err != nil {
						t.Error(err)
						return
					}
					got, err := d.AppendDecompressed(nil, dst, c)
					if err != nil || !bytes.Equal(got, in) {
						t.Errorf("%v: concurrent round trip: %v", c, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// Kafka's lz4 default level uses the fast compressor, other levels HC; HC
// should not compress worse.
func TestLZ4LevelsDiffer(t *testing.T) {
	in := textish(rand.New(rand.NewPCG(13, 14)), 200_000)
	fast, _ := mustCompressor(t, LZ4).AppendCompressed(nil, in)
	hcComp, err := NewCompressor(LZ4, 12)
	if err != nil {
		t.Fatal(err)
	}
	hc, _ := hcComp.AppendCompressed(nil, in)
	if len(hc) >= len(fast) {
		t.Errorf("lz4 level 12 (%d bytes) not smaller than default (%d)", len(hc), len(fast))
	}
	if hcComp.Level() != 12 || hcComp.Codec() != LZ4 {
		t.Errorf("Level/Codec accessors: %d %v", hcComp.Level(), hcComp.Codec())
	}

	// The default level is exactly the fast compressor, as in Java: one
	// block (under 64 KiB) framed around what lz4.Compressor makes of it.
	small := in[:16<<10]
	frame, _ := mustCompressor(t, LZ4).AppendCompressed(nil, small)
	var fc lz4.Compressor
	want := make([]byte, lz4.CompressBlockBound(len(small)))
	n, err := fc.CompressBlock(small, want)
	if err != nil || n == 0 {
		t.Fatalf("lz4.Compressor: %d, %v", n, err)
	}
	if len(frame) != 7+4+n+4 || !bytes.Equal(frame[11:11+n], want[:n]) {
		t.Errorf("default level: frame of %d bytes is not the fast compressor's block of %d", len(frame), n)
	}
}

// maxCompressedLen is what Seal sizes the Compressor's scratch buffers with;
// if an encoder ever needed more, it would re-allocate that buffer (and the
// runtime zero the new one) in the middle of sealing. Incompressible data
// is the worst case, at every block boundary of every codec.
func TestMaxCompressedLenNoGrowth(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	inputs := crossInputs()
	for _, n := range []int{2, 15, 255, 1024, 16 << 10, xerialBlockSize - 1, xerialBlockSize + 1,
		lz4BlockSize - 1, lz4BlockSize, lz4BlockSize + 1, 128<<10 + 1, 3*lz4BlockSize + 7} {
		inputs["random-"+strconv.Itoa(n)] = randomBytes(r, n)
	}
	for name, in := range inputs {
		for _, c := range allCodecs {
			for _, level := range levelsToTry[c] {
				comp, err := NewCompressor(c, level)
				if err != nil {
					t.Fatal(err)
				}
				bound := comp.maxCompressedLen(len(in))
				dst := make([]byte, 3, 3+bound)
				out, err := comp.AppendCompressed(dst, in)
				if err != nil {
					t.Fatalf("%s %v/%d: %v", name, c, level, err)
				}
				if cap(out) != cap(dst) || &out[0] != &dst[0] {
					t.Errorf("%s %v/%d: %d bytes in, %d out: grew a buffer of %d spare bytes",
						name, c, level, len(in), len(out)-3, bound)
				}
			}
		}
	}
}
