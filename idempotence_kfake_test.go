package kprod

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchState reads producerId, producerEpoch and baseSequence from a
// record batch header.
func batchState(b []byte) (pid int64, epoch int16, seq int32, count int32) {
	be := binary.BigEndian
	return int64(be.Uint64(b[43:])), int16(be.Uint16(b[51:])), int32(be.Uint32(b[53:])), int32(be.Uint32(b[57:]))
}

func TestIdempotentProducerIDAndSequences(t *testing.T) {
	c := newFake(t, 3)
	var mu sync.Mutex
	var initBeforeProduce, produced bool
	type seen struct {
		pid        int64
		epoch      int16
		seq, count int32
	}
	byPart := map[int32][]seen{}
	c.ControlKey(22, func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		if !produced {
			initBeforeProduce = true
		}
		mu.Unlock()
		return nil, nil, false
	})
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		produced = true
		for _, tp := range r.(*kmsg.ProduceRequest).Topics {
			for _, pp := range tp.Partitions {
				pid, ep, seq, n := batchState(pp.Records)
				byPart[pp.Partition] = append(byPart[pp.Partition], seen{pid, ep, seq, n})
			}
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.BatchSize = 1024 // many batches
	p := newTestProducer(t, cfg)
	f := newFaultRun("sequences", "t", 3, 2000)
	f.produce(t, p, nil, 20*time.Second)
	f.check(t, c.ListenAddrs()).assertExactlyOnce(t, "sequences")

	mu.Lock()
	defer mu.Unlock()
	if !initBeforeProduce {
		t.Fatal("no InitProducerId before the first produce")
	}
	for part, ss := range byPart {
		next := int32(0)
		for _, s := range ss {
			if s.pid < 0 || s.epoch < 0 {
				t.Fatalf("partition %d: batch without producer id/epoch: %+v", part, s)
			}
			if s.seq != next {
				t.Fatalf("partition %d: baseSequence %d, want %d", part, s.seq, next)
			}
			next += s.count
		}
	}
}

// Every retriable produce error, with a fault on several requests: the
// idempotent producer delivers every record exactly once and in order.
// REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS_AFTER_APPEND are the
// lost-acknowledgement cases: kfake appends the batch and still fails it.
func TestIdempotentRetriableErrorsExactlyOnce(t *testing.T) {
	for _, e := range []*fkerr.Error{
		fkerr.NotLeaderForPartition, fkerr.LeaderNotAvailable, fkerr.RequestTimedOut, fkerr.NotEnoughReplicas,
		fkerr.NotEnoughReplicasAfterAppend, fkerr.UnknownTopicOrPartition, fkerr.KafkaStorageError,
		fkerr.CorruptMessage, fkerr.OutOfOrderSequenceNumber, fkerr.UnknownProducerID,
	} {
		t.Run(e.Message, func(t *testing.T) {
			c := newFake(t, 3)
			cfg := testConfig(c)
			cfg.BatchSize = 2048
			cfg.RetryBackoff = 5 * time.Millisecond
			cfg.RetryBackoffMax = 20 * time.Millisecond
			p := newTestProducer(t, cfg)
			f := newFaultRun(e.Message, "t", 3, 1500)
			var h *kfake.FaultHandle
			f.produce(t, p, func(sent int) {
				if sent == 300 {
					h = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: e, Count: 6})
				}
			}, 30*time.Second)
			if h.Hits() == 0 {
				t.Fatalf("the fault never hit a produce request")
			}
			counts := f.check(t, c.ListenAddrs())
			if e == fkerr.OutOfOrderSequenceNumber || e == fkerr.UnknownProducerID {
				// These bump the epoch for the partition that got them.
				// kfake keeps one epoch per producer id, where Kafka keeps
				// one per partition: another partition's retry in the old
				// epoch then fails with INVALID_PRODUCER_EPOCH, and its
				// records are never written (see
				// TestIdempotentBumpLeavesOtherPartitionsRetries). That
				// is at most the batches in flight on the other
				// partitions when the epoch moved (records of at least
				// 12 bytes in batches of BatchSize).
				limit := int(f.partitions-1) * cfg.MaxInFlight * (cfg.BatchSize / 12)
				counts = f.excuse(t, counts, kerr.InvalidProducerEpoch, limit)
			}
			counts.assertExactlyOnce(t, e.Message)
		})
	}
}

