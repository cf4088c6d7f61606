package kprod

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
func TestOrderSuccessWaitsForParkedFailure(t *testing.T) {
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
func TestOrderQueuedExpiryWaitsForInFlight(t *testing.T) {
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
