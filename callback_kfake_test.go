package kprod

import (
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
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Calls made from inside a callback, which runs on the sender goroutine:
// those that wait for deliveries would wait for themselves. As in Java,
// Flush (and the other waiting calls) refuse, and Close closes without
// waiting (Java's close(0) from a callback).

func TestWaitingCallsFromCallbackRefuse(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.TransactionalID = "from-callback"
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	tp := NewTypedProducer[string, string](p, StringSerializer{}, StringSerializer{})
	got := make(chan []error, 1)
	p.Send(ctx, &Record{Topic: "t", Value: []byte("a")}, func(*Record, error) {
		short, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got <- []error{
			p.Flush(short),
			p.SendSync(short, &Record{Topic: "t", Value: []byte("b")}),
			tp.SendSync(short, &TypedRecord[string, string]{Topic: "t", Value: "c"}),
			p.CommitTransaction(short),
			p.AbortTransaction(short),
		}
	})
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i, err := range <-got {
		if !errors.Is(err, ErrInCallback) {
			t.Errorf("call %d from a callback: %v, want ErrInCallback", i, err)
		}
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatalf("the transaction is still fine: %v", err)
	}
}

// sendFromCallback runs a producer whose buffer.memory is one batch and
// sends a record that takes all of it; that record's callback calls
// again(p) and its outcomes come on the returned channel.
func sendFromCallback(t *testing.T, again func(p *Producer) []error) []error {
	t.Helper()
	c := newFake(t, 2)
	cfg := testConfig(c)
	cfg.BatchSize = 1024
	cfg.BufferMemory = 1024
	cfg.Linger = 0
	cfg.MaxBlock = time.Minute // longer than the test waits
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if _, err := p.PartitionsFor(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	got := make(chan []error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(0), func(_ *Record, err error) {
		if err != nil {
			t.Errorf("first record: %v", err)
		}
		got <- again(p)
	})
	select {
	case errs := <-got:
		return errs
	case <-time.After(10 * time.Second):
		t.Fatal("a Send from a callback waited for memory that only the callback's goroutine can free")
		return nil
	}
}

// A callback that sends again gets the memory of its own batch: it is
// released before the callbacks run.
func TestSendFromCallbackGetsItsBatchMemory(t *testing.T) {
	errs := sendFromCallback(t, func(p *Producer) []error {
		return []error{sendOutcome(p, 0)}
	})
	if errs[0] != nil {
		t.Fatalf("record sent from the callback: %v", errs[0])
	}
}

// A Send from a callback that finds no memory fails at once with
// ErrBufferFull: it cannot wait there, since only the callbacks'
// goroutine frees memory.
func TestSendFromCallbackDoesNotWaitForMemory(t *testing.T) {
	errs := sendFromCallback(t, func(p *Producer) []error {
		return []error{sendOutcome(p, 0), sendOutcome(p, 1)}
	})
	if errs[0] != nil {
		t.Fatalf("first record sent from the callback: %v", errs[0])
	}
	if !errors.Is(errs[1], ErrBufferFull) || !strings.Contains(errs[1].Error(), "from a callback") {
		t.Fatalf("second record sent from the callback, with no memory left: %v, want ErrBufferFull saying why it did not wait", errs[1])
	}
}

// A callback's Send gets its batch's memory even while another Send
// waits for memory: the waiter would otherwise take it first, and the
// callback's Send, which cannot wait, would fail with ErrBufferFull.
func TestSendFromCallbackAheadOfWaiters(t *testing.T) {
	c := newFake(t, 2)
	p, ctx, open := oneBatchOfMemory(t, c)
	got := make(chan error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(0), func(_ *Record, err error) {
		if err != nil {
			t.Errorf("first record: %v", err)
		}
		got <- sendOutcome(p, 0)
	})
	waiterDone := make(chan error, 1)
	go func() { // an ordinary Send, waiting for the memory
		waiterDone <- p.SendSync(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(1))
	}()
	waitUntil(t, "the Send to wait for memory", func() bool { return p.Metrics().WaitingThreads > 0 })
	open()
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("record sent again from the callback while another Send waited: %v; want its batch's memory", err)
		}
	case <-ctx.Done():
		t.Fatal("the callback did not run")
	}
	if err := <-waiterDone; err != nil {
		t.Fatalf("the waiting Send, served after the callback's: %v", err)
	}
}