// The classic duplicate: the broker wrote the batch but the producer
// never got the acknowledgement. Idempotent: no duplicate. At least once
// (idempotence off): duplicates allowed, nothing lost.
func TestLostAcknowledgement(t *testing.T) {
	for _, idem := range []bool{true, false} {
		name := "idempotent"
		if !idem {
			name = "at-least-once"
		}
		t.Run(name, func(t *testing.T) {
			c := newFake(t, 2)
			cfg := testConfig(c)
			cfg.EnableIdempotence = &idem
			cfg.RetryBackoff = 5 * time.Millisecond
			p := newTestProducer(t, cfg)
			f := newFaultRun("lost ack "+name, "t", 2, 1000)
			f.produce(t, p, func(sent int) {
				if sent == 500 {
					c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: fkerr.RequestTimedOut, Count: 3})
				}
			}, 20*time.Second)
			counts := f.check(t, c.ListenAddrs())
			if idem {
				counts.assertExactlyOnce(t, name)
			} else {
				counts.assertAtLeastOnce(t, name)
			}
		})
	}
}

// Responses delayed past request.timeout.ms: the requests time out, the
// connection is closed, the batches are retried, and the broker had in
// fact written them.
func TestIdempotentResponsesDelayedPastRequestTimeout(t *testing.T) {
	c := newFake(t, 2)
	stop := stopAtCleanup(t)
	var delayed atomic.Int32
	c.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if delayed.Add(1) <= 3 {
			c.SleepControl(func() { sleepOrStop(700*time.Millisecond, stop) })
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.RequestTimeout = 300 * time.Millisecond
	cfg.RetryBackoff = 10 * time.Millisecond
	p := newTestProducer(t, cfg)
	f := newFaultRun("delayed responses", "t", 2, 500)
	f.produce(t, p, nil, 20*time.Second)
	// The fault must have happened: else exactly once proves nothing.
	if n := delayed.Load(); n < 3 {
		t.Fatalf("only %d produce requests were delayed, want 3", n)
	}
	if m := p.Metrics(); m.RecordRetryTotal == 0 {
		t.Fatal("no record was retried: the delayed requests did not time out")
	}
	f.check(t, c.ListenAddrs()).assertExactlyOnce(t, "delayed responses")
}

// The connection cut with requests in flight: every in-flight request
// fails once with a lost connection and is retried; no duplicates.
func TestIdempotentConnectionCutInFlight(t *testing.T) {
	c := newFake(t, 3)
	var n atomic.Int32
	c.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if k := n.Add(1); k == 20 || k == 40 {
			return nil, errors.New("cut"), true // kfake drops the connection
		}
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.Linger = 0
	cfg.BatchSize = 512
	cfg.RetryBackoff = 5 * time.Millisecond
	p := newTestProducer(t, cfg)
	f := newFaultRun("connection cut", "t", 3, 1000)
	f.produce(t, p, nil, 20*time.Second)
	f.check(t, c.ListenAddrs()).assertExactlyOnce(t, "connection cut")
}

// delivery.timeout.ms holds for a batch in flight, and the records after
// it are still delivered, in order, without a gap: the sequence the
// expired batch leaves unresolved is settled (here by an epoch bump, as the
// broker never wrote it) instead of failing every later batch. The bump is
// Java's for an idempotent producer: the same producer id, the next epoch,
// and no InitProducerId (which would hand out a new id, and with it lose
// the broker's memory of batches that other partitions may still retry).
func TestIdempotentDeliveryTimeoutInFlightKeepsLaterRecords(t *testing.T) {
	c := newFake(t, 1)
	stop := stopAtCleanup(t)
	var n atomic.Int32
	var mu sync.Mutex
	ids := map[int64]map[int16]bool{} // producer id → epochs, of every batch produced
	c.ControlKey(0, func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		for _, t := range r.(*kmsg.ProduceRequest).Topics {
			for _, pt := range t.Partitions {
				pid, epoch, _, _ := batchState(pt.Records)
				if ids[pid] == nil {
					ids[pid] = map[int16]bool{}
				}
				ids[pid][epoch] = true
			}
		}
		mu.Unlock()
		switch n.Add(1) {
		case 2: // a's first attempt fails, so its retry starts late
			return produceResp(r.(*kmsg.ProduceRequest), 19 /* NOT_ENOUGH_REPLICAS */, nil), nil, true
		case 3: // a's retry is answered, not written, after delivery.timeout.ms
			c.SleepControl(func() { sleepOrStop(5500*time.Millisecond, stop) })
			return produceResp(r.(*kmsg.ProduceRequest), 19, nil), nil, true
		}
		return nil, nil, false
	})
	var inits atomic.Int32
	c.ControlKey(22, func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		inits.Add(1)
		return nil, nil, false
	})
	cfg := testConfig(c)
	cfg.Linger = 0
	// a's retry goes at ≈2s and is answered at ≈7.5s, before it would
	// time out at ≈7.9s (request.timeout.ms); delivery.timeout.ms must
	// end it at 6s.
	cfg.RetryBackoff = 2 * time.Second
	cfg.RetryBackoffMax = 2 * time.Second
	cfg.RequestTimeout = 5900 * time.Millisecond
	cfg.DeliveryTimeout = 6 * time.Second
	p := newTestProducer(t, cfg)
	ctx := context.Background()
	// Warm up (metadata, connection, producer id), so that the timings
	// below start when a is buffered.
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	a := &Record{Topic: "t", Value: []byte("a")}
	aErr := make(chan error, 1)
	start := time.Now()
	p.Send(ctx, a, func(_ *Record, err error) { aErr <- err })
	time.Sleep(3 * time.Second) // a's retry is in flight
	var later []*Record
	o := newOutcomes(t)
	for i := 0; i < 50; i++ {
		r := &Record{Topic: "t", Value: []byte{byte('b' + i%20)}}
		later = append(later, r)
		p.Send(ctx, r, o.cb())
	}
	select {
	case err := <-aErr:
		if !errors.Is(err, ErrDeliveryTimeout) {
			t.Fatalf("first record: got %v, want ErrDeliveryTimeout", err)
		}
		if el := time.Since(start); el > 7*time.Second {
			t.Fatalf("delivery.timeout.ms of 6s for an in-flight batch reported after %v", el)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no callback for the first record")
	}
	o.wait(t, 15*time.Second)
	last := int64(-1)
	for _, r := range later {
		if err := o.errs[r]; err != nil {
			t.Fatalf("a record after the expired one failed: %v", err)
		}
		if r.Offset <= last {
			t.Fatalf("offsets out of order: %d after %d", r.Offset, last)
		}
		last = r.Offset
	}
	if inits.Load() != 1 {
		t.Errorf("InitProducerId sent %d times, want once: an idempotent producer bumps its epoch itself", inits.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, epochs := range ids {
		if len(ids) != 1 || len(epochs) != 2 || !epochs[0] || !epochs[1] {
			t.Fatalf("batches went out with producer ids and epochs %v, want one id in epochs 0 and 1 (the gap left by the expired batch needs an epoch bump)", ids)
		}
	}
}

func TestIdempotenceConflictsWithAcks(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{"127.0.0.1:1"}
	on := true
	cfg.EnableIdempotence = &on
	cfg.Acks = AcksLeader
	if _, err := NewProducer(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("enable.idempotence=true with acks=1: got %v, want ErrInvalidConfig", err)
	}
	cfg.EnableIdempotence = nil
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatalf("acks=1 with idempotence left at its default: %v", err)
	}
	defer p.Close(context.Background())
	if p.snd.idemOn {
		t.Fatal("acks=1 without an explicit enable.idempotence must turn idempotence off, as Java does")
	}
}

// stopAtCleanup returns a channel closed when the test ends, before the
// fake cluster is closed, so that slept controls do not outlive the test.
func stopAtCleanup(t *testing.T) chan struct{} {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return stop
}

// gate is a channel a test's broker hook waits on until open is called,
// or the test ends.
func gate(t *testing.T) (wait <-chan struct{}, open func()) {
	ch := make(chan struct{})
	var once sync.Once
	open = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(open)
	return ch, open
}

// holdRequests holds every request of key the cluster gets (the others
// are served meanwhile) until open is called, or the test ends.
func holdRequests(t *testing.T, c *kfake.Cluster, key kmsg.Key) (open func()) {
	open, _ = holdCounted(t, c, key)
	return open
}

// holdCounted is holdRequests that also counts the requests it held.
func holdCounted(t *testing.T, c *kfake.Cluster, key kmsg.Key) (open func(), held *atomic.Int32) {
	release, open := gate(t)
	held = new(atomic.Int32)
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		held.Add(1)
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	return open, held
}

func sleepOrStop(d time.Duration, stop chan struct{}) {
	select {
	case <-time.After(d):
	case <-stop:
	}
}

// Records that expire while the idempotent producer still has no
// producer id say why: the last InitProducerId error.
func TestExpiredWithoutProducerIDSaysWhy(t *testing.T) {
	c := newFake(t, 1)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, Err: fkerr.CoordinatorLoadInProgress, Count: -1})
	cfg := testConfig(c)
	cfg.Linger = 0
	cfg.RequestTimeout = 200 * time.Millisecond
	cfg.DeliveryTimeout = 500 * time.Millisecond
	p := newTestProducer(t, cfg)
	err := p.SendSync(ctxT(t, 10*time.Second), &Record{Topic: "t", Value: []byte("x")})
	if !errors.Is(err, ErrDeliveryTimeout) || !errors.Is(err, kerr.CoordinatorLoadInProgress) {
		t.Fatalf("a record expired while InitProducerId failed: %v, want ErrDeliveryTimeout naming COORDINATOR_LOAD_IN_PROGRESS", err)
	}
}

