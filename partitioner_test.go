package kprod

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/murmur"
	"github.com/kprod/kprod/internal/recbatch"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicMeta is metadata of topic "t" with the given leaders (-1: none).
func topicMeta(leaders ...int32) *cluster.Topic {
	mt := &cluster.Topic{Name: "t"}
	for i, l := range leaders {
		mt.Partitions = append(mt.Partitions, cluster.Partition{ID: int32(i), Leader: l})
	}
	return mt
}

// TestLoadStatsJavaExample is the example worked through in the comment
// of Java's BuiltInPartitioner.updatePartitionLoadStats: queue sizes
// 0 3 1 give weights 4 1 3, running sums 4 5 8, and random numbers 0-3
// pick the first partition, 4 the second, 5-7 the third.
func TestLoadStatsJavaExample(t *testing.T) {
	ls, ok := buildLoadStats([]int32{0, 3, 1}, []int32{10, 11, 12}, 3)
	if !ok {
		t.Fatal("no load stats for unequal queues")
	}
	if !slices.Equal(ls.cft, []int32{4, 5, 8}) {
		t.Fatalf("cumulative frequency table %v, want [4 5 8]", ls.cft)
	}
	want := []int32{10, 10, 10, 10, 11, 12, 12, 12}
	for draw := range int32(24) {
		if got := ls.pick(draw); got != want[draw%8] {
			t.Errorf("draw %d picked %d, want %d", draw, got, want[draw%8])
		}
	}
	if got := ls.pick(math.MaxInt32); got != want[math.MaxInt32%8] {
		t.Errorf("draw MaxInt32 picked %d", got)
	}
}

func TestLoadStatsWhenUniform(t *testing.T) {
	for _, tt := range []struct {
		name  string
		sizes []int32
		total int
		ok    bool
	}{
		{"one partition", []int32{5}, 1, false},
		{"none eligible", nil, 4, false},
		{"all equal, all eligible", []int32{2, 2, 2}, 3, false},
		// Java keeps statistics when some partitions are left out, even
		// if the rest are equal: the draw is then uniform among those.
		{"all equal, one left out", []int32{2, 2}, 3, true},
		{"one eligible of many", []int32{7}, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ids := make([]int32, len(tt.sizes))
			for i := range ids {
				ids[i] = int32(i)
			}
			ls, ok := buildLoadStats(slices.Clone(tt.sizes), ids, tt.total)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && len(tt.sizes) == 2 {
				if !slices.Equal(ls.cft, []int32{1, 2}) {
					t.Fatalf("cft %v, want [1 2] (equal weights)", ls.cft)
				}
			}
		})
	}
}

func TestUniformPartitionUsesPartitionsWithLeader(t *testing.T) {
	mt := topicMeta(-1, 1, -1, 2)
	seen := map[int32]int{}
	for draw := range int32(100) {
		seen[uniformPartition(mt, draw)]++
	}
	if len(seen) != 2 || seen[1] != 50 || seen[3] != 50 {
		t.Fatalf("picks %v, want partitions 1 and 3 only, evenly", seen)
	}
	// No leader anywhere: Java falls back to all partitions.
	mt = topicMeta(-1, -1, -1)
	for draw := range int32(6) {
		if got := uniformPartition(mt, draw); got != draw%3 {
			t.Fatalf("draw %d: %d, want %d", draw, got, draw%3)
		}
	}
}

// fakeQueues builds a producer and a topic whose partition queues hold
// batches of the given creation times (one slice per partition; nil for
// a partition without a queue), for testing what the partitioner reads
// from the accumulator without a broker.
func fakeQueues(cfg Config, queues [][]time.Time) (*Producer, *topicState) {
	acc := newAccumulator(newBufferPool(1<<20, 1024), 1024, cfg.Linger, recbatch.SealOptions{}, func() {})
	p := &Producer{cfg: cfg, acc: acc}
	t := acc.topic("t")
	for i, created := range queues {
		if created == nil {
			continue
		}
		q := acc.queue(t, int32(i))
		for _, c := range created {
			q.batches = append(q.batches, &batch{q: q, created: c, full: true})
		}
	}
	return p, t
}