// sendOutcome sends a 900-byte record to partition part from a callback
// and returns its error if it failed in Send, nil once it is buffered.
func sendOutcome(p *Producer, part int32) error {
	var failed error
	p.Send(context.Background(), (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(part), func(_ *Record, err error) {
		failed = err // in Send (this goroutine), or later on the sender's
	})
	return failed
}

// Close from a callback returns at once; a record still in flight gets
// its callback once (ErrAborted, unless its acknowledgement came first),
// and a Close from another goroutine waits until everything is gone
// (goleak checks the rest).
func TestCloseFromCallback(t *testing.T) {
	c := newFake(t, 2)
	stop := stopAtCleanup(t)
	var hold atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range r.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 1 && hold.Swap(false) {
					c.SleepControl(func() { sleepOrStop(time.Second, stop) }) // b stays in flight
				}
			}
		}
		return nil, nil, false
	})
	p, err := NewProducer(testConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	for part := range int32(2) {
		if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("warm")}).ToPartition(part)); err != nil {
			t.Fatal(err)
		}
	}
	hold.Store(true)
	bCalls := make(chan error, 2)
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("b")}).ToPartition(1), func(_ *Record, err error) { bCalls <- err })
	closed := make(chan error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("c")}).ToPartition(0), func(*Record, error) {
		start := time.Now()
		err := p.Close(context.Background())
		if el := time.Since(start); el > 2*time.Second {
			err = fmt.Errorf("Close from a callback waited %v", el)
		}
		closed <- err
	})
	select {
	case err := <-closed:
		if !errors.Is(err, ErrAborted) {
			t.Fatalf("Close from a callback: %v, want ErrAborted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close from a callback did not return")
	}
	if err := p.Close(context.Background()); !errors.Is(err, ErrAborted) {
		t.Fatalf("Close after it: %v, want the first one's error", err)
	}
	if err := <-bCalls; err != nil && !errors.Is(err, ErrAborted) {
		t.Fatalf("b in flight: %v, want success or ErrAborted", err)
	}
	if len(bCalls) != 0 {
		t.Fatal("b's callback ran twice")
	}
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("late")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// Close's ctx bounds it even while the sender waits on a request of its
// own (the producer id's InitProducerId), not only on produce requests.
func TestCloseBoundsInitProducerIDWait(t *testing.T) {
	c := newFake(t, 1)
	stop := stopAtCleanup(t)
	asked := make(chan struct{}, 1)
	c.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		select {
		case asked <- struct{}{}:
		default:
		}
		c.SleepControl(func() { sleepOrStop(20*time.Second, stop) })
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.RequestTimeout = 10 * time.Second
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	<-asked // the sender asks for its producer id at once, and waits
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	// Nothing was buffered, so nothing was aborted: no error.
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v, want nil (no record was buffered)", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("Close with a 200ms ctx took %v (waited for the InitProducerId)", el)
	}
}

// oneRecordBatches makes every record a batch of its own, sent at once and
// retried soon after a failure.
func oneRecordBatches(t *testing.T, cfg *Config) {
	t.Helper()
	for k, v := range map[string]string{"linger.ms": "0", "batch.size": "16", "retry.backoff.ms": "20"} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// writtenThenRefused arranges, for a partition acknowledged once (so that
// it pipelines), that the next produce request (the first batch) waits
// until the one behind it is on the wire, and is then written but refused
// with NOT_ENOUGH_REPLICAS_AFTER_APPEND. Its retry, the third request,
// closes the returned channel and runs onRetry in the control function
// (which may SleepControl to answer it late).
func writtenThenRefused(c *kfake.Cluster, onRetry func()) <-chan struct{} {
	var n atomic.Int32
	retrying := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		switch n.Add(1) {
		case 1: // the first batch waits until the second is on the wire
			c.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		case 3: // the first batch's retry
			close(retrying)
			onRetry()
		}
		return nil, nil, false
	})
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.NotEnoughReplicasAfterAppend}) // written, then refused
	return retrying
}

