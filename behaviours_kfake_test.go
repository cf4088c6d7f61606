package kprod

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
	"github.com/kprod/kprod/kerr"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// retries bounds the attempts after the first: a retriable error that
// does not go away fails the record after retries+1 sends, saying so and
// wrapping the broker's error.
func TestRetriesLimit(t *testing.T) {
	c := newFake(t, 1)
	var produces atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		produces.Add(1)
		return nil, nil, false
	})
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.NotEnoughReplicas, Count: -1})
	cfg := testConfig(c)
	cfg.Retries = 2
	cfg.RetryBackoff, cfg.RetryBackoffMax = 5*time.Millisecond, 5*time.Millisecond
	p := newTestProducer(t, cfg)
	err := p.SendSync(ctxT(t, 20*time.Second), &Record{Topic: "t", Value: []byte("x")})
	if !errors.Is(err, kerr.NotEnoughReplicas) || !strings.Contains(err.Error(), "after 2 retries") {
		t.Fatalf("err = %v, want NOT_ENOUGH_REPLICAS after 2 retries", err)
	}
	if n := produces.Load(); n != 3 {
		t.Errorf("%d produce requests, want 3 (the first send and 2 retries)", n)
	}
}

// Flush's ctx bounds only the wait: the records keep going and get their
// own outcome afterwards.
func TestFlushCtxEnds(t *testing.T) {
	c := newFake(t, 1)
	open := holdRequests(t, c, kmsg.Produce)
	p := newTestProducer(t, testConfig(c))
	o := newOutcomes(t)
	for i := range 10 {
		p.Send(context.Background(), &Record{Topic: "t", Value: []byte{byte(i)}}, o.cb())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := p.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with the produce request held: %v, want its ctx's error", err)
	}
	open()
	o.wait(t, 10*time.Second)
	if ok, failed := o.errCount(); ok != 10 {
		t.Fatalf("%d delivered, %d failed after the Flush gave up; want all delivered", ok, failed)
	}
	if err := p.Flush(ctxT(t, 10*time.Second)); err != nil {
		t.Fatalf("Flush with nothing left: %v", err)
	}
}

// A producer whose bootstrap servers do not answer fails a Send after
// max.block.ms with ErrMetadataTimeout that names the addresses tried.
func TestUnreachableBootstrap(t *testing.T) {
	dead := testcluster.FreeAddr(t)
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{dead}
	cfg.MaxBlock = 2 * time.Second
	p := newTestProducer(t, cfg)
	err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("x")})
	if !errors.Is(err, ErrMetadataTimeout) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("Send with no broker answering: %v, want ErrMetadataTimeout naming %s", err, dead)
	}
}

// A record that Send refuses keeps a zero Timestamp, so that sending the
// same Record again takes the time of that Send (as a Java ProducerRecord
// without a timestamp does); a record that is buffered gets its time.
func TestRefusedRecordKeepsNoTimestamp(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.MaxRequestSize = 1000
	cfg.BufferMemory = 64 << 10
	cfg.BatchSize = 16 << 10
	cfg.MaxBlock = 50 * time.Millisecond
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	metadataReady(t, p, "t") // the size check comes after it, as in Java

	big := &Record{Topic: "t", Value: make([]byte, 2000)}
	if err := p.SendSync(ctx, big); !errors.Is(err, kerr.ErrRecordTooLarge) {
		t.Fatalf("SendSync of 2000 bytes: %v, want ErrRecordTooLarge", err)
	}
	if !big.Timestamp.IsZero() {
		t.Errorf("a record refused as too large got Timestamp %v", big.Timestamp)
	}

	// Fill buffer.memory while the produce requests are held, so that the
	// next Send waits max.block.ms for memory and gives up.
	open := holdRequests(t, c, kmsg.Produce)
	o := newOutcomes(t)
	for range 4 {
		p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}).ToPartition(0), o.cb())
		p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 900)}), o.cb())
	}
	var late *Record
	for i := range 200 {
		r := &Record{Topic: "t", Value: make([]byte, 900)}
		var refused error // cb runs before Send returns for a refused record
		p.Send(ctx, r, func(_ *Record, err error) {
			if err != nil {
				refused = err
			}
		})
		if errors.Is(refused, kerr.ErrBufferFull) {
			late = r
			break
		} else if refused != nil {
			t.Fatalf("Send %d: %v", i, refused)
		}
		if r.Timestamp.IsZero() {
			t.Fatalf("a buffered record has no Timestamp")
		}
	}
	if late == nil {
		t.Fatal("200 records of 900 bytes did not fill 64 KiB of buffer.memory")
	}
	if !late.Timestamp.IsZero() {
		t.Errorf("a record refused for want of memory got Timestamp %v", late.Timestamp)
	}
	if m := p.Metrics(); m.BufferExhaustedTotal != 1 || m.BufferExhaustedRate <= 0 || m.MetadataAge <= 0 || m.MetadataAge > 60 {
		t.Errorf("buffer-exhausted-total %d, -rate %v, metadata-age %v s: want 1, > 0, and the seconds since the first metadata",
			m.BufferExhaustedTotal, m.BufferExhaustedRate, m.MetadataAge)
	}
	open()
	o.wait(t, 10*time.Second)
}

