package kprod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// eventLog records what interceptors and callbacks saw, in order.
type eventLog struct {
	mu  sync.Mutex
	evs []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	l.evs = append(l.evs, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.evs...)
}

func TestInterceptorsChainAndAcknowledge(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	var log eventLog
	var sent *Record
	cfg.Interceptors = []Interceptor{
		InterceptorFuncs{
			Send: func(r *Record) *Record {
				log.add("1:send %s", r.Value)
				r.Headers = append(r.Headers, Header{Key: "traced", Value: []byte("yes")})
				return r
			},
			Ack: func(r *Record, err error) { log.add("1:ack %s %d %v", r.Value, r.Offset, err) },
		},
		InterceptorFuncs{
			// Returns a new record: that is the one sent.
			Send: func(r *Record) *Record {
				log.add("2:send %s headers=%d", r.Value, len(r.Headers))
				sent = &Record{Topic: r.Topic, Key: r.Key, Value: bytes.ToUpper(r.Value), Headers: r.Headers}
				return sent
			},
			Ack: func(r *Record, err error) {
				if r != sent {
					t.Errorf("OnAcknowledgement got %p, want the record sent (%p)", r, sent)
				}
				log.add("2:ack %s %d %v", r.Value, r.Offset, err)
			},
		},
	}
	p := newTestProducer(t, cfg)
	r := &Record{Topic: "t", Key: []byte("k"), Value: []byte("hello")}
	var got *Record
	p.Send(context.Background(), r, func(cr *Record, err error) {
		got = cr
		log.add("callback %s %d %v", cr.Value, cr.Offset, err)
	})
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1:send hello", "2:send hello headers=1",
		"1:ack HELLO 0 <nil>", "2:ack HELLO 0 <nil>", "callback hello 0 <nil>",
	}
	if evs := log.get(); !slices.Equal(evs, want) {
		t.Fatalf("events\n%q\nwant\n%q", evs, want)
	}
	// The caller's own record comes back with the outcome.
	if got != r || r.Offset != 0 || r.Partition != 0 || !r.Timestamp.Equal(sent.Timestamp) {
		t.Fatalf("callback record %p (caller's %p) offset %d partition %d ts %v", got, r, r.Offset, r.Partition, r.Timestamp)
	}

	// SendSync fills in the caller's record too.
	r2 := &Record{Topic: "t", Value: []byte("again")}
	if err := p.SendSync(context.Background(), r2); err != nil || r2.Offset != 1 {
		t.Fatalf("SendSync: %v, offset %d, want 1", err, r2.Offset)
	}

	// What the broker has is what the interceptors made.
	cl := newKgo(t, c)
	fs := cl.PollFetches(context.Background())
	recs := fs.Records()
	if len(recs) < 1 || string(recs[0].Value) != "HELLO" || len(recs[0].Headers) != 1 || recs[0].Headers[0].Key != "traced" {
		t.Fatalf("broker has %+v", recs)
	}
}

func newKgo(t *testing.T, c interface{ ListenAddrs() []string }) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

type panicky struct{ onSend, onAck bool }

func (p panicky) OnSend(r *Record) *Record {
	if p.onSend {
		r.Value = []byte("modified before the panic")
		panic("OnSend broke")
	}
	return &Record{Topic: r.Topic, Value: []byte("replaced")}
}

func (p panicky) OnAcknowledgement(*Record, error) {
	if p.onAck {
		panic("OnAcknowledgement broke")
	}
}

