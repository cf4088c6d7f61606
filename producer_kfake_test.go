package kprod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// newFake starts an in-process 3-broker cluster with topic "t" of n
// partitions.
func newFake(t testing.TB, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(partitions, "t")}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// waitUntil polls cond until it holds, and fails the test if it does not
// within 10 seconds (what says what was waited for). Only on the test's
// goroutine.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// newFakeB is newFake for benchmarks: the cluster acknowledges produce
// requests without storing them, so that its memory stays flat and the
// profile shows the producer.
func newFakeB(b *testing.B, partitions int32) *kfake.Cluster {
	return newFake(b, partitions, kfake.BlackholeProduce())
}

func testConfig(c *kfake.Cluster) Config {
	cfg := DefaultConfig()
	cfg.BootstrapServers = c.ListenAddrs()
	return cfg
}

func newTestProducer(t *testing.T, cfg Config) *Producer {
	t.Helper()
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return p
}

// outcomes counts callbacks per record and fails the test on a second
// call for the same record.
type outcomes struct {
	t     *testing.T
	mu    sync.Mutex
	calls map[*Record]int
	errs  map[*Record]error
	wg    sync.WaitGroup
}

func newOutcomes(t *testing.T) *outcomes {
	return &outcomes{t: t, calls: map[*Record]int{}, errs: map[*Record]error{}}
}

func (o *outcomes) cb() func(*Record, error) {
	o.wg.Add(1)
	return func(r *Record, err error) {
		o.mu.Lock()
		o.calls[r]++
		n := o.calls[r]
		o.errs[r] = err
		o.mu.Unlock()
		if n > 1 {
			o.t.Errorf("callback for record %q called %d times", r.Value, n)
			return
		}
		o.wg.Done()
	}
}

func (o *outcomes) wait(t *testing.T, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { o.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("not every callback ran within %v", d)
	}
}

func (o *outcomes) errCount() (ok, failed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, err := range o.errs {
		if err == nil {
			ok++
		} else {
			failed++
		}
	}
	return
}