// With idempotence, a batch the broker wrote but answered with a retriable
// error (NOT_ENOUGH_REPLICAS_AFTER_APPEND) is retried while the next batch,
// pipelined behind it, is acknowledged first. The callbacks still run in
// offset order: the second batch's wait until the first one's retry is
// answered, or until a forced Close fails it.
func TestIdempotentCallbacksInOrderAfterWrittenRetry(t *testing.T) {
	for _, forced := range []bool{false, true} {
		t.Run(fmt.Sprintf("forced close %v", forced), func(t *testing.T) {
			c := newFake(t, 1)
			stop := stopAtCleanup(t)
			cfg := testConfig(c)
			oneRecordBatches(t, &cfg)
			p := newTestProducer(t, cfg)
			ctx := ctxT(t, 30*time.Second)
			if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
				t.Fatal(err) // the partition's first acknowledgement: it may pipeline now
			}
			retrying := writtenThenRefused(c, func() {
				if forced {
					c.SleepControl(func() { sleepOrStop(20*time.Second, stop) })
				}
			})
			var mu sync.Mutex
			var order []string
			var offsets []int64
			var errs []error
			var wg sync.WaitGroup
			for _, v := range []string{"first", "second"} {
				wg.Add(1)
				p.Send(ctx, &Record{Topic: "t", Value: []byte(v)}, func(r *Record, err error) {
					defer wg.Done()
					mu.Lock()
					order, offsets, errs = append(order, v), append(offsets, r.Offset), append(errs, err)
					mu.Unlock()
				})
			}
			if forced {
				<-retrying
				time.Sleep(50 * time.Millisecond) // the second's acknowledgement is handled
				short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
				_ = p.Close(short)
			}
			wg.Wait()
			if !slices.Equal(order, []string{"first", "second"}) {
				t.Fatalf("callbacks in the order %v (offsets %v, errors %v), want first then second", order, offsets, errs)
			}
			if errs[1] != nil || (!forced && (errs[0] != nil || offsets[0] >= offsets[1])) || (forced && errs[0] == nil) {
				t.Fatalf("offsets %v, errors %v: want both delivered in offset order, or (forced close) the first failed and the second delivered", offsets, errs)
			}
		})
	}
}

// A callback that panics is logged; the other records' callbacks still
// run, and Close returns (Java logs an exception thrown by a callback).
func TestPanickingCallbackDoesNotStopOthers(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	var ran atomic.Int32
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		p.Send(ctx, &Record{Topic: "t", Value: []byte{byte(i)}}, func(_ *Record, err error) {
			defer wg.Done()
			ran.Add(1)
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
			if i == 3 {
				panic("boom")
			}
		})
	}
	wg.Wait()
	if n := ran.Load(); n != 10 {
		t.Errorf("%d callbacks ran, want 10", n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close after a panicking callback: %v", err)
	}
	if s := logs.String(); !strings.Contains(s, "callback panicked") || !strings.Contains(s, "boom") {
		t.Errorf("the panic was not logged: %q", s)
	}
}

// A failed record's callback gets Java's failed RecordMetadata: the
// partition it was buffered for (-1 if it failed before, unless the
// caller chose one), and no offset.
func TestFailedRecordCallbackFields(t *testing.T) {
	c := newFake(t, 3)
	p := newTestProducer(t, testConfig(c))
	ctx := ctxT(t, 10*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.TopicAuthorizationFailed})
	r := &Record{Topic: "t", Value: []byte("x"), Partition: 99, Offset: 99}
	err := p.SendSync(ctx, r)
	var re *kerr.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("a record refused by the broker: %v, want a *kerr.ResponseError", err)
	}
	if r.Partition != re.Partition || r.Offset != -1 || r.LeaderEpoch != -1 {
		t.Errorf("failed in the broker: Partition %d (the error names %d), Offset %d, LeaderEpoch %d; want the partition, -1, -1",
			r.Partition, re.Partition, r.Offset, r.LeaderEpoch)
	}
	early := &Record{Topic: "t", Value: make([]byte, 2<<20), Partition: 99, Offset: 99} // over max.request.size
	if err := p.SendSync(ctx, early); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("an oversized record: %v", err)
	}
	if early.Partition != -1 || early.Offset != -1 {
		t.Errorf("failed before buffering: Partition %d, Offset %d; want -1, -1", early.Partition, early.Offset)
	}
	chosen := (&Record{Topic: "t", Value: make([]byte, 2<<20)}).ToPartition(2)
	p.SendSync(ctx, chosen)
	if chosen.Partition != 2 || chosen.Offset != -1 {
		t.Errorf("failed before buffering, partition chosen by the caller: Partition %d, Offset %d; want 2, -1", chosen.Partition, chosen.Offset)
	}
}