// A Send that starts waiting for memory wakes the sender, which sends the
// lingering batches that hold it at once (DESIGN: a memory waiter wants
// them now), instead of sleeping until linger.ms while the wait runs out.
func TestMemoryWaiterWakesSender(t *testing.T) {
	c := newFake(t, 6)
	cfg := testConfig(c)
	cfg.BufferMemory = 64 << 10
	cfg.BatchSize = 16 << 10
	cfg.Linger = 5 * time.Second
	cfg.MaxBlock = 2 * time.Second // well below linger.ms
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	o := newOutcomes(t)
	for part := range int32(4) { // four batches take all of buffer.memory
		p.Send(ctx, (&Record{Topic: "t", Value: []byte("x")}).ToPartition(part), o.cb())
	}
	time.Sleep(200 * time.Millisecond) // the sender sleeps until linger.ms
	var refused error                  // a Send that finds no memory fails before it returns
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("y")}).ToPartition(5), func(_ *Record, err error) {
		if err != nil {
			refused = err
		}
	})
	if refused != nil {
		t.Fatalf("a Send waiting for memory held by lingering batches: %v", refused)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	o.wait(t, 5*time.Second)
	if ok, failed := o.errCount(); ok != 4 {
		t.Errorf("%d of the first 4 records delivered, %d failed", ok, failed)
	}
}

// Close with a ctx that has already ended reports aborted records only
// when there were any: after a Flush there are none, and it returns nil
// (as Java's close(Duration.ZERO) then throws nothing).
func TestCloseEndedCtxNothingPending(t *testing.T) {
	c := newFake(t, 1)
	p, err := NewProducer(testConfig(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SendSync(ctxT(t, 10*time.Second), &Record{Topic: "t", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Close(ended); err != nil {
		t.Fatalf("Close(ended ctx) with nothing pending: %v, want nil", err)
	}
}

// A partition's callbacks run in offset order also when its batches fail
// together: in flight past delivery.timeout.ms, or in flight and queued
// when Close's ctx has ended (before, the in-flight table's map order).
func TestCallbackOrderWhenBatchesFailTogether(t *testing.T) {
	for _, how := range []string{"delivery timeout", "forced close"} {
		t.Run(how, func(t *testing.T) {
			c := newFake(t, 1)
			p, ctx := batchPerRecord(t, c, func(cfg *Config) {
				cfg.RequestTimeout, cfg.DeliveryTimeout = 2*time.Second, 2*time.Second
			})
			holdRequests(t, c, kmsg.Produce)
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			const n = 8 // 5 in flight, 3 queued behind them
			for i := range n {
				wg.Add(1)
				p.Send(ctx, &Record{Topic: "t", Value: make([]byte, 64)}, func(*Record, error) {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					wg.Done()
				})
			}
			waitInFlight(t, p, 5)
			if how == "forced close" {
				ended, cancel := context.WithCancel(context.Background())
				cancel()
				p.Close(ended)
			}
			wg.Wait()
			p.Close(ctx)
			for i, v := range order {
				if v != i {
					t.Fatalf("callbacks ran in the order %v, want 0..%d", order, n-1)
				}
			}
		})
	}
}

// Callback order holds also when an older batch's retry waits in the
// deque (its backoff not over) while a newer batch is in flight, and both
// pass delivery.timeout.ms before the sender looks again (here a slow
// callback of another partition holds it past both deadlines).
func TestCallbackOrderRetryQueuedBehindInFlight(t *testing.T) {
	c := newFake(t, 2)
	var produces atomic.Int32
	release, open := gate(t)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
			return nil, nil, false // partition 1: served
		}
		if produces.Add(1) > 1 { // partition 0's second batch: held
			c.SleepControl(func() { <-release })
			return nil, nil, false
		}
		// Its first: refused once the second is in flight too, and
		// retried after a long backoff.
		c.SleepControl(func() { time.Sleep(300 * time.Millisecond) })
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(req.GetVersion())
		st := kmsg.NewProduceResponseTopic()
		st.Topic = req.Topics[0].Topic
		sp := kmsg.NewProduceResponseTopicPartition()
		sp.ErrorCode = fkerr.NotEnoughReplicas.Code
		st.Partitions = append(st.Partitions, sp)
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	cfg := testConfig(c)
	no := false
	cfg.EnableIdempotence = &no
	cfg.Linger = 0
	cfg.BatchSize = 16 // one batch per record
	cfg.RetryBackoff, cfg.RetryBackoffMax = 10*time.Second, 10*time.Second
	cfg.RequestTimeout, cfg.DeliveryTimeout = 2*time.Second, 2*time.Second
	p := newTestProducer(t, cfg)
	defer open()
	ctx := ctxT(t, 20*time.Second)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 2 {
		wg.Add(1)
		p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 64)}).ToPartition(0), func(*Record, error) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			wg.Done()
		})
		if i == 0 {
			waitInFlight(t, p, 1) // the second goes while the first is unanswered
		}
	}
	// At 1.8 s a record for partition 1, whose callback holds the sender
	// (callbacks run on it) until both deadlines of partition 0 passed.
	time.Sleep(time.Until(start.Add(1800 * time.Millisecond)))
	wg.Add(1)
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("slow")}).ToPartition(1), func(*Record, error) {
		time.Sleep(time.Until(start.Add(2600 * time.Millisecond)))
		wg.Done()
	})
	wg.Wait()
	if len(order) != 2 || order[0] != 0 {
		t.Fatalf("callbacks ran in the order %v, want [0 1]", order)
	}
}