func TestProduceAndConsumeKfake(t *testing.T) {
	c := newFake(t, 6)
	p := newTestProducer(t, testConfig(c))
	const n = 20000
	o := newOutcomes(t)
	recs := make([]*Record, n)
	ctx := context.Background()
	for i := range recs {
		recs[i] = &Record{Topic: "t", Key: []byte(fmt.Sprintf("k%d", i%100)), Value: []byte(fmt.Sprintf("v%d", i)),
			Headers: []Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
		p.Send(ctx, recs[i], o.cb())
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	o.wait(t, 10*time.Second)
	if ok, failed := o.errCount(); ok != n || failed != 0 {
		t.Fatalf("ok %d failed %d, want %d ok", ok, failed, n)
	}
	// Offsets per partition: unique, and in send order per key.
	seen := map[[2]int64]bool{}
	lastByKey := map[string]int64{}
	for _, r := range recs {
		k := [2]int64{int64(r.Partition), r.Offset}
		if seen[k] {
			t.Fatalf("offset %d of partition %d reported twice", r.Offset, r.Partition)
		}
		seen[k] = true
		if last, ok := lastByKey[string(r.Key)]; ok && r.Offset <= last {
			t.Fatalf("key %s: offset %d after %d", r.Key, r.Offset, last)
		}
		lastByKey[string(r.Key)] = r.Offset
	}
	// Read back with an independent client.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	byPO := map[[2]int64]*Record{}
	for _, r := range recs {
		byPO[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	got := 0
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for got < n {
		fs := cl.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			t.Fatalf("read back %d of %d records: %v", got, n, err)
		}
		fs.EachRecord(func(kr *kgo.Record) {
			got++
			want := byPO[[2]int64{int64(kr.Partition), kr.Offset}]
			if want == nil || string(want.Value) != string(kr.Value) || string(want.Key) != string(kr.Key) {
				t.Fatalf("record at %d/%d: got %q, want %+v", kr.Partition, kr.Offset, kr.Value, want)
			}
			if len(kr.Headers) != 1 || string(kr.Headers[0].Value) != string(want.Headers[0].Value) {
				t.Fatalf("headers differ at %d/%d", kr.Partition, kr.Offset)
			}
			if kr.Timestamp.UnixMilli() != want.Timestamp.UnixMilli() {
				t.Fatalf("timestamp differs at %d/%d", kr.Partition, kr.Offset)
			}
		})
	}
}

// produceResp answers a produce request with code for every partition
// for which fail returns true, and a made-up success otherwise.
func produceResp(req *kmsg.ProduceRequest, code int16, fail func(topic string, p int32) bool) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			if fail == nil || fail(rt.Topic, rp.Partition) {
				sp.ErrorCode = code
			} else {
				sp.BaseOffset = 1000
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// refusedBatchOfThree sends three records in one batch, which the broker
// refuses with code and, per record index, the record_errors given
// (KIP-467), and returns the records and, once all ran, their outcomes.
func refusedBatchOfThree(t *testing.T, code int16, recErrs map[int32]string) ([]*Record, *outcomes) {
	t.Helper()
	c := newFake(t, 1)
	var once atomic.Bool
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if once.Swap(true) {
			return nil, nil, false
		}
		resp := produceResp(r.(*kmsg.ProduceRequest), code, nil)
		rp := &resp.Topics[0].Partitions[0]
		rp.ErrorMessage = kmsg.StringPtr("One or more records have been rejected")
		for i := range int32(3) {
			if m, ok := recErrs[i]; ok {
				re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				re.RelativeOffset, re.ErrorMessage = i, kmsg.StringPtr(m)
				rp.ErrorRecords = append(rp.ErrorRecords, re)
			}
		}
		return resp, nil, true
	})
	cfg := testConfig(c)
	cfg.Linger = time.Hour // one batch of three
	p := newTestProducer(t, cfg)
	o := newOutcomes(t)
	recs := make([]*Record, 3)
	for i := range recs {
		recs[i] = &Record{Topic: "t", Value: []byte{byte('a' + i)}}
		p.Send(context.Background(), recs[i], o.cb())
	}
	if err := p.Flush(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	o.wait(t, 10*time.Second)
	return recs, o
}

// A batch refused for some of its records (record_errors, KIP-467):
// those records get the broker's error with their own message; the
// others, refused with them though valid, get ErrBatchRejected and can be
// sent again (as Java's "part of a batch which had one or more invalid
// records").
func TestRecordErrorsNameTheInvalidRecord(t *testing.T) {
	recs, o := refusedBatchOfThree(t, kerr.InvalidRecord.Code, map[int32]string{1: "Compacted topic cannot accept message without key"})
	if err := o.errs[recs[1]]; !errors.Is(err, kerr.InvalidRecord) || !strings.Contains(err.Error(), "without key") {
		t.Errorf("the invalid record: %v, want INVALID_RECORD with its own message", err)
	}
	for _, r := range []*Record{recs[0], recs[2]} {
		if err := o.errs[r]; !errors.Is(err, ErrBatchRejected) || errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("a valid record of the batch: %v, want ErrBatchRejected (and not INVALID_RECORD)", err)
		}
	}
}

// With several record_errors the partition's error code is one record's
// only: each named record gets INVALID_RECORD with its own message, as in
// Java's Sender.failBatch (a record with no key on a compacted topic must
// not be told its timestamp is out of range); with one, that record gets
// the partition's code.
func TestRecordErrorsSeveralAreInvalidRecord(t *testing.T) {
	msgs := []string{"Timestamp 1 of message with offset 0 is out of range", "Compacted topic cannot accept message without key"}
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprint(n, " record errors"), func(t *testing.T) {
			recErrs := map[int32]string{}
			for i, m := range msgs[:n] {
				recErrs[int32(i)] = m
			}
			recs, o := refusedBatchOfThree(t, kerr.InvalidTimestamp.Code, recErrs)
			want := kerr.InvalidRecord
			if n == 1 {
				want = kerr.InvalidTimestamp
			}
			for i, m := range msgs[:n] {
				err := o.errs[recs[i]]
				if !errors.Is(err, want) || !strings.Contains(err.Error(), m) {
					t.Errorf("record %d: %v, want %s with %q", i, err, want.Name, m)
				}
				if n > 1 && errors.Is(err, kerr.InvalidTimestamp) {
					t.Errorf("record %d: %v: told the partition's code", i, err)
				}
			}
			if err := o.errs[recs[2]]; !errors.Is(err, ErrBatchRejected) {
				t.Errorf("the valid record: %v, want ErrBatchRejected", err)
			}
		})
	}
}