// A waiter that gives up while the callbacks run does not hand the memory
// held for them to the next waiter.
func TestSendFromCallbackWaiterLeaves(t *testing.T) {
	c := newFake(t, 3)
	p, ctx, open := oneBatchOfMemory(t, c)
	got := make(chan error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(0), func(_ *Record, err error) {
		time.Sleep(300 * time.Millisecond) // the callback does some work; the first waiter gives up meanwhile
		got <- sendOutcome(p, 0)
	})
	short, cancel := context.WithCancel(ctx)
	w1 := make(chan error, 1)
	go func() { w1 <- p.SendSync(short, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(1)) }()
	waitUntil(t, "the first Send to wait for memory", func() bool { return p.Metrics().WaitingThreads >= 1 })
	w2 := make(chan error, 1)
	go func() { w2 <- p.SendSync(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(2)) }()
	waitUntil(t, "the second Send to wait for memory", func() bool { return p.Metrics().WaitingThreads >= 2 })
	open()
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := <-got; err != nil {
		t.Errorf("record sent again from the callback while other Sends waited: %v; want its batch's memory", err)
	}
	<-w1
	if err := <-w2; err != nil {
		t.Logf("second waiter: %v", err)
	}
}

// oneBatchOfMemory is a producer whose buffer.memory holds one batch of
// 1 KiB, warmed up, with c's produce requests held until open is called.
func oneBatchOfMemory(t *testing.T, c *kfake.Cluster) (p *Producer, ctx context.Context, open func()) {
	cfg := testConfig(c)
	cfg.BatchSize = 1024
	cfg.BufferMemory = 1024
	cfg.Linger = 0
	cfg.MaxBlock = time.Minute
	p = newTestProducer(t, cfg)
	ctx = ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("warm")}).ToPartition(0)); err != nil {
		t.Fatal(err)
	}
	return p, ctx, holdRequests(t, c, kmsg.Produce)
}

// With compression a partition's batches that fill grow their buffer
// (2 × batch.size and up, newBatchSize). A Send from a callback, which
// cannot wait, then takes what is free — at least the batch.size of the
// batch whose callbacks run — and fills by that, instead of failing
// with ErrBufferFull because the grown size is not free.
func TestSendFromCallbackCompressedGetsItsBatchMemory(t *testing.T) {
	c := newFake(t, 2)
	if l0 := c.LeaderFor("t", 0); l0 == c.LeaderFor("t", 1) {
		if err := c.MoveTopicPartition("t", 1, (l0+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	release, open := gate(t)
	defer open()
	var holdP1 atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, rt := range r.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 1 && holdP1.Load() {
					c.SleepControl(func() { <-release })
				}
			}
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.CompressionType = CompressionLz4
	cfg.BatchSize = 1024
	cfg.BufferMemory = 2048
	cfg.Linger = 0
	cfg.MaxBlock = time.Minute
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 20*time.Second)
	if _, err := p.PartitionsFor(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	holdP1.Store(true)
	p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(1), nil) // half of buffer.memory, held
	waitInFlight(t, p, 1)
	again := make(chan error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(0), func(_ *Record, err error) {
		if err != nil {
			t.Errorf("first record: %v", err)
		}
		p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(0), func(_ *Record, err error) { again <- err })
	})
	if err := <-again; err != nil { // partition 1's batch still held
		t.Fatalf("the record sent again from its callback: %v", err)
	}
}