// A forced Close fails the requests in flight in the order they were
// sent; when an older batch's retry went out behind a newer batch, the
// newer one's failure waits for the older one's, so that the partition's
// callbacks still run in order.
func TestCallbackOrderForcedCloseRetryBehind(t *testing.T) {
	for _, idem := range []bool{true, false} {
		t.Run(map[bool]string{true: "idempotent", false: "at-least-once"}[idem], func(t *testing.T) {
			c := newFake(t, 1)
			stop := stopAtCleanup(t)
			var produces atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				switch produces.Add(1) {
				case 1: // warm-up
				case 2: // batch 0: refused (not written) once batch 1 is in flight
					c.SleepControl(func() { sleepOrStop(300*time.Millisecond, stop) })
					return produceResp(r.(*kmsg.ProduceRequest), kerr.NotLeaderOrFollower.Code, nil), nil, true
				default: // batch 1, and batch 0 sent again: held
					c.SleepControl(func() { sleepOrStop(20*time.Second, stop) })
				}
				return nil, nil, false
			})
			p, ctx := batchPerRecord(t, c, func(cfg *Config) {
				cfg.EnableIdempotence = &idem
				cfg.RetryBackoff, cfg.RetryBackoffMax = 10*time.Millisecond, 10*time.Millisecond
			})
			var o callbackOrder
			for i := range 2 {
				o.send(ctx, p, i)
				if i == 0 {
					waitInFlight(t, p, 1)
				}
			}
			waitUntil(t, "batch 0 to be answered", func() bool { return produces.Load() >= 3 })
			waitInFlight(t, p, 2) // batch 1, and batch 0 again behind it
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			p.Close(ended)
			if order, errs := o.wait(); order[0] != 0 {
				t.Fatalf("callbacks ran in the order %v, want [0 1] (errors %v)", order, errs)
			}
		})
	}
}

// increasing fails the test unless order is 0, 1, ..., n-1.
func increasing(t *testing.T, order []int, errs map[int]error) {
	t.Helper()
	for i, v := range order {
		if v != i {
			t.Fatalf("partition 0's callbacks ran in the order %v, want them in send order (errors %v)", order, errs)
		}
	}
}

