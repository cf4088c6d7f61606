package murmur

import (
	"math"
	"testing"
)

// Vectors from Apache Kafka's own test of Utils.murmur2,
// clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java
// (testMurmur2). They cover every tail length (0..3 leftover bytes).
var kafkaVectors = []struct {
	in   []byte
	want int32
}{
	{[]byte("21"), -973932308},
	{[]byte("foobar"), -790332482},
	{[]byte("a-little-bit-long-string"), -985981536},
	{[]byte("a-little-bit-longer-string"), -1486304829},
	{[]byte("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971},
	{[]byte{'a', 'b', 'c'}, 479470107},
}

// Vectors from librdkafka's unit test of its Java-compatible murmur2
// (src/rdmurmur2.c, unittest_murmurhashneutral2). Its expected values are
// already masked with toPositive. They add the length % 4 == 1 tail, which
// Kafka's own vectors lack.
var librdkafkaPositiveVectors = []struct {
	in   []byte
	want int32
}{
	{[]byte("kafka"), 1348980580},
	{[]byte("amqp"), 767747138},
	{[]byte("giberish123456789"), 257239820},
}

func TestMurmur2KafkaVectors(t *testing.T) {
	for _, c := range kafkaVectors {
		if got := Murmur2(c.in); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestMurmur2LibrdkafkaVectors(t *testing.T) {
	for _, c := range librdkafkaPositiveVectors {
		if got := ToPositive(Murmur2(c.in)); got != c.want {
			t.Errorf("ToPositive(Murmur2(%q)) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestTailLengthsCovered(t *testing.T) {
	seen := map[int]bool{}
	for _, c := range kafkaVectors {
		seen[len(c.in)%4] = true
	}
	for _, c := range librdkafkaPositiveVectors {
		seen[len(c.in)%4] = true
	}
	for r := range 4 {
		if !seen[r] {
			t.Errorf("no vector with length %% 4 == %d", r)
		}
	}
}

func TestToPositive(t *testing.T) {
	for _, c := range []struct{ in, want int32 }{
		{0, 0},
		{1, 1},
		{-1, math.MaxInt32},
		{math.MinInt32, 0},
		{math.MaxInt32, math.MaxInt32},
		{-973932308, -973932308 & 0x7fffffff},
	} {
		if got := ToPositive(c.in); got != c.want {
			t.Errorf("ToPositive(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestPartition(t *testing.T) {
	for _, c := range kafkaVectors {
		for _, n := range []int32{1, 2, 3, 7, 100, math.MaxInt32} {
			got := Partition(c.in, n)
			want := int32((int64(c.want) & 0x7fffffff) % int64(n))
			if got != want || got < 0 || got >= n {
				t.Errorf("Partition(%q, %d) = %d, want %d", c.in, n, got, want)
			}
		}
	}
	// Same key, same partition: the property the partitioner relies on.
	if Partition([]byte("k"), 12) != Partition([]byte("k"), 12) {
		t.Error("Partition not deterministic")
	}
}

func TestEmptyAndNilAgree(t *testing.T) {
	if Murmur2(nil) != Murmur2([]byte{}) {
		t.Error("nil and empty differ")
	}
}

func FuzzMurmur2(f *testing.F) {
	for _, c := range kafkaVectors {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if p := Partition(b, 7); p < 0 || p >= 7 {
			t.Fatalf("Partition out of range: %d", p)
		}
	})
}

func BenchmarkMurmur2(b *testing.B) {
	key := []byte("a-little-bit-longer-string")
	b.ReportAllocs()
	b.SetBytes(int64(len(key)))
	for b.Loop() {
		Murmur2(key)
	}
}