func TestRetriableErrorsRecover(t *testing.T) {
	for _, be := range []*kerr.BrokerError{
		kerr.NotLeaderOrFollower, kerr.LeaderNotAvailable, kerr.RequestTimedOut, kerr.NotEnoughReplicas,
		kerr.NotEnoughReplicasAfterAppend, kerr.UnknownTopicOrPartition, kerr.CorruptMessage,
	} {
		t.Run(be.Name, func(t *testing.T) {
			c := newFake(t, 1)
			var fails atomic.Int32
			c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if fails.Add(1) > 3 {
					return nil, nil, false
				}
				return produceResp(r.(*kmsg.ProduceRequest), be.Code, nil), nil, true
			})
			cfg := testConfig(c)
			cfg.RetryBackoff = 10 * time.Millisecond
			cfg.RetryBackoffMax = 50 * time.Millisecond
			p := newTestProducer(t, cfg)
			r := &Record{Topic: "t", Value: []byte("x")}
			if err := p.SendSync(context.Background(), r); err != nil {
				t.Fatalf("want success after %s retried, got %v", be.Name, err)
			}
			if fails.Load() < 4 {
				t.Fatalf("produce sent %d times, want 4 (3 failures then success)", fails.Load())
			}
		})
	}
}

func TestNonRetriableErrorFailsOnlyItsBatch(t *testing.T) {
	c := newFake(t, 3)
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceResp(r.(*kmsg.ProduceRequest), kerr.InvalidRecord.Code, func(_ string, p int32) bool { return p == 0 }), nil, true
	})
	p := newTestProducer(t, testConfig(c))
	o := newOutcomes(t)
	var recs []*Record
	for part := int32(0); part < 3; part++ {
		for i := 0; i < 10; i++ {
			r := (&Record{Topic: "t", Value: []byte(fmt.Sprint(part, i))}).ToPartition(part)
			recs = append(recs, r)
			p.Send(context.Background(), r, o.cb())
		}
	}
	o.wait(t, 10*time.Second)
	for _, r := range recs {
		err := o.errs[r]
		if r.Partition == 0 {
			var re *kerr.ResponseError
			if !errors.Is(err, kerr.InvalidRecord) || !errors.As(err, &re) || re.Partition != 0 {
				t.Fatalf("partition 0 record: got %v, want INVALID_RECORD", err)
			}
		} else if err != nil {
			t.Fatalf("partition %d record failed: %v", r.Partition, err)
		}
	}
}

func TestRetryBackoffGrows(t *testing.T) {
	c := newFake(t, 1)
	var mu sync.Mutex
	var times []time.Time
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n > 5 {
			return nil, nil, false
		}
		return produceResp(r.(*kmsg.ProduceRequest), kerr.NotEnoughReplicas.Code, nil), nil, true
	})
	cfg := testConfig(c)
	cfg.RetryBackoff = 40 * time.Millisecond
	cfg.RetryBackoffMax = 2 * time.Second
	p := newTestProducer(t, cfg)
	if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Expected gaps ≈ 40, 80, 160, 320, 640 ms, each ±20%. The lower
	// bound is exact (the backoff must be honoured); the upper one leaves
	// room for a loaded machine.
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		want := cfg.RetryBackoff << (i - 1)
		if gap < want*8/10 || gap > want*12/10+500*time.Millisecond {
			t.Errorf("retry %d after %v, want about %v (±20%%)", i, gap, want)
		}
	}
	// (Growth is checked by the lower bounds above: a ratio of two gaps
	// would fail whenever the first one is delayed on a loaded machine.)
}