// Three batches of a partition in flight on one connection: the oldest is
// refused with a retriable error and waits for its retry in the deque, the
// second is refused for good (INVALID_RECORD) and is parked behind it
// (failInOrder), and the third is acknowledged. Its callback must not run
// before the second's parked failure (nor before the first's retry).
func TestCallbackOrderFailureBehindRetry(t *testing.T) {
	for _, idem := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "idempotent"}[idem], func(t *testing.T) {
			c := newFake(t, 1)
			stop := stopAtCleanup(t)
			var produces atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.ProduceRequest)
				switch produces.Add(1) {
				case 2: // batch 0: refused (not written) once 1 and 2 are in flight too
					c.SleepControl(func() { sleepOrStop(300*time.Millisecond, stop) })
					return produceResp(req, fkerr.NotEnoughReplicas.Code, nil), nil, true
				case 3: // batch 1: refused for good
					return produceResp(req, fkerr.InvalidRecord.Code, nil), nil, true
				}
				return nil, nil, false // the warm-up, batch 2, batch 0's retry: written
			})
			p, ctx := batchPerRecord(t, c, func(cfg *Config) {
				cfg.EnableIdempotence = &idem
				cfg.RetryBackoff, cfg.RetryBackoffMax = time.Second, time.Second
			})
			var o callbackOrder
			for i := range 3 {
				o.send(ctx, p, i)
				waitInFlight(t, p, int64(i+1))
			}
			order, errs := o.wait()
			increasing(t, order, errs)
			if errs[0] != nil || !errors.Is(errs[1], kerr.InvalidRecord) || errs[2] != nil {
				t.Errorf("errors %v, want 0 delivered on its retry, 1 refused as invalid, 2 delivered", errs)
			}
		})
	}
}

// An older batch's retry waits in the deque (backoff not over), a newer
// batch is in flight, and a batch newer than both is queued behind the
// retry; all three pass delivery.timeout.ms before the sender looks again
// (a slow callback of another partition holds it). expireInFlight skips
// the in-flight one while the older retry is queued, and sendReady then
// expires the retry and the queued batch behind it: the queued, newest,
// batch must not complete before the in-flight one.
func TestCallbackOrderQueuedExpiryBehindInFlight(t *testing.T) {
	for _, idem := range []bool{false, true} {
		t.Run(map[bool]string{false: "at-least-once", true: "idempotent"}[idem], func(t *testing.T) {
			c := newFake(t, 2)
			// Partition 1 on another leader: a broker answers a
			// connection's requests in order, and partition 0's batch 1
			// is held.
			if l0 := c.LeaderFor("t", 0); l0 == c.LeaderFor("t", 1) {
				if err := c.MoveTopicPartition("t", 1, (l0+1)%3); err != nil {
					t.Fatal(err)
				}
			}
			stop := stopAtCleanup(t)
			var produces atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.ProduceRequest)
				if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
					return nil, nil, false // partition 1: served
				}
				switch produces.Add(1) {
				case 1: // warm-up
					return nil, nil, false
				case 2: // batch 0: refused once batch 1 is in flight too
					c.SleepControl(func() { sleepOrStop(300*time.Millisecond, stop) })
					return produceResp(req, fkerr.NotEnoughReplicas.Code, nil), nil, true
				}
				c.SleepControl(func() { sleepOrStop(20*time.Second, stop) }) // batch 1: held
				return nil, nil, false
			})
			p, ctx := batchPerRecord(t, c, func(cfg *Config) {
				cfg.EnableIdempotence = &idem
				cfg.RetryBackoff, cfg.RetryBackoffMax = 10*time.Second, 10*time.Second
				cfg.RequestTimeout, cfg.DeliveryTimeout = 2*time.Second, 2*time.Second
			})
			// Partition 1's leader connected, for the slow record below.
			if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("warm")}).ToPartition(1)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var o callbackOrder
			o.send(ctx, p, 0)
			waitInFlight(t, p, 1)
			o.send(ctx, p, 1)
			waitInFlight(t, p, 2)
			q := (*p.acc.topic("t").parts.Load())[0]
			waitUntil(t, "batch 0 to wait for its retry in the deque", func() bool {
				q.mu.Lock()
				defer q.mu.Unlock()
				return len(q.batches) == 1 && q.batches[0].wire != nil
			})
			o.send(ctx, p, 2) // queued behind batch 0's retry
			// At 1 s a record for partition 1, whose callback holds the
			// sender until the three deadlines of partition 0 passed (at
			// about 2 s, 2 s and 2.3 s; batch 1's request times out at
			// about 2 s too, and its result waits for the next round).
			time.Sleep(time.Until(start.Add(time.Second)))
			slow := make(chan struct{})
			p.Send(ctx, (&Record{Topic: "t", Value: []byte("slow")}).ToPartition(1), func(_ *Record, err error) {
				if err != nil || time.Since(start) > 1800*time.Millisecond {
					t.Errorf("partition 1's record: %v at %v, want delivered at about 1 s", err, time.Since(start))
				}
				time.Sleep(time.Until(start.Add(2800 * time.Millisecond)))
				close(slow)
			})
			<-slow
			order, errs := o.wait()
			increasing(t, order, errs)
		})
	}
}

