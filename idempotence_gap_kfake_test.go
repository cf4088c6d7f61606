package kprod

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kprod/kprod/kerr"
)

// How the idempotent producer settles sequence gaps and epoch bumps, in
// the cases where the order of events decides between a duplicate, a
// reordering and a correct delivery (Java's TransactionManager: canRetry,
// maybeResolveSequences, bumpIdempotentProducerEpoch). Each case writes a
// batch whose acknowledgement is lost, or refuses one, and then reads the
// partition back.

// partitionValues reads one partition of topic t back, in offset order,
// up to its high watermark.
func partitionValues(t *testing.T, c *kfake.Cluster, part int32) []string {
	t.Helper()
	ctx := ctxT(t, 15*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {part: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = part, -1 // latest: the high watermark
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("ListOffsets: %v", err)
	}
	hwm := resp.Topics[0].Partitions[0].Offset
	var vals []string
	next := int64(0)
	for next < hwm {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of t[%d]: %v", next, hwm, part, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			vals = append(vals, string(r.Value))
			next = r.Offset + 1
		})
	}
	return vals
}

func count(vals []string, v string) (n int) {
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

// An epoch bump that one partition asks for must not renumber another
// partition's batch whose outcome is unknown: under a new producer id, or
// a new epoch, the broker would take its retry as new. Here x, on
// partition 1, is written but its acknowledgement lost, and while x waits
// to be retried partition 0 gets OUT_OF_ORDER_SEQUENCE_NUMBER for the
// next sequence it expects (a real gap) and bumps its epoch. x's retry
// keeps its producer id, epoch and sequence. Kafka keeps producer state
// per partition and recognises it; kfake keeps one epoch per producer id
// and refuses it with INVALID_PRODUCER_EPOCH, which fails x, as in Java.
// Either way x is in the log once.
func TestIdempotentBumpLeavesOtherPartitionsRetries(t *testing.T) {
	c := newFake(t, 2)
	cfg := testConfig(c)
	cfg.RetryBackoff, cfg.RetryBackoffMax = 2*time.Second, 2*time.Second
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	for part := range int32(2) {
		if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("warm")}).ToPartition(part)); err != nil {
			t.Fatal(err)
		}
	}
	lost := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{1}, Err: fkerr.RequestTimedOut})
	errX := make(chan error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("x")}).ToPartition(1), func(_ *Record, err error) { errX <- err })
	if err := lost.Wait(ctx, 1); err != nil {
		t.Fatal(err)
	}
	gap := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{0}, Err: fkerr.OutOfOrderSequenceNumber})
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("y")}).ToPartition(0)); err != nil {
		t.Fatalf("y: %v", err)
	}
	if err := <-errX; err != nil && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("x: %v, want success or (kfake) INVALID_PRODUCER_EPOCH", err)
	}
	if gap.Hits() != 1 {
		t.Fatalf("the gap fault was hit %d times", gap.Hits())
	}
	if got := partitionValues(t, c, 1); count(got, "x") != 1 {
		t.Errorf("partition 1 holds %v: x written %d times", got, count(got, "x"))
	}
	if got := partitionValues(t, c, 0); count(got, "y") != 1 {
		t.Errorf("partition 0 holds %v: y written %d times", got, count(got, "y"))
	}
}

// holdFirstProduce holds the first produce request after arm() until
// release is called, or the test ends (SleepControl lets kfake serve other
// connections meanwhile); held is signalled once it holds it. The
// producer's later requests to the same broker queue behind it on the
// same connection.
func holdFirstProduce(t *testing.T, c *kfake.Cluster) (arm func(), held <-chan struct{}, release func()) {
	var armed atomic.Bool
	heldCh := make(chan struct{})
	rel, open := gate(t)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if armed.Swap(false) {
			close(heldCh)
			c.SleepControl(func() { <-rel })
		}
		return nil, nil, false
	})
	return func() { armed.Store(true) }, heldCh, open
}

// waitInFlight waits until the producer has n produce requests in flight.
func waitInFlight(t *testing.T, p *Producer, n int64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d produce requests in flight", n), func() bool { return p.Metrics().RequestsInFlight >= n })
}

// gapProducer is the producer of the cases below: one batch per record
// (linger 0), the retry backoff given, and request and delivery timeouts
// of timeout (0: the defaults), with a ctx for its Sends.
func gapProducer(t *testing.T, c *kfake.Cluster, backoff, timeout time.Duration) (*Producer, context.Context) {
	cfg := testConfig(c)
	cfg.Linger = 0
	cfg.RetryBackoff, cfg.RetryBackoffMax = backoff, backoff
	if timeout > 0 {
		cfg.RequestTimeout, cfg.DeliveryTimeout = timeout, timeout
	}
	return newTestProducer(t, cfg), ctxT(t, 30*time.Second)
}