// onGoroutine, which decides whether a call may wait for deliveries, is
// true only in a callback: on another goroutine it is false, also while
// a callback runs (when it must read goroutine ids to tell them apart).
func TestOnGoroutineOnlyInCallbacks(t *testing.T) {
	p := newTestProducer(t, testConfig(newFake(t, 1)))
	if p.snd.onGoroutine() {
		t.Error("with no callback running, the test's goroutine was taken for the sender's")
	}
	inCallback := make(chan bool, 1)
	release := make(chan struct{})
	p.Send(context.Background(), &Record{Topic: "t", Value: []byte("v")}, func(*Record, error) {
		inCallback <- p.snd.onGoroutine()
		<-release
	})
	select {
	case got := <-inCallback:
		if !got {
			t.Error("in a callback, onGoroutine is false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the callback did not run")
	}
	if p.snd.onGoroutine() {
		t.Error("while a callback runs, the test's goroutine was taken for the sender's")
	}
	close(release)
}

// A callback's Send refused for want of memory reads the pool's figures
// for its error under the pool's lock (a data race under -race before),
// while other batches take and give back memory.
func TestSendFromCallbackRefusalReadsPoolUnderLock(t *testing.T) {
	p := newBufferPool(1<<20, 1024)
	p.cannotWait = func() bool { return true } // as on the sender goroutine
	if _, err := p.allocate(context.Background(), 1<<20-512, time.Second); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	errs := make(chan error, 1)
	go func() { // a callback's Send: 1024 bytes, 512 at most free
		defer wg.Done()
		for range 2000 {
			if _, err := p.allocate(context.Background(), 1024, time.Second); !errors.Is(err, ErrBufferFull) {
				errs <- fmt.Errorf("allocate: %v, want ErrBufferFull", err)
				return
			}
		}
	}()
	go func() { // another batch taking and giving back 512 bytes
		defer wg.Done()
		for range 2000 {
			if buf, err := p.allocate(context.Background(), 512, time.Second); err == nil {
				p.release(buf, 512)
			}
		}
	}()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// closeFromInterceptorClose is an interceptor whose Close closes its
// producer again.
type closeFromInterceptorClose struct {
	p    **Producer
	done chan error
}

func (closeFromInterceptorClose) OnSend(r *Record) *Record         { return r }
func (closeFromInterceptorClose) OnAcknowledgement(*Record, error) {}
func (c closeFromInterceptorClose) Close() error {
	c.done <- (*c.p).Close(context.Background())
	return nil
}

// A Close from a callback is finished by the sender goroutine, which then
// closes the interceptors: an interceptor's Close that calls the
// producer's Close there must not wait for that goroutine (it did, for
// ever, when only the callbacks counted as caller code there).
func TestCloseFromInterceptorCloseOnSenderGoroutine(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	var p *Producer
	ic := closeFromInterceptorClose{p: &p, done: make(chan error, 1)}
	cfg.Interceptors = []Interceptor{ic}
	var err error
	if p, err = NewProducer(cfg); err != nil {
		t.Fatal(err)
	}
	p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")}, func(*Record, error) {
		p.Close(context.Background()) // from a callback: the sender finishes the close
	})
	select {
	case <-ic.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the interceptor's Close, run on the sender goroutine, is stuck in Producer.Close")
	}
	p.Close(context.Background()) // returns once the sender has finished the close
	checkNoProducerGoroutines(t, "Close")
}

// The same from an ordinary Close, which closes the interceptors on its
// own goroutine last: the interceptor's Close calling Close again must
// return, not wait for the Close it runs in.
func TestCloseFromInterceptorCloseInOrdinaryClose(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	var p *Producer
	ic := closeFromInterceptorClose{p: &p, done: make(chan error, 1)}
	cfg.Interceptors = []Interceptor{ic}
	var err error
	if p, err = NewProducer(cfg); err != nil {
		t.Fatal(err)
	}
	if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close is stuck: the interceptor's Close called Close, which waited for the Close running it")
	}
	if err := <-ic.done; err != nil {
		t.Errorf("the Close called from the interceptor's Close: %v", err)
	}
	checkNoProducerGoroutines(t, "Close")
}