// At least once, a failure parked behind two queued retries (failInOrder)
// still waits for both when a forced Close fails the queue: the deque is
// emptied one batch at a time, each just before it completes.
func TestCallbackOrderForcedCloseParkedBehindQueued(t *testing.T) {
	c := newFake(t, 1)
	stop := stopAtCleanup(t)
	wait, open := gate(t)
	var produces atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		n := produces.Add(1)
		if n == 1 {
			return nil, nil, false // warm-up
		}
		d := time.Duration(n-2) * 100 * time.Millisecond
		c.SleepControl(func() {
			select {
			case <-wait:
			case <-stop:
			}
			sleepOrStop(d, stop)
		})
		switch n {
		case 2, 3:
			return produceResp(req, fkerr.NotEnoughReplicas.Code, nil), nil, true
		default:
			return produceResp(req, fkerr.InvalidRecord.Code, nil), nil, true
		}
	})
	idem := false
	p, ctx := batchPerRecord(t, c, func(cfg *Config) {
		cfg.EnableIdempotence = &idem
		cfg.Acks = AcksLeader
		cfg.RetryBackoff, cfg.RetryBackoffMax = 20*time.Second, 20*time.Second
	})
	var o callbackOrder
	for i := range 3 {
		o.send(ctx, p, i)
		waitInFlight(t, p, int64(i+1))
	}
	open()
	waitUntil(t, "every request to be answered", func() bool {
		return p.Metrics().RequestsInFlight == 0 && produces.Load() >= 4
	})
	time.Sleep(50 * time.Millisecond)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	p.Close(ended)
	if order, errs := o.wait(); order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Fatalf("callbacks ran in the order %v, want [0 1 2] (errors %v)", order, errs)
	}
}

// callbackOrder records the order in which the callbacks of numbered
// records ran, and their errors.
// When the producer fails for good (idempotent: a produce refused with
// CLUSTER_AUTHORIZATION_FAILED; transactional: the transactional id's
// authorization), the batches still queued fail, but one whose partition
// has an older batch in flight waits for it: that partition's callbacks
// keep their order.
func TestFatalKeepsCallbackOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int16
		txn  bool
	}{
		{"idempotent", kerr.ClusterAuthorizationFailed.Code, false},
		{"transactional", kerr.TransactionalIDAuthorizationFailed.Code, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFake(t, 2)
			if l0 := c.LeaderFor("t", 0); l0 == c.LeaderFor("t", 1) {
				if err := c.MoveTopicPartition("t", 1, (l0+1)%3); err != nil {
					t.Fatal(err)
				}
			}
			release, open := gate(t)
			var holdP1, failP0 atomic.Bool
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := r.(*kmsg.ProduceRequest)
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						if rp.Partition == 1 && holdP1.Load() {
							c.SleepControl(func() { <-release })
							return nil, nil, false
						}
						if rp.Partition == 0 && failP0.Load() {
							return produceResp(req, tc.code, nil), nil, true
						}
					}
				}
				return nil, nil, false
			})
			cfg := testConfig(c)
			cfg.Linger = 0
			ctx := ctxT(t, 20*time.Second)
			var p *Producer
			if tc.txn {
				p = beginTxn(t, c, cfg, "fatal-order", false)
			} else {
				p = newTestProducer(t, cfg)
			}
			if _, err := p.PartitionsFor(ctx, "t"); err != nil {
				t.Fatal(err)
			}
			holdP1.Store(true)
			var o callbackOrder
			o.sendTo(ctx, p, 1, 1)
			waitInFlight(t, p, 1) // 1 is held by partition 1's leader
			// 2 waits behind it: a partition sends one batch at a time
			// until its first is acknowledged.
			o.sendTo(ctx, p, 2, 1)
			failP0.Store(true)
			o.sendTo(ctx, p, 3, 0)
			q := (*p.acc.topic("t").parts.Load())[1]
			waitUntil(t, "the fatal error to take 2 from its deque", func() bool {
				q.mu.Lock()
				defer q.mu.Unlock()
				return len(q.batches) == 0
			})
			open()
			order, errs := o.wait()
			if i1, i2 := slices.Index(order, 1), slices.Index(order, 2); i2 < i1 {
				t.Errorf("callbacks ran in the order %v: 2, sent to partition 1 after 1, got its outcome first", order)
			}
			if !errors.Is(errs[2], ErrFatal) && !errors.Is(errs[2], kerr.ErrFatal) {
				t.Errorf("the queued record: %v, want ErrFatal", errs[2])
			}
		})
	}
}

