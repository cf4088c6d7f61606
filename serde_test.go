package kprod

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/recbatch"
)

func TestSerializers(t *testing.T) {
	s := "héllo"
	for _, tt := range []struct {
		name string
		got  func() ([]byte, error)
		want string // hex; "null" for nil
	}{
		{"string", func() ([]byte, error) { return StringSerializer{}.Serialize("t", "héllo") }, "68c3a96c6c6f"},
		{"empty string", func() ([]byte, error) { return StringSerializer{}.Serialize("t", "") }, ""},
		{"nullable string", func() ([]byte, error) { return Nullable[string](StringSerializer{}).Serialize("t", &s) }, "68c3a96c6c6f"},
		{"nullable nil", func() ([]byte, error) { return Nullable[string](StringSerializer{}).Serialize("t", nil) }, "null"},
		{"bytes", func() ([]byte, error) { return BytesSerializer{}.Serialize("t", []byte{1, 2}) }, "0102"},
		{"bytes nil", func() ([]byte, error) { return BytesSerializer{}.Serialize("t", nil) }, "null"},
		{"int16", func() ([]byte, error) { return Int16Serializer{}.Serialize("t", -2) }, "fffe"},
		{"int32", func() ([]byte, error) { return Int32Serializer{}.Serialize("t", 0x01020304) }, "01020304"},
		{"int32 negative", func() ([]byte, error) { return Int32Serializer{}.Serialize("t", -1) }, "ffffffff"},
		{"int64", func() ([]byte, error) { return Int64Serializer{}.Serialize("t", math.MinInt64) }, "8000000000000000"},
		{"float32", func() ([]byte, error) { return Float32Serializer{}.Serialize("t", 1.5) }, "3fc00000"},
		{"float64", func() ([]byte, error) { return Float64Serializer{}.Serialize("t", -0.1) }, "bfb999999999999a"},
		{"json", func() ([]byte, error) {
			return JSONSerializer[map[string]int]{}.Serialize("t", map[string]int{"a": 1})
		}, hex.EncodeToString([]byte(`{"a":1}`))},
		{"json nil pointer", func() ([]byte, error) { return JSONSerializer[*int]{}.Serialize("t", nil) }, "null"},
		{"json <>& as Jackson writes them", func() ([]byte, error) {
			return JSONSerializer[string]{}.Serialize("t", "a<b>&c")
		}, hex.EncodeToString([]byte(`"a<b>&c"`))},
	} {
		b, err := tt.got()
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got := hex.EncodeToString(b)
		if b == nil {
			got = "null"
		}
		if got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	if _, err := (JSONSerializer[float64]{}).Serialize("t", math.Inf(1)); err == nil {
		t.Error("JSON of +Inf: no error")
	}
}

type point struct {
	X, Y int
}

// TestTypedProducer sends typed records and reads the bytes back.
func TestTypedProducer(t *testing.T) {
	c := newFake(t, 3)
	p := newTestProducer(t, testConfig(c))
	tp := NewTypedProducer[string, point](p, StringSerializer{}, JSONSerializer[point]{})
	if tp.Producer() != p {
		t.Fatal("Producer() is not the producer given")
	}
	r := &TypedRecord[string, point]{Topic: "t", Key: "k1", Value: point{1, 2}, Headers: []Header{{Key: "h", Value: []byte("v")}}}
	if err := tp.SendSync(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if r.Offset != 0 || r.Timestamp.IsZero() {
		t.Fatalf("outcome not filled in: offset %d ts %v", r.Offset, r.Timestamp)
	}
	r2 := (&TypedRecord[string, point]{Topic: "t", Key: "k2", Value: point{3, 4}}).ToPartition(2)
	if err := tp.SendSync(context.Background(), r2); err != nil || r2.Partition != 2 {
		t.Fatalf("explicit partition: %v, partition %d", err, r2.Partition)
	}
	cl := newKgo(t, c)
	got := map[string]string{}
	for len(got) < 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fs := cl.PollFetches(ctx)
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("read back %v", got)
		}
		for _, kr := range fs.Records() {
			got[string(kr.Key)] = string(kr.Value)
			if string(kr.Key) == "k1" && (kr.Partition != r.Partition || len(kr.Headers) != 1) {
				t.Errorf("k1: partition %d (callback said %d), headers %v", kr.Partition, r.Partition, kr.Headers)
			}
		}
	}
	if got["k1"] != `{"X":1,"Y":2}` || got["k2"] != `{"X":3,"Y":4}` {
		t.Fatalf("read back %v", got)
	}
}

type failing struct{}

func (failing) Serialize(_ string, v int32) ([]byte, error) {
	switch v {
	case -1:
		return nil, errBadValue
	case -2:
		panic("serializer bug")
	}
	return Int32Serializer{}.Serialize("", v)
}

var errBadValue = errors.New("negative values are not allowed")