func TestDeliveryTimeout(t *testing.T) {
	c := newFake(t, 1)
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return produceResp(r.(*kmsg.ProduceRequest), kerr.NotEnoughReplicas.Code, nil), nil, true
	})
	cfg := testConfig(c)
	cfg.RequestTimeout = 500 * time.Millisecond
	cfg.DeliveryTimeout = 800 * time.Millisecond
	cfg.Linger = 0
	p := newTestProducer(t, cfg)
	start := time.Now()
	err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("x")})
	if !errors.Is(err, ErrDeliveryTimeout) || !errors.Is(err, kerr.NotEnoughReplicas) {
		t.Fatalf("got %v, want ErrDeliveryTimeout wrapping NOT_ENOUGH_REPLICAS", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("delivery timeout of 800ms reported after %v", el)
	}
}

func TestBufferFullBlocksThenNoLoss(t *testing.T) {
	c := newFake(t, 1)
	release, open := gate(t) // opened at the end of the test too
	var held atomic.Bool
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !held.Load() {
			<-release // holds the whole fake cluster until released
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.BufferMemory = 64 << 10
	cfg.BatchSize = 16 << 10
	cfg.MaxBlock = 300 * time.Millisecond
	cfg.Linger = 0
	p := newTestProducer(t, cfg)
	o := newOutcomes(t)
	val := make([]byte, 1000)
	// Fill the buffer: the first request is held by the broker.
	var recs []*Record
	var full error
	for i := 0; i < 200 && full == nil; i++ {
		r := &Record{Topic: "t", Value: val}
		recs = append(recs, r)
		done := make(chan error, 1)
		cb := o.cb()
		p.Send(context.Background(), r, func(r *Record, err error) {
			cb(r, err)
			if errors.Is(err, ErrBufferFull) {
				done <- err
			}
		})
		select {
		case full = <-done:
		default:
		}
	}
	if !errors.Is(full, ErrBufferFull) {
		t.Fatalf("buffer never filled: want ErrBufferFull after max.block.ms, got %v", full)
	}
	held.Store(true)
	open()
	o.wait(t, 10*time.Second)
	ok, failed := o.errCount()
	if failed != 1 || ok != len(recs)-1 {
		t.Fatalf("ok %d failed %d of %d: only the record that hit max.block.ms may fail", ok, failed, len(recs))
	}
}

func TestCloseWithPendingRecordsCallsEveryCallbackOnce(t *testing.T) {
	c := newFake(t, 3)
	block := make(chan struct{})
	defer close(block)
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select { // holds the whole fake cluster until the test ends
		case <-block:
		case <-time.After(5 * time.Second):
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := newOutcomes(t)
	for i := 0; i < 1000; i++ {
		p.Send(context.Background(), &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}, o.cb())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); err == nil {
		t.Fatal("Close with undeliverable records returned nil, want the ctx error")
	}
	o.wait(t, time.Second) // Close returned: every callback has run
	o.mu.Lock()
	for r, err := range o.errs {
		// Not ErrClosed, which says a record was refused, never buffered:
		// one in flight may have been written, and resending it on
		// ErrClosed would write it twice.
		if !errors.Is(err, ErrAborted) || errors.Is(err, ErrClosed) {
			t.Fatalf("record %s: got %v, want ErrAborted (and not ErrClosed)", r.Value, err)
		}
	}
	o.mu.Unlock()
	var after error
	p.Send(context.Background(), &Record{Topic: "t"}, func(_ *Record, err error) { after = err })
	if !errors.Is(after, ErrClosed) {
		t.Fatalf("Send after Close: got %v, want ErrClosed", after)
	}
}

// TestSendRacingCloseIsRefusedNotLost: Close does not wait for the Sends
// under way (Send takes no lock of its own for it). A record that got its
// memory before Close began and reaches its deque only after the sender
// has ended must be refused there, with ErrClosed and its memory given
// back, not left in a deque that nothing drains any more.
func TestSendRacingCloseIsRefusedNotLost(t *testing.T) {
	c := newFake(t, 1)
	p := newTestProducer(t, testConfig(c))
	ctx := ctxT(t, 10*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	p.acc.testAfterAllocate = func() { close(reached); <-release }
	outcome := make(chan error, 1)
	go p.Send(ctx, &Record{Topic: "t", Value: []byte("late")}, func(_ *Record, err error) { outcome <- err })
	waitClosed(t, reached, release, "the Send to allocate its batch")
	closed := make(chan error, 1)
	go func() { closed <- p.Close(ctx) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("Close waited for a Send that had not buffered its record yet")
	}
	close(release)
	select {
	case err := <-outcome:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("record sent while Close ran: got %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the record buffered after the sender had ended got no outcome: lost")
	}
	p.pool.mu.Lock()
	avail := p.pool.available
	p.pool.mu.Unlock()
	if avail != p.pool.total {
		t.Fatalf("buffer pool has %d of %d bytes after Close: the refused record's memory was not given back", avail, p.pool.total)
	}
}

// waitClosed waits for ch to be closed; if it is not within 10 s, it
// closes release (for the goroutine holding on it) and fails the test.
func waitClosed(t *testing.T, ch, release chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatalf("waited 10s for %s", what)
	}
}

// blockingPartitioner sends every record to partition 1, and holds a
// record whose value is "block" until release is closed, after closing
// entered; then it runs check.
func blockingPartitioner(entered, release chan struct{}, check func()) PartitionerFunc {
	return func(r *Record, _ int32, _ []int32) int32 {
		if string(r.Value) == "block" {
			close(entered)
			<-release
			check()
		}
		return 1
	}
}

// sendDuringClose sends a record that p's partitioner holds (see
// blockingPartitioner), starts Close once it is held, and waits for
// Close to refuse appends; then it waits for Close up to window longer,
// reports whether it returned meanwhile, and releases the Send. The
// Send's outcome and Close's result come on the channels.
func sendDuringClose(t *testing.T, p *Producer, entered, release chan struct{}, window time.Duration) (returned bool, outcome, closed chan error) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	outcome, closed = make(chan error, 1), make(chan error, 1)
	go p.Send(ctx, &Record{Topic: "t", Value: []byte("block")}, func(_ *Record, err error) { outcome <- err })
	waitClosed(t, entered, release, "the Send to call the partitioner")
	go func() { closed <- p.Close(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); !p.acc.closed.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("Close did not stop accepting records within 10s")
		}
	}
	select {
	case err := <-closed:
		closed <- err // for the caller
		returned = true
	case <-time.After(window):
	}
	close(release)
	return returned, outcome, closed
}