func TestLoadStatsFromQueues(t *testing.T) {
	now := time.Now()
	batches := func(n int) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = now
		}
		return out
	}
	cfg := DefaultConfig()

	t.Run("queue sizes", func(t *testing.T) {
		p, ts := fakeQueues(cfg, [][]time.Time{batches(3), {}, batches(1)})
		ls, ok := p.loadStats(ts, topicMeta(1, 2, 3), now, nil)
		if !ok || !slices.Equal(ls.cft, []int32{1, 5, 8}) || !slices.Equal(ls.ids, []int32{0, 1, 2}) {
			t.Fatalf("stats %+v %v, want cft [1 5 8] (weights 1 4 3)", ls, ok)
		}
		// nextPartition draws with them.
		for draw, want := range []int32{0, 1, 1, 1, 1, 2, 2, 2} {
			if got := p.nextPartition(ts, topicMeta(1, 2, 3), int32(draw)); got != want {
				t.Errorf("draw %d: partition %d, want %d", draw, got, want)
			}
		}
	})
	t.Run("partitions without leader are left out", func(t *testing.T) {
		p, ts := fakeQueues(cfg, [][]time.Time{batches(2), batches(5), {}})
		ls, ok := p.loadStats(ts, topicMeta(1, -1, 3), now, nil)
		if !ok || !slices.Equal(ls.ids, []int32{0, 2}) || !slices.Equal(ls.cft, []int32{1, 4}) {
			t.Fatalf("stats %+v %v, want ids [0 2] cft [1 4]", ls, ok)
		}
	})
	t.Run("uniform until every partition has a queue", func(t *testing.T) {
		p, ts := fakeQueues(cfg, [][]time.Time{batches(2), nil, {}})
		if ls, ok := p.loadStats(ts, topicMeta(1, 2, 3), now, nil); ok {
			t.Fatalf("stats %+v with a partition that never had a queue; Java draws uniformly then", ls)
		}
	})
	t.Run("adaptive disabled", func(t *testing.T) {
		c := cfg
		c.PartitionerAdaptivePartitioning = false
		p, ts := fakeQueues(c, [][]time.Time{batches(9), {}, {}})
		seen := map[int32]bool{}
		for draw := range int32(3) {
			seen[p.nextPartition(ts, topicMeta(1, 2, 3), draw)] = true
		}
		if len(seen) != 3 {
			t.Fatalf("uniform draws 0..2 picked %v, want all three partitions", seen)
		}
	})
	t.Run("availability timeout", func(t *testing.T) {
		c := cfg
		c.PartitionerAvailabilityTimeout = time.Second
		old := []time.Time{now.Add(-5 * time.Second)}
		// Partition 0's broker (1) has had a batch waiting 5s: both of
		// its partitions (0 and 3) are left out, whatever their queues.
		p, ts := fakeQueues(c, [][]time.Time{old, batches(2), {}, {}})
		ls, ok := p.loadStats(ts, topicMeta(1, 2, 3, 1), now, nil)
		if !ok || !slices.Equal(ls.ids, []int32{1, 2}) {
			t.Fatalf("stats %+v %v, want only partitions 1 and 2 (broker 1 is unavailable)", ls, ok)
		}
		// Within the timeout nothing is left out.
		ls, ok = p.loadStats(ts, topicMeta(1, 2, 3, 1), now.Add(-4500*time.Millisecond), nil)
		if !ok || len(ls.ids) != 4 {
			t.Fatalf("stats %+v %v, want all 4 partitions", ls, ok)
		}
		// Every broker unavailable: uniform among partitions with a leader.
		p, ts = fakeQueues(c, [][]time.Time{old, old, old, old})
		if ls, ok := p.loadStats(ts, topicMeta(1, 2, 3, 1), now, nil); ok {
			t.Fatalf("stats %+v with every broker unavailable, want none", ls)
		}
	})
	t.Run("retried batch waits from the end of its backoff", func(t *testing.T) {
		c := cfg
		c.PartitionerAvailabilityTimeout = time.Second
		p, ts := fakeQueues(c, [][]time.Time{{now.Add(-time.Minute)}, {}})
		q := (*ts.parts.Load())[0]
		q.batches[0].attempts, q.batches[0].retryAt = 3, now.Add(-100*time.Millisecond)
		if ls, ok := p.loadStats(ts, topicMeta(1, 2), now, nil); !ok || len(ls.ids) != 2 {
			t.Fatalf("stats %+v %v, want both partitions: the retry became sendable 100ms ago", ls, ok)
		}
	})
}