// A batch that expires in its deque while a later batch of the partition
// waits to be retried is not a gap yet: the retry's answer may show the
// broker wrote both. Here a and b are both written with their
// acknowledgements lost; a expires before its retry, b is retried with its
// sequence and recognised, and no bump renumbers (and duplicates) b.
func TestIdempotentExpiredBatchSettledByLaterRetry(t *testing.T) {
	c := newFake(t, 1)
	arm, held, release := holdFirstProduce(t, c)
	// a is sent at 0 and b at 2 s; both are answered (written, the
	// acknowledgement lost) when b is in flight, at about 2 s, and are
	// due to be retried at about 4 s. a expires at 3 s, in its deque; b
	// would expire at 5 s, after its retry: a second each way.
	p, ctx := gapProducer(t, c, 2*time.Second, 3*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	lost := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: fkerr.RequestTimedOut, Count: 2})
	arm()
	errA, errB := make(chan error, 1), make(chan error, 1)
	p.Send(ctx, &Record{Topic: "t", Value: []byte("a")}, func(_ *Record, err error) { errA <- err })
	<-held
	time.Sleep(2 * time.Second)
	p.Send(ctx, &Record{Topic: "t", Value: []byte("b")}, func(_ *Record, err error) { errB <- err })
	waitInFlight(t, p, 2)
	release()
	if err := <-errA; !errors.Is(err, ErrDeliveryTimeout) {
		t.Fatalf("a: %v, want ErrDeliveryTimeout", err)
	}
	if err := <-errB; err != nil {
		t.Fatalf("b: %v", err)
	}
	if lost.Hits() != 2 {
		t.Fatalf("lost-acknowledgement fault hit %d times, want 2", lost.Hits())
	}
	if got := partitionValues(t, c, 0); !slices.Equal(got, []string{"warm", "a", "b"}) {
		t.Errorf("partition holds %v, want [warm a b]", got)
	}
}

// A broker with no state for the producer on a partition takes any first
// sequence: had b been in flight behind a, and a been refused while b was
// written, a could never be written in order (Java fails it after
// delivery.timeout.ms, and an epoch bump would write b twice, after a).
// So until a batch of the partition is acknowledged in the epoch, the
// producer sends one at a time: b waits for a, a is retried, and both are
// written, in order.
func TestIdempotentFirstBatchOfPartitionAlone(t *testing.T) {
	c := newFake(t, 2)
	// Another producer writes first, so that the partition takes a first
	// sequence other than 0 (KAFKA-15591 refuses it on an empty log).
	other, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	err = other.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Partition: 0, Value: []byte("other")}).FirstErr()
	other.Close()
	if err != nil {
		t.Fatal(err)
	}
	arm, held, release := holdFirstProduce(t, c)
	p, ctx := gapProducer(t, c, 500*time.Millisecond, 3*time.Second)
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("warm")}).ToPartition(1)); err != nil {
		t.Fatal(err) // the producer id, not yet used on partition 0
	}
	refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Partitions: []int32{0}, Err: fkerr.NotEnoughReplicas})
	arm()
	errA, errB := make(chan error, 1), make(chan error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("a")}).ToPartition(0), func(_ *Record, err error) { errA <- err })
	<-held
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("b")}).ToPartition(0), func(_ *Record, err error) { errB <- err })
	time.Sleep(300 * time.Millisecond) // b's chance to go, which it must not take
	if n := p.Metrics().RequestsInFlight; n != 1 {
		t.Fatalf("%d produce requests in flight while a is unanswered, want 1 (a alone)", n)
	}
	release()
	if err := <-errA; err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := <-errB; err != nil {
		t.Fatalf("b: %v", err)
	}
	if refused.Hits() != 1 {
		t.Fatalf("the refusal was hit %d times", refused.Hits())
	}
	if got := partitionValues(t, c, 0); !slices.Equal(got, []string{"other", "a", "b"}) {
		t.Errorf("partition holds %v, want [other a b]", got)
	}
}

// A gap found while an earlier batch is being retried waits for that
// batch: z is written with its acknowledgement lost, a is refused for good
// (nothing written), and b comes back OUT_OF_ORDER_SEQUENCE_NUMBER for the
// sequence after a. Bumping then would renumber z, which the broker would
// write again; z is retried first and recognised, and only then does b
// bump the epoch.
func TestIdempotentGapWaitsForEarlierRetry(t *testing.T) {
	c := newFake(t, 1)
	arm, held, release := holdFirstProduce(t, c)
	p, ctx := gapProducer(t, c, time.Second, 0)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("warm")}); err != nil {
		t.Fatal(err)
	}
	lost := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: fkerr.RequestTimedOut})
	bad := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "t", Err: fkerr.InvalidTimestamp})
	arm()
	errs := map[string]chan error{"z": make(chan error, 1), "a": make(chan error, 1), "b": make(chan error, 1)}
	send := func(v string) {
		p.Send(ctx, &Record{Topic: "t", Value: []byte(v)}, func(_ *Record, err error) { errs[v] <- err })
	}
	send("z")
	<-held
	send("a")
	waitInFlight(t, p, 2)
	send("b")
	waitInFlight(t, p, 3)
	release()
	if err := <-errs["z"]; err != nil {
		t.Fatalf("z: %v", err)
	}
	if err := <-errs["a"]; !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("a: %v, want INVALID_TIMESTAMP", err)
	}
	if err := <-errs["b"]; err != nil {
		t.Fatalf("b: %v", err)
	}
	if lost.Hits() != 1 || bad.Hits() != 1 {
		t.Fatalf("fault hits: lost %d, bad %d", lost.Hits(), bad.Hits())
	}
	if got := partitionValues(t, c, 0); !slices.Equal(got, []string{"warm", "z", "b"}) {
		t.Errorf("partition holds %v, want [warm z b]", got)
	}
}