// TestPartitionerClosedAfterItsLastCall: Close closes an io.Closer
// partitioner only once no Send still calls it.
func TestPartitionerClosedAfterItsLastCall(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	entered, release := make(chan struct{}), make(chan struct{})
	part := &closingPartitioner{}
	part.PartitionerFunc = blockingPartitioner(entered, release, func() {
		if part.closes.Load() != 0 {
			t.Error("the partitioner was closed while a Send called it")
		}
	})
	cfg.Partitioner = part
	cfg.Logger = slog.New(slog.DiscardHandler) // its Close fails, and that is logged
	p := newTestProducer(t, cfg)
	if err := p.SendSync(ctxT(t, 10*time.Second), &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	returned, outcome, closed := sendDuringClose(t, p, entered, release, 200*time.Millisecond)
	if returned {
		t.Error("Close returned while a Send still called the partitioner")
	}
	if err := <-outcome; !errors.Is(err, ErrClosed) {
		t.Fatalf("record sent while Close ran: got %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := part.closes.Load(); n != 1 {
		t.Fatalf("partitioner closed %d times, want 1", n)
	}
}

// TestTxnSendRacingCloseFailsWithErrClosed: Close does not wait for a Send
// under way, and aborts the open transaction meanwhile; the Send, which
// then finds no transaction, must still say the producer was closed, not
// "call BeginTransaction".
func TestTxnSendRacingCloseFailsWithErrClosed(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	entered, release := make(chan struct{}), make(chan struct{})
	cfg.Partitioner = blockingPartitioner(entered, release, func() {})
	p := beginTxn(t, c, cfg, "racing-close", false)
	if _, err := p.PartitionsFor(ctxT(t, 10*time.Second), "t"); err != nil {
		t.Fatal(err)
	}
	returned, outcome, closed := sendDuringClose(t, p, entered, release, 10*time.Second)
	if !returned {
		t.Error("Close waited for a Send under way")
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-outcome; !errors.Is(err, ErrClosed) {
		t.Fatalf("record sent while Close ran: got %v, want ErrClosed", err)
	}
}

func TestSendCtxCancelledWhileBlocked(t *testing.T) {
	c := newFake(t, 1)
	block := make(chan struct{})
	defer close(block)
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		<-block // holds the whole fake cluster until the test ends
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.BufferMemory = 32 << 10
	cfg.BatchSize = 16 << 10
	cfg.Linger = 0
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		p.Close(ctx)
	}()
	val := make([]byte, 15000)
	p.Send(context.Background(), &Record{Topic: "t", Value: val}, nil)
	p.Send(context.Background(), &Record{Topic: "t", Value: val}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	var got error
	p.Send(ctx, &Record{Topic: "t", Value: val}, func(_ *Record, err error) { got = err })
	// The caller gave up before max.block.ms: not ErrBufferFull.
	if !errors.Is(got, context.Canceled) || errors.Is(got, ErrBufferFull) {
		t.Fatalf("got %v, want context.Canceled (and not ErrBufferFull)", got)
	}
}

func TestRecordTooLarge(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.MaxRequestSize = 10000
	p := newTestProducer(t, cfg)
	err := p.SendSync(context.Background(), &Record{Topic: "t", Value: make([]byte, 20000)})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("got %v, want ErrRecordTooLarge", err)
	}
	if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("small")}); err != nil {
		t.Fatalf("a small record after a large one: %v", err)
	}
}