// A produce refused with CLUSTER_AUTHORIZATION_FAILED makes an idempotent
// producer fail for good, as Java's maybeTransitionToErrorState does:
// that batch gets the broker's error, every later record ErrFatal. A
// producer without idempotence only fails that batch.
func TestClusterAuthorizationOnProduceIsFatal(t *testing.T) {
	for _, idem := range []bool{true, false} {
		t.Run(map[bool]string{true: "idempotent", false: "not idempotent"}[idem], func(t *testing.T) {
			c := newFake(t, 1)
			var once atomic.Bool
			c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if once.Swap(true) {
					return nil, nil, false
				}
				return produceResp(r.(*kmsg.ProduceRequest), kerr.ClusterAuthorizationFailed.Code, nil), nil, true
			})
			cfg := testConfig(c)
			cfg.EnableIdempotence = &idem
			p := newTestProducer(t, cfg)
			ctx := ctxT(t, 20*time.Second)
			if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("a")}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
				t.Fatalf("first record: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
			}
			err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("b")})
			if idem && (!errors.Is(err, ErrFatal) || !errors.Is(err, kerr.ClusterAuthorizationFailed)) {
				t.Fatalf("next record: %v, want ErrFatal wrapping CLUSTER_AUTHORIZATION_FAILED", err)
			}
			if !idem && err != nil {
				t.Fatalf("next record without idempotence: %v, want it delivered", err)
			}
		})
	}
}