// stickyProbe sends unkeyed records of one size to a producer that keeps
// its batches (linger 1h) and reports after which records the sticky
// partition was switched (the partitioner reset its byte count, so that
// it counts just this record: with the batch header when the record
// opened a batch). After
// each record numbered in flushAfter it flushes (sends every batch).
func stickyProbe(t *testing.T, batchSize, valueLen, records int, flushAfter ...int) (switchedAfter []int) {
	c := newFake(t, 50)
	cfg := testConfig(c)
	cfg.BatchSize = batchSize
	cfg.Linger = time.Hour
	cfg.DeliveryTimeout = 2 * time.Hour
	p := newTestProducer(t, cfg)
	ts := time.Now()
	size := recbatch.RecordSize(0, 0, nil, make([]byte, valueLen), nil)
	for i := 1; i <= records; i++ {
		if _, err := p.send(context.Background(), &Record{Topic: "t", Value: make([]byte, valueLen), Timestamp: ts}, func(*Record, error) {}); err != nil {
			t.Fatal(err)
		}
		if _, bytes := stickyUnpack(p.acc.topic("t").sticky.Load()); (bytes == size || bytes == size+recbatch.HeaderSize) && i > 1 {
			switchedAfter = append(switchedAfter, i-1)
		}
		if slices.Contains(flushAfter, i) {
			if err := p.Flush(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return switchedAfter
}

// TestStickySwitchOnceItsBatchWasSent: once batch.size bytes went to the
// partition, the switch comes before the next append when its batches
// were all sent meanwhile (say by linger.ms before the last one filled),
// as Java's RecordAccumulator.partitionChanged does, not after a new
// batch was opened there.
func TestStickySwitchOnceItsBatchWasSent(t *testing.T) {
	// 99-byte records, batch.size 1000: 9 records (891 bytes), sent; 2
	// more (1089 bytes) in a batch that still takes records, sent; the
	// 12th goes elsewhere.
	vlen := valueLenFor(t, 99)
	got := stickyProbe(t, 1000, vlen, 12, 9, 11)
	if want := []int{11}; !slices.Equal(got, want) {
		t.Fatalf("switched after records %v, want %v", got, want)
	}
}

// TestStickySwitchAtBatchBoundary: a batch that refuses a record is
// closed, as Java's tryAppend closes it, so that once batch.size bytes
// went to the partition the switch comes at the batch boundary, before a
// new batch of one record or two is opened there.
func TestStickySwitchAtBatchBoundary(t *testing.T) {
	// 101-byte records, batch.size 1000: a batch holds 9 (61 + 909).
	// Java counts a batch's header with its first record: 970 bytes
	// after 9 records; the 10th closes the first batch and opens a
	// second (1132 bytes), no switch yet (970 < batch.size when it
	// closed); the 19th closes the second, with 1940 bytes produced:
	// switch, and the 19th goes to the next partition.
	vlen := valueLenFor(t, 101)
	got := stickyProbe(t, 1000, vlen, 45)
	if want := []int{18, 36}; !slices.Equal(got, want) {
		t.Fatalf("switched after records %v, want %v", got, want)
	}
}

// TestStickySwitchWhenLastBatchFull: once batch.size bytes went to the
// partition, the switch comes as soon as its last batch takes no more
// records.
func TestStickySwitchWhenLastBatchFull(t *testing.T) {
	// 313-byte records, batch.size 1000: three fill a batch exactly
	// (61 + 939), and Java counts those 1000 bytes (header included):
	// batch.size went to the partition and its last batch is full, so
	// the switch comes after every third record.
	vlen := valueLenFor(t, 313)
	got := stickyProbe(t, 1000, vlen, 14)
	if want := []int{3, 6, 9, 12}; !slices.Equal(got, want) {
		t.Fatalf("switched after records %v, want %v", got, want)
	}
}

// valueLenFor finds the value length giving an encoded record of size
// bytes (null key, no headers, first in its batch).
func valueLenFor(t *testing.T, size int) int {
	for n := range size {
		if recbatch.RecordSize(0, 0, nil, make([]byte, n), nil) == size {
			return n
		}
	}
	t.Fatalf("no value length gives a %d-byte record", size)
	return 0
}

func TestKeyedRecordsUseMurmur2(t *testing.T) {
	p := &Producer{cfg: DefaultConfig()}
	mt := topicMeta(1, 2, 3, 1, 2, 3, 1)
	for i := range 1000 {
		key := []byte(fmt.Sprint("key-", i))
		got, err := p.partition(nil, mt, &Record{Topic: "t", Key: key})
		if err != nil || got != murmur.Partition(key, 7) {
			t.Fatalf("key %q: partition %d (%v), want %d", key, got, err, murmur.Partition(key, 7))
		}
	}
	// An empty key is a key; it is hashed, not spread.
	if got, _ := p.partition(nil, mt, &Record{Topic: "t", Key: []byte{}}); got != murmur.Partition(nil, 7) {
		t.Fatalf("empty key: %d", got)
	}
}

func TestRoundRobinPartitioner(t *testing.T) {
	rr := RoundRobinPartitioner()
	r := &Record{Topic: "a", Key: []byte("ignored")}
	var got []int32
	for range 7 {
		got = append(got, rr.Partition(r, 5, []int32{0, 2, 3}))
	}
	if want := []int32{0, 2, 3, 0, 2, 3, 0}; !slices.Equal(got, want) {
		t.Fatalf("available [0 2 3]: %v, want %v", got, want)
	}
	// Another topic has its own counter; none available: all in turn.
	got = got[:0]
	for range 4 {
		got = append(got, rr.Partition(&Record{Topic: "b"}, 3, nil))
	}
	if want := []int32{0, 1, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("no partition available: %v, want %v", got, want)
	}
}

func TestRoundRobinPartitionerKfake(t *testing.T) {
	c := newFake(t, 4)
	cfg := testConfig(c)
	if err := cfg.Set("partitioner.class", JavaRoundRobinPartitioner); err != nil {
		t.Fatal(err)
	}
	p := newTestProducer(t, cfg)
	var got []int32
	for i := range 8 {
		r := &Record{Topic: "t", Key: []byte("same key"), Value: []byte(fmt.Sprint(i))}
		if err := p.SendSync(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Partition)
	}
	if want := []int32{0, 1, 2, 3, 0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v (keys are ignored)", got, want)
	}
}

func TestUserPartitionerBadResults(t *testing.T) {
	c := newFake(t, 3)
	cfg := testConfig(c)
	cfg.Partitioner = PartitionerFunc(func(r *Record, n int32, available []int32) int32 {
		if n != 3 || !slices.Equal(available, []int32{0, 1, 2}) {
			panic(fmt.Sprintf("n %d available %v", n, available))
		}
		switch string(r.Value) {
		case "negative":
			return -1
		case "too large":
			return 3
		case "panic":
			panic("boom")
		}
		return 2
	})
	p := newTestProducer(t, cfg)
	for _, tt := range []struct {
		value string
		want  error
	}{
		{"negative", ErrInvalidRecord},
		{"too large", ErrUnknownPartition},
		{"panic", ErrInvalidRecord},
		{"fine", nil},
	} {
		r := &Record{Topic: "t", Value: []byte(tt.value)}
		err := p.SendSync(context.Background(), r)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("%s: got %v, want %v", tt.value, err, tt.want)
		}
		if kerr.IsRetriable(err) {
			t.Errorf("%s: IsRetriable(%v): the partitioner picks the same again", tt.value, err)
		}
		if tt.want == nil && r.Partition != 2 {
			t.Errorf("%s: partition %d, want 2", tt.value, r.Partition)
		}
	}
	// An explicit partition bypasses the partitioner.
	r := (&Record{Topic: "t", Value: []byte("negative")}).ToPartition(1)
	if err := p.SendSync(context.Background(), r); err != nil || r.Partition != 1 {
		t.Fatalf("explicit partition: %v, partition %d", err, r.Partition)
	}
}

func TestAvailablePartitions(t *testing.T) {
	if got := availablePartitions(topicMeta(1, 2, 3)); !slices.Equal(got, []int32{0, 1, 2}) || cap(got) != 3 {
		t.Fatalf("all led: %v (cap %d)", got, cap(got))
	}
	if got := availablePartitions(topicMeta(make([]int32, 200)...)); len(got) != 200 || got[199] != 199 {
		t.Fatalf("200 partitions: len %d", len(got))
	}
	if got := availablePartitions(topicMeta(-1, 2, -1, 4)); !slices.Equal(got, []int32{1, 3}) {
		t.Fatalf("some without leader: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { availablePartitions(topicMeta0) }); n != 0 {
		t.Fatalf("%v allocations when every partition has a leader", n)
	}
}

var topicMeta0 = topicMeta(1, 2, 3, 1, 2, 3)

// TestStickyPartitionAllocs: the unkeyed path allocates nothing, switches
// included, for topics of up to 64 partitions.
func TestStickyPartitionAllocs(t *testing.T) {
	mt := topicMeta0
	p, ts := fakeQueues(DefaultConfig(), [][]time.Time{{}, {}, {}, {}, {}, {}})
	stickyNoAllocs(t, p, ts, mt)
}

// stickyNoAllocs fails t if choosing the sticky partition and switching it
// (batch.size 1: on every record) allocates.
func stickyNoAllocs(t *testing.T, p *Producer, ts *topicState, mt *cluster.Topic) {
	t.Helper()
	p.cfg.BatchSize = 1 // switch on every record
	n := testing.AllocsPerRun(1000, func() {
		part := p.stickyCurrent(ts, mt)
		p.stickyAppended(ts, mt, part, 200, true)
	})
	if n != 0 {
		t.Fatalf("%v allocations per unkeyed record", n)
	}
}

// TestUnkeyedSpreadKfake: unkeyed records reach every partition.
func TestUnkeyedSpreadKfake(t *testing.T) {
	c := newFake(t, 6)
	cfg := testConfig(c)
	cfg.BatchSize = 1024
	p := newTestProducer(t, cfg)
	o := newOutcomes(t)
	recs := make([]*Record, 3000)
	for i := range recs {
		recs[i] = &Record{Topic: "t", Value: make([]byte, 100)}
		p.Send(context.Background(), recs[i], o.cb())
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.wait(t, 10*time.Second)
	count := map[int32]int{}
	for _, r := range recs {
		count[r.Partition]++
	}
	for part := range int32(6) {
		// 300 KB over 6 partitions in 1 KB stints: ~50 KB each.
		if count[part] < 100 {
			t.Errorf("partition %d got %d of %d records: %v", part, count[part], len(recs), count)
		}
	}
}

// TestAdaptiveAvoidsSlowBrokerKfake: one broker of the fake cluster holds
// every produce request for 100 ms; with adaptive partitioning its
// partitions get clearly fewer unkeyed records than their uniform share,
// without it about their share.
func TestAdaptiveAvoidsSlowBrokerKfake(t *testing.T) {
	share := func(adaptive bool) float64 {
		c := newFake(t, 6)
		// Two partitions per broker: kfake places leaders at random,
		// and all six on one broker (1 run in 243) leaves adaptive
		// partitioning nowhere else to go.
		for part := range int32(6) {
			if err := c.MoveTopicPartition("t", part, part%3); err != nil {
				t.Fatal(err)
			}
		}
		var slowNode atomic.Int32
		slowNode.Store(c.LeaderFor("t", 0))
		var slowed sync.WaitGroup
		c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if c.CurrentNode() == slowNode.Load() {
				slowed.Add(1)
				c.SleepControl(func() { time.Sleep(100 * time.Millisecond); slowed.Done() })
			}
			return nil, nil, false
		})
		slowParts := map[int32]bool{}
		for part := range int32(6) {
			if c.LeaderFor("t", part) == slowNode.Load() {
				slowParts[part] = true
			}
		}
		cfg := testConfig(c)
		cfg.BatchSize = 2048
		cfg.PartitionerAdaptivePartitioning = adaptive
		p := newTestProducer(t, cfg)
		o := newOutcomes(t)
		var recs []*Record
		// ~2 MB/s of 200-byte records for 1.5 s.
		end := time.Now().Add(1500 * time.Millisecond)
		for time.Now().Before(end) {
			for range 20 {
				r := &Record{Topic: "t", Value: make([]byte, 200)}
				recs = append(recs, r)
				p.Send(context.Background(), r, o.cb())
			}
			time.Sleep(2 * time.Millisecond)
		}
		slowNode.Store(-1) // let the rest through at full speed
		if err := p.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		o.wait(t, 30*time.Second)
		slowed.Wait()
		n := 0
		for _, r := range recs {
			if slowParts[r.Partition] {
				n++
			}
		}
		fair := float64(len(slowParts)) / 6
		got := float64(n) / float64(len(recs))
		t.Logf("adaptive=%v: %d of %d records (%.1f%%) to the slow broker's %d partitions (uniform share %.1f%%)",
			adaptive, n, len(recs), 100*got, len(slowParts), 100*fair)
		return got / fair
	}
	uniform := share(false)
	adaptive := share(true)
	// Idle, adaptive gives it about 0.2; without, about 1. Loose for a
	// loaded machine, as TestCompatAdaptivePausedBroker.
	if adaptive > 0.75 {
		t.Errorf("adaptive: the slow broker got %.2f of its uniform share, want < 0.75", adaptive)
	}
	if uniform < 0.6 {
		t.Errorf("not adaptive: the slow broker got %.2f of its uniform share, want about 1", uniform)
	}
}

// A sticky record that waited for memory goes where the sticky partition
// is once it has the memory (Java's second partitionChanged), not to the
// partition that was sticky when it began to wait: under back-pressure
// every waiter would otherwise pile onto that one partition.
func TestStickyRecheckedAfterMemoryWait(t *testing.T) {
	c := newFake(t, 6)
	cfg := testConfig(c)
	cfg.Linger = time.Hour
	cfg.DeliveryTimeout = 2 * time.Hour
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	metadataReady(t, p, "t")
	reached, release := make(chan struct{}), make(chan struct{})
	p.acc.testAfterAllocate = func() { close(reached); <-release }
	r := &Record{Topic: "t", Value: []byte("x")}
	done := make(chan error, 1)
	go p.Send(ctx, r, func(_ *Record, err error) { done <- err })
	waitClosed(t, reached, release, "the Send to get its memory")
	p.acc.testAfterAllocate = nil
	ts := p.acc.topic("t")
	old, _ := stickyUnpack(ts.sticky.Load())
	// Another Send moves the sticky partition on meanwhile.
	mt := ts.metadata(p.cl.Snapshot())
	now := old
	for range 100 {
		if now = p.stickySwitch(ts, mt, old); now != old {
			break
		}
	}
	if now == old {
		t.Fatal("the sticky partition did not move: the test would test nothing")
	}
	close(release)
	for deadline := time.Now().Add(5 * time.Second); ; {
		p.acc.incMu.Lock()
		n := len(p.acc.incomplete)
		p.acc.incMu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the record was not buffered")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Partition != now {
		t.Fatalf("the record went to %d, the sticky partition before its wait for memory; it is %d now", r.Partition, now)
	}
	if m := p.Metrics(); m.BufferAvailableBytes != cfg.BufferMemory {
		t.Errorf("buffer-available-bytes %d after the flush, want all of buffer.memory (%d): the memory kept across the switch was lost", m.BufferAvailableBytes, cfg.BufferMemory)
	}
}

// The memory a sticky record got before its partition moved goes with it,
// even when the new partition's compression estimate would want a larger
// buffer: it does not wait for memory a second time (Java keeps its
// buffer), which blocked Send about twice max.block.ms and then failed it.
func TestStickySwitchKeepsHeldMemory(t *testing.T) {
	c := newFake(t, 6)
	cfg := testConfig(c)
	cfg.CompressionType = CompressionLz4
	cfg.BatchSize = 16384
	cfg.BufferMemory = 4 * 16384
	cfg.MaxBlock = 400 * time.Millisecond
	cfg.Linger = time.Hour
	cfg.DeliveryTimeout = 2 * time.Hour
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 10*time.Second)
	metadataReady(t, p, "t")
	ts := p.acc.topic("t")
	ts.ratio.Store(math.Float32bits(0.25)) // compresses 4:1: a batch may hold up to 4 x batch.size raw
	mt := ts.metadata(p.cl.Snapshot())
	old, _ := stickyUnpack(ts.sticky.Load())
	if old < 0 {
		old = p.stickyCurrent(ts, mt)
	}
	for i := range int32(6) {
		q := p.acc.queue(ts, i)
		if i != old {
			q.lastRaw.Store(16384) // its next batch: 2 x batch.size
		}
	}
	// All of buffer.memory in use; a quarter comes back after 300ms.
	all, err := p.pool.allocate(ctx, 4*16384, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		p.pool.release(all[:0:0], 16384)
	}()
	var once sync.Once
	p.acc.testAfterAllocate = func() {
		once.Do(func() { // another Send moves the sticky partition on meanwhile
			for range 100 {
				if now := p.stickySwitch(ts, mt, old); now != old {
					return
				}
			}
			t.Error("the sticky partition did not move")
		})
	}
	done := make(chan error, 1)
	start := time.Now()
	p.Send(ctx, &Record{Topic: "t", Value: []byte("x")}, func(_ *Record, err error) { done <- err })
	blocked := time.Since(start)
	select {
	case err := <-done: // failed in Send
		t.Fatalf("Send failed after %v: %v", blocked, err)
	default:
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the record: %v", err)
	}
}