type callbackOrder struct {
	mu    sync.Mutex
	order []int
	errs  map[int]error
	wg    sync.WaitGroup
}

// send sends record i, 64 bytes, to t[0].
func (o *callbackOrder) send(ctx context.Context, p *Producer, i int) { o.sendTo(ctx, p, i, 0) }

// sendTo sends record i, 64 bytes, to t[part].
func (o *callbackOrder) sendTo(ctx context.Context, p *Producer, i int, part int32) {
	o.wg.Add(1)
	p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 64)}).ToPartition(part), func(_ *Record, err error) {
		o.mu.Lock()
		o.order = append(o.order, i)
		if o.errs == nil {
			o.errs = map[int]error{}
		}
		o.errs[i] = err
		o.mu.Unlock()
		o.wg.Done()
	})
}

// wait returns, once every callback ran, their order and errors.
func (o *callbackOrder) wait() ([]int, map[int]error) {
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.order, o.errs
}

// batchPerRecord is a producer on c that makes one batch per record
// (linger.ms 0, batch.size 16), with set's changes to its config, warmed
// up with a record to t[0] (metadata, connection, producer id). A test may
// close it itself.
func batchPerRecord(t *testing.T, c *kfake.Cluster, set func(*Config)) (*Producer, context.Context) {
	t.Helper()
	cfg := testConfig(c)
	cfg.Linger = 0
	cfg.BatchSize = 16
	set(&cfg)
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("warm")}).ToPartition(0)); err != nil {
		t.Fatal(err)
	}
	return p, ctx
}

// sharedLeader returns two of topic t's 6 partitions that have the same
// leader.
func sharedLeader(t *testing.T, c *kfake.Cluster) (a, b int32) {
	t.Helper()
	for i := range int32(6) {
		for j := i + 1; j < 6; j++ {
			if c.LeaderFor("t", i) == c.LeaderFor("t", j) {
				return i, j
			}
		}
	}
	t.Fatal("no two partitions share a leader among 6 on 3 brokers")
	return -1, -1
}