func TestUnknownTopic(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.MaxBlock = 500 * time.Millisecond
	p := newTestProducer(t, cfg)
	start := time.Now()
	err := p.SendSync(context.Background(), &Record{Topic: "nope", Value: []byte("x")})
	if !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("got %v, want ErrUnknownTopic", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("unknown topic reported after %v, max.block.ms is 500ms", el)
	}
}

func TestUnknownPartition(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	cfg.MaxBlock = 300 * time.Millisecond
	p := newTestProducer(t, cfg)
	err := p.SendSync(context.Background(), (&Record{Topic: "t", Value: []byte("x")}).ToPartition(7))
	if !errors.Is(err, ErrUnknownPartition) || !errors.Is(err, ErrMetadataTimeout) {
		t.Fatalf("got %v, want ErrUnknownPartition after max.block.ms (ErrMetadataTimeout)", err)
	}
	if !kerr.IsRetriable(err) {
		t.Errorf("IsRetriable(%v) = false: the topic may grow (Java's TimeoutException for it is retriable)", err)
	}
}

// metadataReady waits until p has topic's metadata, for a test whose
// max.block.ms is shorter than a first metadata fetch may take on a loaded
// machine (dial, ApiVersions, Metadata); each PartitionsFor waits at most
// max.block.ms, so it asks again until ctxT's bound.
func metadataReady(t *testing.T, p *Producer, topic string) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	for {
		_, err := p.PartitionsFor(ctx, topic)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no metadata for %s: %v", topic, err)
		}
	}
}