// TestInterceptorPanics: a panicking interceptor is logged with its type
// and skipped; delivery and the other interceptors carry on.
func TestInterceptorPanics(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	var logBuf syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	var log eventLog
	cfg.Interceptors = []Interceptor{
		panicky{onAck: true}, // replaces the record, then panics on ack
		panicky{onSend: true},
		InterceptorFuncs{
			Send: func(r *Record) *Record { log.add("send %s", r.Value); return r },
			Ack:  func(r *Record, err error) { log.add("ack %s %v", r.Value, err) },
		},
	}
	p := newTestProducer(t, cfg)
	r := &Record{Topic: "t", Value: []byte("original")}
	if err := p.SendSync(context.Background(), r); err != nil {
		t.Fatalf("a panicking interceptor failed delivery: %v", err)
	}
	// The second interceptor panicked after modifying the record in
	// place: like Java, the chain goes on with the record the first one
	// returned (which it had changed).
	want := []string{"send modified before the panic", "ack modified before the panic <nil>"}
	if evs := log.get(); !slices.Equal(evs, want) {
		t.Fatalf("events %q, want %q", evs, want)
	}
	out := logBuf.String()
	for _, w := range []string{"kprod.panicky", "OnSend panicked", "OnAcknowledgement panicked", "OnSend broke", "OnAcknowledgement broke"} {
		if !strings.Contains(out, w) {
			t.Errorf("log does not mention %q:\n%s", w, out)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestInterceptorSeesEarlyFailures: records that fail before they are
// buffered reach OnAcknowledgement, once, before their callback.
func TestInterceptorSeesEarlyFailures(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	cfg.MaxRequestSize = 1000
	cfg.MaxBlock = 200 * time.Millisecond
	var log eventLog
	cfg.Interceptors = []Interceptor{InterceptorFuncs{
		Ack: func(r *Record, err error) {
			name := "<nil record>"
			if r != nil {
				name = string(r.Value)
			}
			log.add("ack %s %v", name, errName(err))
		},
	}}
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r *Record) {
		name := "<nil record>"
		if r != nil {
			name = string(r.Value)
		}
		p.Send(context.Background(), r, func(cr *Record, err error) {
			if cr != r {
				t.Errorf("%s: callback got %p, want %p", name, cr, r)
			}
			log.add("callback %s %v", name, errName(err))
		})
	}
	send(nil)
	send(&Record{Value: []byte("no topic")})
	send(&Record{Topic: "t", Value: bytes.Repeat([]byte("big"), 400)[:1000]})
	send((&Record{Topic: "t", Value: []byte("no such partition")}).ToPartition(5))
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	send(&Record{Topic: "t", Value: []byte("after close")})
	big := string(bytes.Repeat([]byte("big"), 400)[:1000])
	want := []string{
		"ack <nil record> ErrInvalidRecord", "callback <nil record> ErrInvalidRecord",
		"ack no topic ErrInvalidRecord", "callback no topic ErrInvalidRecord",
		"ack " + big + " ErrRecordTooLarge", "callback " + big + " ErrRecordTooLarge",
		"ack no such partition ErrUnknownPartition", "callback no such partition ErrUnknownPartition",
		"ack after close ErrClosed", "callback after close ErrClosed",
	}
	if evs := log.get(); !slices.Equal(evs, want) {
		t.Fatalf("events\n%q\nwant\n%q", evs, want)
	}
}

func errName(err error) string {
	for name, s := range map[string]error{
		"ErrInvalidRecord": ErrInvalidRecord, "ErrRecordTooLarge": ErrRecordTooLarge,
		"ErrUnknownPartition": ErrUnknownPartition, "ErrClosed": ErrClosed,
	} {
		if errors.Is(err, s) {
			return name
		}
	}
	return fmt.Sprint(err)
}

func TestNilInterceptorRejected(t *testing.T) {
	cfg := validConfig()
	cfg.Interceptors = []Interceptor{InterceptorFuncs{}, nil}
	_, err := NewProducer(cfg)
	wantConfigError(t, err, "interceptor.classes", "Config.Interceptors[1]", "nil")
}

// closingInterceptor is an Interceptor and an io.Closer that logs its
// acknowledgements and its Close; its Close fails with err, or panics.
type closingInterceptor struct {
	name   string
	log    *eventLog
	err    error
	panics bool
}

func (c *closingInterceptor) OnSend(r *Record) *Record { return r }

func (c *closingInterceptor) OnAcknowledgement(r *Record, err error) {
	c.log.add("%s:ack %s", c.name, r.Value)
}

func (c *closingInterceptor) Close() error {
	c.log.add("%s:close", c.name)
	if c.panics {
		panic(c.name + " Close broke")
	}
	return c.err
}

// closingChain is the interceptors of the Close tests: four closers, of
// which b fails and c panics, and one interceptor that is not a closer.
func closingChain(log *eventLog) []Interceptor {
	return []Interceptor{
		&closingInterceptor{name: "a", log: log},
		InterceptorFuncs{Ack: func(r *Record, err error) { log.add("funcs:ack %s", r.Value) }},
		&closingInterceptor{name: "b", log: log, err: errors.New("b Close failed")},
		&closingInterceptor{name: "c", log: log, panics: true},
		&closingInterceptor{name: "d", log: log},
	}
}

// checkClosedAfterAcks checks that each closer of closingChain was closed
// once, in order, after the OnAcknowledgement of all n records.
func checkClosedAfterAcks(t *testing.T, evs []string, n int) {
	t.Helper()
	first := slices.IndexFunc(evs, func(e string) bool { return strings.HasSuffix(e, ":close") })
	if first < 0 {
		t.Fatalf("no interceptor was closed; events %q", evs)
	}
	if want := []string{"a:close", "b:close", "c:close", "d:close"}; !slices.Equal(evs[first:], want) {
		t.Errorf("events from the first close %q, want %q", evs[first:], want)
	}
	acks := 0
	for _, e := range evs[:first] {
		if strings.HasPrefix(e, "d:ack ") { // the last interceptor of the chain
			acks++
		}
	}
	if acks != n {
		t.Errorf("%d records acknowledged before the interceptors were closed, want all %d; events %q", acks, n, evs)
	}
}

// TestInterceptorCloseAfterLastAck: Close closes the interceptors that are
// io.Closers once, in order, after the last OnAcknowledgement; a failing or
// panicking Close is logged and neither stops the next nor fails Close.
func TestInterceptorCloseAfterLastAck(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	cfg.Linger = time.Hour // the records are still buffered when Close starts
	var logBuf syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	var log eventLog
	cfg.Interceptors = closingChain(&log)
	p := newTestProducer(t, cfg)
	const n = 20
	for i := range n {
		p.Send(context.Background(), &Record{Topic: "t", Value: fmt.Appendf(nil, "r%d", i)}, func(r *Record, err error) {
			if err != nil {
				t.Errorf("%s: %v", r.Value, err)
			}
		})
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v, want nil: interceptors' errors are only logged", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	checkClosedAfterAcks(t, log.get(), n)
	out := logBuf.String()
	for _, w := range []string{"interceptor Close failed", "b Close failed", "interceptor Close panicked", "c Close broke", "*kprod.closingInterceptor", "level=ERROR"} {
		if !strings.Contains(out, w) {
			t.Errorf("log does not mention %q:\n%s", w, out)
		}
	}
}

// TestInterceptorCloseAfterAbort: when ctx ends before the records are
// delivered, the interceptors are still closed, after the aborted
// records' OnAcknowledgement, and Close returns ctx's error.
func TestInterceptorCloseAfterAbort(t *testing.T) {
	c := newFake(t, 2)
	block := make(chan struct{})
	defer close(block)
	c.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select { // holds the fake cluster: nothing is delivered
		case <-block:
		case <-time.After(5 * time.Second):
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.Logger = slog.New(slog.DiscardHandler)
	var log eventLog
	cfg.Interceptors = closingChain(&log)
	p := newTestProducer(t, cfg)
	const n = 20
	var aborted atomic.Int32
	for i := range n {
		p.Send(context.Background(), &Record{Topic: "t", Value: fmt.Appendf(nil, "r%d", i)}, func(_ *Record, err error) {
			if errors.Is(err, ErrAborted) {
				aborted.Add(1)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v, want context.Canceled", err)
	}
	if got := aborted.Load(); got != n {
		t.Errorf("%d records failed with ErrAborted, want all %d", got, n)
	}
	checkClosedAfterAcks(t, log.get(), n)
}

// closingPartitioner counts its Close calls.
type closingPartitioner struct {
	PartitionerFunc
	closes atomic.Int32
}

func (c *closingPartitioner) Close() error {
	c.closes.Add(1)
	return errors.New("partitioner Close broke")
}

// TestPartitionerClosed: a Partitioner that is an io.Closer is closed
// once by Close, after the records were delivered; its failure is logged.
func TestPartitionerClosed(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	var logBuf syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	part := &closingPartitioner{PartitionerFunc: func(*Record, int32, []int32) int32 { return 1 }}
	cfg.Partitioner = part
	p := newTestProducer(t, cfg)
	if err := p.SendSync(ctxT(t, 10*time.Second), &Record{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if n := part.closes.Load(); n != 0 {
		t.Fatalf("partitioner closed %d times before Close", n)
	}
	for range 2 {
		if err := p.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v, want nil: a partitioner's Close error is only logged", err)
		}
	}
	if n := part.closes.Load(); n != 1 {
		t.Errorf("partitioner closed %d times, want 1", n)
	}
	if out := logBuf.String(); !strings.Contains(out, "partitioner Close failed") || !strings.Contains(out, "partitioner Close broke") {
		t.Errorf("log does not report the partitioner's failed Close:\n%s", out)
	}
}

// An interceptor may send a copy; the caller's record still gets a
// failure's -1s, not zeros that read as a delivery to partition 0 at
// offset 0.
func TestInterceptorCopyFailedOutcome(t *testing.T) {
	c := newFake(t, 3)
	cfg := testConfig(c)
	cfg.Interceptors = []Interceptor{InterceptorFuncs{Send: func(r *Record) *Record {
		cp := *r
		return &cp
	}}}
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.TopicAuthorizationFailed})
	r := &Record{Topic: "t", Value: []byte("x")}
	err := p.SendSync(ctx, r)
	var re *kerr.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("a record refused by the broker: %v", err)
	}
	if r.Offset != -1 || r.Partition != re.Partition || r.LeaderEpoch != -1 {
		t.Errorf("refused by the broker: Partition %d (the error names %d), Offset %d, LeaderEpoch %d; want that partition, -1, -1",
			r.Partition, re.Partition, r.Offset, r.LeaderEpoch)
	}
	early := &Record{Topic: "t", Value: make([]byte, 2<<20)} // over max.request.size
	if err := p.SendSync(ctx, early); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("an oversized record: %v", err)
	}
	if early.Partition != -1 || early.Offset != -1 || early.LeaderEpoch != -1 {
		t.Errorf("failed before buffering: Partition %d, Offset %d, LeaderEpoch %d; want -1, -1, -1",
			early.Partition, early.Offset, early.LeaderEpoch)
	}
}