// A leader's partitions take turns when one batch fills a request
// (batch.size close to max.request.size): the partition whose batch did
// not fit goes first in the leader's next request, as Java's per-node
// drain index has it. kprod rotated one start over every partition of
// every leader, so a partition right after a run of other leaders'
// partitions went first in most rounds and the one behind it waited.
func TestDrainTakesTurnsWithinALeader(t *testing.T) {
	c := newFake(t, 6)
	// a and b share a leader; the partitions of the other leaders come
	// after them in the order first sent to, which is the drain order.
	a, b := sharedLeader(t, c)
	leader := c.LeaderFor("t", a)
	order := []int32{a, b}
	for i := range int32(6) {
		if i != a && i != b {
			order = append(order, i)
		}
	}
	var mu sync.Mutex
	var seq []int32 // partition of each produce request to the leader
	var hold atomic.Bool
	held := make(chan struct{}, 1) // the hook holds a request now
	release, open := gate(t)
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if c.CurrentNode() != leader {
			return nil, nil, false
		}
		req := r.(*kmsg.ProduceRequest)
		mu.Lock()
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				seq = append(seq, rp.Partition)
			}
		}
		mu.Unlock()
		if hold.Load() {
			select {
			case held <- struct{}{}:
			default: // never blocks kfake's loop, should a second come
			}
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	no := false
	cfg.EnableIdempotence = &no
	cfg.Acks = AcksLeader
	cfg.MaxInFlight = 1
	cfg.Linger = 0
	// Two 400-byte records fill a batch, and two batches do not fit in
	// a request.
	cfg.BatchSize, cfg.MaxRequestSize = 1000, 1500
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 20*time.Second)
	for _, part := range order {
		if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("warm")}).ToPartition(part)); err != nil {
			t.Fatal(err)
		}
	}
	// The leader's next request is held; meanwhile 10 batches queue for
	// each of a and b.
	hold.Store(true)
	var wg sync.WaitGroup
	send := func(part int32) {
		wg.Add(1)
		p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 400)}).ToPartition(part), func(_ *Record, err error) {
			if err != nil {
				t.Error(err)
			}
			wg.Done()
		})
	}
	send(a)
	// Once the hook holds it, not merely once it is in flight: a request
	// that reached the leader after hold was cleared would not be held,
	// and the batches below would go as they fill instead of queueing.
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the leader's produce request never reached the hook")
	}
	hold.Store(false)
	mu.Lock()
	seq = seq[:0] // from here: the requests after the held one
	mu.Unlock()
	for range 20 {
		send(a)
		send(b)
	}
	open()
	wg.Wait()
	p.Close(ctx)

	mu.Lock()
	defer mu.Unlock()
	left := map[int32]int{}
	for _, part := range seq {
		left[part]++
	}
	if left[a] != 10 || left[b] != 10 {
		t.Fatalf("produce requests to the leader after the held one carried %v (a=%d, b=%d), want 10 batches of each", seq, a, b)
	}
	for i := 1; i < len(seq); i++ {
		other := a
		if seq[i] == a {
			other = b
		}
		left[seq[i-1]]--
		if seq[i] == seq[i-1] && left[other] > 0 {
			t.Fatalf("partition %d went in two requests in a row while %d still had batches queued: %v", seq[i], other, seq)
		}
	}
}

// When a leader gets a request, the first batch of each of its other
// partitions goes in it too, lingering or not, as Java's drain takes the
// first batch of every partition of a ready node: a partition still in
// linger.ms must not wait out its linger, and cost a request of its own,
// while its leader is being written to anyway. A partition of another
// leader keeps lingering.
func TestDrainTakesLingeringBatchesOfAReadyLeader(t *testing.T) {
	c := newFake(t, 6)
	a, b := sharedLeader(t, c)
	other := int32(-1)
	for i := range int32(6) {
		if c.LeaderFor("t", i) != c.LeaderFor("t", a) {
			other = i
		}
	}
	var mu sync.Mutex
	var reqs [][]int32 // partitions of each produce request
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		var parts []int32
		for _, rt := range r.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				parts = append(parts, rp.Partition)
			}
		}
		slices.Sort(parts)
		mu.Lock()
		reqs = append(reqs, parts)
		mu.Unlock()
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.Linger = time.Hour // nothing goes for its linger in this test
	cfg.DeliveryTimeout = 2 * time.Hour
	cfg.BatchSize = 1000 // two 400-byte records fill a batch
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 20*time.Second)
	done := func() (chan error, func(*Record, error)) {
		ch := make(chan error, 1)
		return ch, func(_ *Record, err error) { ch <- err }
	}
	bDone, bCb := done()
	otherDone, otherCb := done()
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("b")}).ToPartition(b), bCb)
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("other")}).ToPartition(other), otherCb)
	// The third record does not fit in a's batch: it closes it, and the
	// batch is sendable.
	for range 3 {
		p.Send(ctx, (&Record{Topic: "t", Value: make([]byte, 400)}).ToPartition(a), nil)
	}
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("b's record: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("b's lingering record did not go with a's full batch to their leader")
	}
	select {
	case err := <-otherDone:
		t.Fatalf("the record of another leader's partition went before its linger.ms (err %v)", err)
	default:
	}
	mu.Lock()
	got := slices.Clone(reqs)
	mu.Unlock()
	if !slices.ContainsFunc(got, func(ps []int32) bool { return slices.Equal(ps, []int32{min(a, b), max(a, b)}) }) {
		t.Errorf("produce requests %v: none carried a's and b's batches together", got)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-otherDone; err != nil {
		t.Fatalf("the other leader's record, flushed: %v", err)
	}
}