// metadataAsked returns a channel closed once a Metadata request names
// topic: a Send waiting for the topic's metadata has started to wait.
func metadataAsked(c *kfake.Cluster, topic string) <-chan struct{} {
	asked := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Metadata), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range r.(*kmsg.MetadataRequest).Topics {
			if rt.Topic != nil && *rt.Topic == topic {
				once.Do(func() { close(asked) })
			}
		}
		return nil, nil, false
	})
	return asked
}

// createTopic creates topic on c, with partitions partitions, as an
// admin would while the producer runs.
func createTopic(t *testing.T, ctx context.Context, c *kfake.Cluster, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics %s: %v %+v", topic, err, resp)
	}
}

// Close must not wait max.block.ms for a Send that waits for metadata.
func TestCloseEndsMetadataWait(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.MaxBlock = time.Minute
	cfg.AllowAutoCreateTopics = false
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	asked := metadataAsked(c, "does-not-exist")
	got := make(chan error, 1)
	go p.Send(context.Background(), &Record{Topic: "does-not-exist"}, func(_ *Record, err error) { got <- err })
	<-asked // the Send is waiting for the topic
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Close took %v: it waited for a Send's metadata wait", el)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("the waiting record: got %v, want ErrClosed", err)
	}
}

// A negative explicit partition is an invalid record whether or not the
// topic's metadata is known yet (it reached the accumulator's partition
// index, and panicked, when it was).
func TestNegativePartitionInvalid(t *testing.T) {
	c := newFake(t, 3)
	p := newTestProducer(t, testConfig(c))
	ctx := ctxT(t, 30*time.Second)
	for _, warm := range []bool{false, true} {
		if warm {
			if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.SendSync(ctx, (&Record{Topic: "t"}).ToPartition(-1)); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("metadata known %v: partition -1: %v, want ErrInvalidRecord", warm, err)
		}
		// A timestamp before 1970 too, as Java's ProducerRecord: -1 ms
		// would read as "no timestamp" on the broker.
		if err := p.SendSync(ctx, &Record{Topic: "t", Timestamp: time.UnixMilli(-1)}); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("metadata known %v: timestamp -1 ms: %v, want ErrInvalidRecord", warm, err)
		}
	}
}