// TestTypedProducerSerializationErrors: a serializer error fails only its
// record, with a *SerializationError, and reaches the interceptors.
func TestTypedProducerSerializationErrors(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	var acks eventLog
	cfg.Interceptors = []Interceptor{InterceptorFuncs{
		Send: func(r *Record) *Record { acks.add("send"); return r },
		Ack: func(r *Record, err error) {
			acks.add("ack %s %v", r.Topic, errors.Is(err, ErrSerialization))
		},
	}}
	p := newTestProducer(t, cfg)
	tp := NewTypedProducer[int32, float64](p, failing{}, Float64Serializer{})
	o := newOutcomes(t)
	var recs []*TypedRecord[int32, float64]
	errs := map[*TypedRecord[int32, float64]]error{}
	for i, k := range []int32{1, -1, 2, -2, 3} {
		r := &TypedRecord[int32, float64]{Topic: "t", Key: k, Value: float64(i)}
		recs = append(recs, r)
		cb := o.cb()
		tp.Send(context.Background(), r, func(cr *TypedRecord[int32, float64], err error) {
			if cr != r {
				t.Errorf("callback got %p, want %p", cr, r)
			}
			o.mu.Lock()
			errs[r] = err
			o.mu.Unlock()
			cb(&Record{}, err)
		})
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.wait(t, 10*time.Second)
	for i, r := range recs {
		err := errs[r]
		if r.Key >= 0 {
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
			continue
		}
		var se *SerializationError
		if !errors.As(err, &se) || !errors.Is(err, ErrSerialization) || !se.Key || se.Topic != "t" {
			t.Errorf("record %d: got %v, want a key *SerializationError", i, err)
		}
		if r.Key == -1 && !errors.Is(err, errBadValue) {
			t.Errorf("record %d: %v does not wrap the serializer's error", i, err)
		}
	}
	// The three good records are at offsets 0, 1, 2.
	if recs[0].Offset != 0 || recs[2].Offset != 1 || recs[4].Offset != 2 {
		t.Errorf("offsets %d %d %d", recs[0].Offset, recs[2].Offset, recs[4].Offset)
	}
	want := []string{"send", "ack t true", "send", "ack t true", "send"}
	evs := acks.get()
	if len(evs) != 8 || !slices.Equal(evs[:5], want) {
		t.Errorf("interceptor events %q, want %q then 3 acks", evs, want)
	}
	// As in Java's doSend, they count as errors.
	if m := p.Metrics(); m.RecordErrorTotal != 2 {
		t.Errorf("record-error-total %d, want 2 (the records whose key did not serialize)", m.RecordErrorTotal)
	}

	// A value serializer error says "value".
	jp := NewTypedProducer[[]byte, float64](p, BytesSerializer{}, JSONSerializer[float64]{})
	err := jp.SendSync(context.Background(), &TypedRecord[[]byte, float64]{Topic: "t", Value: math.NaN()})
	var se *SerializationError
	var ue *json.UnsupportedValueError
	if !errors.As(err, &se) || se.Key || !errors.As(err, &ue) {
		t.Fatalf("NaN as JSON: %v", err)
	}
	if want := `kprod: cannot serialize record: the value of a record for "t": json: unsupported value: NaN`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestRecordSizeUpperBound(t *testing.T) {
	// Java: 61 + 21 + sizeOf(key, value, headers). An empty key and a
	// 1-byte value: 61 + 21 + 1 + 2 + 1.
	if got := recordSizeUpperBound([]byte{}, []byte{1}, nil); got != 86 {
		t.Fatalf("bound %d, want 86 (what Java's estimateSizeInBytesUpperBound gives)", got)
	}
	// Never below the real encoded size of a one-record batch.
	for _, n := range []int{0, 1, 63, 64, 8191, 8192, 1 << 20} {
		v := make([]byte, n)
		h := []Header{{Key: "k", Value: v[:n/2]}, {Key: "n"}}
		real := recbatch.RecordSize(0, 0, nil, v, h) + recbatch.HeaderSize
		if b := recordSizeUpperBound(nil, v, h); b < real || b > real+21 {
			t.Errorf("value %d: bound %d, encoded %d", n, b, real)
		}
	}
}

// TestMaxRequestSizeBoundary: max.request.size is checked against the
// Java client's upper bound, not against the (smaller) exact size.
func TestMaxRequestSizeBoundary(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	v := make([]byte, 5000)
	bound := recordSizeUpperBound(nil, v, nil)
	cfg.MaxRequestSize = bound
	p := newTestProducer(t, cfg)
	if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: v}); err != nil {
		t.Fatalf("record of exactly max.request.size (as Java counts): %v", err)
	}
	err := p.SendSync(context.Background(), &Record{Topic: "t", Value: make([]byte, 5001)})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("one byte more: %v, want ErrRecordTooLarge", err)
	}
}

// A TypedProducer's Send on a closed producer fails with ErrClosed, not
// with its serializer's error, and record-error-total does not count it,
// as for Producer.Send (Java checks for a closed producer before it
// serializes).
func TestTypedSendAfterClose(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	var sends, acks atomic.Int32
	cfg.Interceptors = []Interceptor{InterceptorFuncs{
		Send: func(r *Record) *Record { sends.Add(1); return r },
		Ack:  func(_ *Record, err error) { acks.Add(1) },
	}}
	p := newTestProducer(t, cfg)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tp := NewTypedProducer[[]byte, float64](p, BytesSerializer{}, JSONSerializer[float64]{})
	var got error
	calls := 0
	tp.Send(context.Background(), &TypedRecord[[]byte, float64]{Topic: "t", Value: math.NaN()}, func(_ *TypedRecord[[]byte, float64], err error) { got = err; calls++ })
	if calls != 1 || !errors.Is(got, ErrClosed) {
		t.Errorf("typed Send after Close: %d callbacks, error %v; want one, ErrClosed", calls, got)
	}
	var serr *SerializationError
	if errors.As(got, &serr) {
		t.Errorf("typed Send after Close failed with its serializer's error: %v", got)
	}
	if n := p.Metrics().RecordErrorTotal; n != 0 {
		t.Errorf("record-error-total %d after a Send after Close, want 0", n)
	}
	// Interceptors see serialized records: this one was not, so they get
	// only its outcome.
	if s, a := sends.Load(), acks.Load(); s != 0 || a != 1 {
		t.Errorf("interceptors: %d OnSend, %d OnAcknowledgement; want 0 and 1", s, a)
	}
}