// A Send whose own ctx ends while it waits for metadata says so, and its
// error matches the ctx's (not a max.block.ms timeout it never reached);
// one waiting for a partition the topic does not have yet fails with
// ErrClosed when the producer is closed.
func TestMetadataWaitEndsWithItsCtx(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.MaxBlock = time.Minute
	cfg.AllowAutoCreateTopics = false
	p := newTestProducer(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.SendSync(ctx, &Record{Topic: "does-not-exist"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send with a 300ms ctx to a missing topic: %v, want context.DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if err := p.SendSync(ctx, &Record{Topic: "does-not-exist"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send cancelled while waiting: %v, want context.Canceled", err)
	}

	got := make(chan error, 1)
	go p.Send(context.Background(), (&Record{Topic: "t"}).ToPartition(5), func(_ *Record, err error) { got <- err })
	time.Sleep(200 * time.Millisecond) // waiting for the topic to grow
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelClose()
	if err := p.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("the record waiting for partition 5: %v, want ErrClosed", err)
	}
}

// Regression: a batch completed by the sender before Send registered it
// as incomplete stayed "incomplete" for ever, and Close waited for its
// whole ctx although every record was delivered.
func TestCloseAfterSendSyncDoesNotHang(t *testing.T) {
	c := newFake(t, 1)
	for i := 0; i < 30; i++ {
		cfg := testConfig(c)
		cfg.Linger = 0
		p, err := NewProducer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 20; j++ {
			if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("x")}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = p.Close(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Close after every record was delivered: %v", i, err)
		}
	}
}

// A batch that reached its limit goes at once, not after linger.ms, as
// in Java (RecordAccumulator.ready: batch.isFull()): a record larger
// than batch.size (with a key, and without one, where the sticky
// partitioner moves on and no later batch marks the old one full), and
// every record with batch.size=0.
func TestFullBatchDoesNotWaitForLinger(t *testing.T) {
	c := newFake(t, 3)
	const linger = 20 * time.Second
	for _, tc := range []struct {
		name  string
		batch int
		key   []byte
		size  int
	}{
		{"larger than batch.size, keyed", 1024, []byte("k"), 4096},
		{"larger than batch.size, keyless", 1024, nil, 4096},
		{"batch.size=0", 0, nil, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(c)
			cfg.Linger = linger
			cfg.DeliveryTimeout = 2*linger + cfg.RequestTimeout
			cfg.BatchSize = tc.batch
			p := newTestProducer(t, cfg)
			for i := range 3 {
				done := make(chan error, 1)
				p.Send(context.Background(), &Record{Topic: "t", Key: tc.key, Value: make([]byte, tc.size)},
					func(_ *Record, err error) { done <- err })
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("record %d: %v", i, err)
					}
				case <-time.After(linger / 4):
					t.Fatalf("record %d not acknowledged within a quarter of linger.ms: its full batch waited for linger", i)
				}
			}
		})
	}
}

// zstd batches need Produce v7 (Kafka 2.1): against an older broker the
// record fails with ErrUnsupportedVersion saying to change
// compression.type, as Java's ProduceRequest refuses them, instead of
// going out in a version whose broker cannot read them.
func TestZstdNeedsProduceV7(t *testing.T) {
	c := newFake(t, 1, kfake.MaxVersions(kversion.V2_0_0()))
	var sent atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		sent.Add(1)
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.CompressionType = CompressionZstd
	p := newTestProducer(t, cfg)
	err := p.SendSync(ctxT(t, 10*time.Second), &Record{Topic: "t", Value: []byte("hello")})
	if !errors.Is(err, ErrUnsupportedVersion) || !strings.Contains(err.Error(), "compression.type") {
		t.Fatalf("zstd against Kafka 2.0: %v, want ErrUnsupportedVersion saying to change compression.type", err)
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d Produce requests reached the broker", n)
	}
	// Idempotent, the producer cannot go on (as Java's), and still says
	// what to change, not to turn idempotence off.
	err = p.SendSync(ctxT(t, 10*time.Second), &Record{Topic: "t", Value: []byte("again")})
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "compression.type") || strings.Contains(err.Error(), "enable.idempotence") {
		t.Fatalf("the next record: %v, want ErrFatal saying to change compression.type", err)
	}
}

// TestTxnSendsRacingCloseGetErrClosed: many Sends race Close, which aborts
// the open transaction; one that finds the transaction ended before its
// append (its first check of the state, after the closed flag) must say
// the producer was closed too. The window is narrow: the test tries 20
// times with 8 sending goroutines.
func TestTxnSendsRacingCloseGetErrClosed(t *testing.T) {
	c := newFake(t, 3)
	var bad atomic.Value
	for iter := 0; iter < 20 && bad.Load() == nil; iter++ {
		p := beginTxn(t, c, testConfig(c), "sends-racing-close", false)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")}, func(_ *Record, err error) {
						if err != nil && errors.Is(err, ErrTransactionState) && !errors.Is(err, ErrClosed) {
							bad.CompareAndSwap(nil, err)
						}
					})
				}
			}()
		}
		time.Sleep(5 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p.Close(ctx)
		cancel()
		time.Sleep(2 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
	}
	if err := bad.Load(); err != nil {
		t.Errorf("a Send racing Close failed with %v; the docs promise ErrClosed", err)
	}
}
