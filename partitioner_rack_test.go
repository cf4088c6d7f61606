package kprod

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/murmur"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rack-aware partitioning (KIP-1123, partitioner.rack.aware): the choice
// with synthetic metadata, then against kfake.

// rackTopicMeta is topicMeta with the leaders' racks (racks maps a broker
// to its rack) in LedFromRack, as a metadata snapshot has them.
func rackTopicMeta(racks map[int32]string, leaders ...int32) *cluster.Topic {
	mt := topicMeta(leaders...)
	for i, l := range leaders {
		if rack := racks[l]; l >= 0 && rack != "" {
			if mt.LedFromRack == nil {
				mt.LedFromRack = map[string][]int32{}
			}
			mt.LedFromRack[rack] = append(mt.LedFromRack[rack], int32(i))
		}
	}
	return mt
}

// threeRacks puts broker 1 in rack a, 2 in b and 3 in c; broker 4 has
// no rack.
var threeRacks = map[int32]string{1: "a", 2: "b", 3: "c"}

func rackConfig(rack string) Config {
	cfg := DefaultConfig()
	cfg.PartitionerRackAware = true
	cfg.ClientRack = rack
	return cfg
}

// drawCounts counts the partitions nextPartition picks for draws 0..n-1.
func drawCounts(p *Producer, ts *topicState, mt *cluster.Topic, n int) map[int32]int {
	seen := map[int32]int{}
	for draw := range int32(n) {
		seen[p.nextPartition(ts, mt, draw)]++
	}
	return seen
}

// wantEvenly checks that the draws picked exactly the partitions of want,
// each as often.
func wantEvenly(t *testing.T, seen map[int32]int, n int, want ...int32) {
	t.Helper()
	got := slices.Sorted(maps.Keys(seen))
	if !slices.Equal(got, want) {
		t.Fatalf("picked partitions %v (%v), want %v", got, seen, want)
	}
	for _, part := range want {
		if seen[part] != n/len(want) {
			t.Fatalf("picks %v, want each of %v %d times", seen, want, n/len(want))
		}
	}
}

// TestRackAwareUniformDraw: without load statistics the next sticky
// partition is drawn evenly among the partitions led from client.rack,
// else among all partitions with a leader.
func TestRackAwareUniformDraw(t *testing.T) {
	// Partitions 0..7 led by brokers 1 2 3 1 -1 2 4 1: rack a leads
	// 0, 3 and 7; partition 4 has no leader; broker 4 has no rack.
	mt := rackTopicMeta(threeRacks, 1, 2, 3, 1, -1, 2, 4, 1)
	const n = 420 // a multiple of 1, 3 and 7
	for _, tt := range []struct {
		name string
		cfg  Config
		want []int32
	}{
		{"rack a", rackConfig("a"), []int32{0, 3, 7}},
		{"rack c leads one partition", rackConfig("c"), []int32{2}},
		// No leader in the rack: all partitions with a leader, as Java.
		{"no leader in the rack", rackConfig("z"), []int32{0, 1, 2, 3, 5, 6, 7}},
		{"rack awareness off", func() Config { c := rackConfig("a"); c.PartitionerRackAware = false; return c }(), []int32{0, 1, 2, 3, 5, 6, 7}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, adaptive := range []bool{false, true} {
				// With adaptive on but no queue for any partition yet,
				// there are no load statistics: the draw is uniform.
				cfg := tt.cfg
				cfg.PartitionerAdaptivePartitioning = adaptive
				p, ts := fakeQueues(cfg, nil)
				wantEvenly(t, drawCounts(p, ts, mt, n), n, tt.want...)
			}
		})
	}

	// No partition has a leader: any partition, as without rack awareness.
	p, ts := fakeQueues(rackConfig("a"), nil)
	wantEvenly(t, drawCounts(p, ts, rackTopicMeta(threeRacks, -1, -1, -1), 3), 3, 0, 1, 2)
}

// TestRackAwareStickyPartition: the sticky partition, the first and
// every one switched to, is one led from client.rack.
func TestRackAwareStickyPartition(t *testing.T) {
	mt := rackTopicMeta(threeRacks, 1, 2, 3, 1, 2, 3)
	p, ts := fakeQueues(rackConfig("b"), [][]time.Time{{}, {}, {}, {}, {}, {}})
	p.cfg.BatchSize = 1 // switch on every record
	seen := map[int32]int{}
	for range 1000 {
		part := p.stickyCurrent(ts, mt)
		seen[part]++
		p.stickyAppended(ts, mt, part, 100, true)
	}
	if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, []int32{1, 4}) {
		t.Fatalf("sticky partitions %v, want only 1 and 4 (led from rack b)", seen)
	}
}

// TestRackAwareKeyedRecords: keys are hashed as always; only with
// partitioner.ignore.keys do keyed records follow the rack. A custom
// Partitioner is not affected, as in Java.
func TestRackAwareKeyedRecords(t *testing.T) {
	mt := rackTopicMeta(threeRacks, 1, 2, 3, 1, 2, 3, 1)
	p, ts := fakeQueues(rackConfig("c"), nil)
	for i := range 1000 {
		key := []byte(fmt.Sprint("key-", i))
		got, err := p.partition(ts, mt, &Record{Topic: "t", Key: key})
		if err != nil || got != murmur.Partition(key, 7) {
			t.Fatalf("key %q: partition %d (%v), want %d", key, got, err, murmur.Partition(key, 7))
		}
	}
	p.cfg.PartitionerIgnoreKeys = true
	for i := range 100 {
		got, err := p.partition(ts, mt, &Record{Topic: "t", Key: []byte(fmt.Sprint("key-", i))})
		if err != nil || (got != 2 && got != 5) {
			t.Fatalf("partitioner.ignore.keys: partition %d (%v), want 2 or 5 (led from rack c)", got, err)
		}
	}
	p.cfg.Partitioner = PartitionerFunc(func(_ *Record, n int32, available []int32) int32 {
		if n != 7 || len(available) != 7 {
			t.Errorf("custom partitioner: %d partitions, available %v; want all 7", n, available)
		}
		return 0
	})
	if got, err := p.partition(ts, mt, &Record{Topic: "t"}); err != nil || got != 0 {
		t.Fatalf("custom partitioner: partition %d (%v), want its choice 0 (led from rack a)", got, err)
	}
}

// TestRackLoadStats: with load statistics, the draw is weighted among the
// rack's partitions alone, as Java's in-rack cumulative frequency table.
func TestRackLoadStats(t *testing.T) {
	t.Run("table of the rack", func(t *testing.T) {
		// Queues 3 0 1 5; the rack leads 1 and 3: weights from their
		// own maximum, 5+1-0 and 5+1-5.
		ls, ok := buildRackLoadStats([]int32{3, 0, 1, 5}, []int32{0, 1, 2, 3}, 4, []int32{1, 3})
		if !ok || !slices.Equal(ls.cft, []int32{6, 7}) || !slices.Equal(ls.ids, []int32{1, 3}) {
			t.Fatalf("stats %+v %v, want cft [6 7] ids [1 3]", ls, ok)
		}
	})
	t.Run("rack partitions not eligible", func(t *testing.T) {
		// The rack leads 4 and 6, which are not in the table (no
		// leader, or a slow broker): the whole table, as without racks.
		ls, ok := buildRackLoadStats([]int32{3, 0, 1, 5}, []int32{0, 1, 2, 3}, 7, []int32{4, 6})
		if !ok || !slices.Equal(ls.cft, []int32{3, 9, 14, 15}) || !slices.Equal(ls.ids, []int32{0, 1, 2, 3}) {
			t.Fatalf("stats %+v %v, want the whole table", ls, ok)
		}
		ls, ok = buildRackLoadStats([]int32{2, 1}, []int32{0, 1}, 2, nil)
		if !ok || !slices.Equal(ls.cft, []int32{1, 3}) {
			t.Fatalf("no partition in the rack: %+v %v, want the whole table", ls, ok)
		}
	})
	t.Run("no statistics where Java keeps none", func(t *testing.T) {
		// Equal queues on every partition: no table, and the uniform
		// draw (TestRackAwareUniformDraw) keeps to the rack.
		if ls, ok := buildRackLoadStats([]int32{2, 2, 2}, []int32{0, 1, 2}, 3, []int32{1}); ok {
			t.Fatalf("stats %+v for equal queues", ls)
		}
		if ls, ok := buildRackLoadStats([]int32{4}, []int32{0}, 1, []int32{0}); ok {
			t.Fatalf("stats %+v for one partition", ls)
		}
	})
	t.Run("equal queues in the rack", func(t *testing.T) {
		// The topic's queues differ, the rack's do not: equal weights.
		ls, ok := buildRackLoadStats([]int32{2, 7, 2, 0}, []int32{0, 1, 2, 3}, 4, []int32{0, 2})
		if !ok || !slices.Equal(ls.cft, []int32{1, 2}) || !slices.Equal(ls.ids, []int32{0, 2}) {
			t.Fatalf("stats %+v %v, want cft [1 2] ids [0 2]", ls, ok)
		}
	})
}

// TestRackAwareAdaptive: the queues the partitioner reads weight the draw
// among the rack's partitions; when the rack's broker is slow
// (partitioner.availability.timeout.ms), the draw goes to the others.
func TestRackAwareAdaptive(t *testing.T) {
	now := time.Now()
	batches := func(n int) []time.Time { return slices.Repeat([]time.Time{now}, n) }
	// Partitions 0..5 led by 1 2 3 1 2 3: rack a leads 0 and 3.
	mt := rackTopicMeta(threeRacks, 1, 2, 3, 1, 2, 3)
	queues := [][]time.Time{batches(2), {}, {}, {}, batches(9), {}}

	p, ts := fakeQueues(rackConfig("a"), queues)
	ls, ok := p.loadStats(ts, mt, now, nil)
	if !ok || !slices.Equal(ls.ids, []int32{0, 3}) || !slices.Equal(ls.cft, []int32{1, 4}) {
		t.Fatalf("stats %+v %v, want ids [0 3] cft [1 4] (weights 2+1-2, 2+1-0)", ls, ok)
	}
	for draw, want := range []int32{0, 3, 3, 3} {
		if got := p.nextPartition(ts, mt, int32(draw)); got != want {
			t.Errorf("draw %d: partition %d, want %d", draw, got, want)
		}
	}

	// Broker 1 has had a batch waiting 5s, longer than the availability
	// timeout: the rack's partitions are left out, the draw is over the
	// rest of the topic.
	cfg := rackConfig("a")
	cfg.PartitionerAvailabilityTimeout = time.Second
	queues[0] = []time.Time{now.Add(-5 * time.Second)}
	p, ts = fakeQueues(cfg, queues)
	ls, ok = p.loadStats(ts, mt, now, nil)
	if !ok || !slices.Equal(ls.ids, []int32{1, 2, 4, 5}) {
		t.Fatalf("stats %+v %v, want partitions 1 2 4 5 (rack a's broker is slow)", ls, ok)
	}
}

// TestRackAwareAllocs: rack awareness adds no allocation to the unkeyed
// path, switches included, uniform or adaptive.
func TestRackAwareAllocs(t *testing.T) {
	mt := rackTopicMeta(threeRacks, 1, 2, 3, 1, 2, 3)
	now := time.Now()
	for _, queues := range [][][]time.Time{
		nil,                                    // no queues: uniform draws
		{{now}, {}, {now, now}, {}, {}, {now}}, // adaptive draws
	} {
		p, ts := fakeQueues(rackConfig("b"), queues)
		stickyNoAllocs(t, p, ts, mt)
	}
}

// rackMetadata makes c answer Metadata requests for topic "t" as kfake
// does, except that broker i is in racks[i]: kfake gives every broker the
// same rack. Leaders must not move while it is in place.
func rackMetadata(t *testing.T, c *kfake.Cluster, racks []string) {
	t.Helper()
	addrs := c.ListenAddrs()
	id := c.TopicInfo("t").TopicID
	parts := c.PartitionInfos("t")
	c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for i, addr := range addrs {
			host, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port, b.Rack = int32(i), host, int32(p), &racks[i]
			resp.Brokers = append(resp.Brokers, b)
		}
		for _, rt := range req.Topics {
			st := kmsg.NewMetadataResponseTopic()
			st.Topic = rt.Topic
			if rt.Topic == nil || *rt.Topic != "t" {
				st.ErrorCode = 3 // UNKNOWN_TOPIC_OR_PARTITION
				resp.Topics = append(resp.Topics, st)
				continue
			}
			st.TopicID = id
			for _, pi := range parts {
				sp := kmsg.NewMetadataResponseTopicPartition()
				sp.Partition, sp.Leader, sp.LeaderEpoch = pi.Partition, pi.Leader, pi.Epoch
				sp.Replicas, sp.ISR = []int32{pi.Leader}, []int32{pi.Leader}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// TestRackAwareKfake: brokers in three racks; a rack-aware producer in
// one of them sends its keyless records only to the partitions led from
// there, while keyed records are hashed as always. Without rack
// awareness, or in a rack that leads no partition, keyless records reach
// every partition.
func TestRackAwareKfake(t *testing.T) {
	racks := []string{"az-0", "az-1", "az-2"}
	// run sends keyless and keyed records and returns the partitions the
	// keyless ones went to.
	run := func(t *testing.T, rackAware bool, rack string) []int32 {
		c := newFake(t, 9)
		// Partition i is led by broker i%3, so rack az-1 leads 1, 4, 7.
		for part := range int32(9) {
			if err := c.MoveTopicPartition("t", part, part%3); err != nil {
				t.Fatal(err)
			}
		}
		rackMetadata(t, c, racks)
		cfg := testConfig(c)
		cfg.BatchSize = 1024 // switch partitions often
		cfg.PartitionerRackAware, cfg.ClientRack = rackAware, rack
		p := newTestProducer(t, cfg)
		o := newOutcomes(t)
		ctx := context.Background()
		var keyless, keyed []*Record
		for i := range 3000 {
			r := &Record{Topic: "t", Value: make([]byte, 100)}
			keyless = append(keyless, r)
			p.Send(ctx, r, o.cb())
			if i%10 == 0 {
				r = &Record{Topic: "t", Key: []byte(fmt.Sprint("k", i)), Value: make([]byte, 100)}
				keyed = append(keyed, r)
				p.Send(ctx, r, o.cb())
			}
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		o.wait(t, 10*time.Second)
		if ok, failed := o.errCount(); failed != 0 {
			t.Fatalf("%d records failed, %d ok", failed, ok)
		}
		for _, r := range keyed {
			if want := murmur.Partition(r.Key, 9); r.Partition != want {
				t.Fatalf("key %q went to partition %d, want %d", r.Key, r.Partition, want)
			}
		}
		seen := map[int32]bool{}
		for _, r := range keyless {
			seen[r.Partition] = true
		}
		return slices.Sorted(maps.Keys(seen))
	}
	all := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}

	t.Run("in rack az-1", func(t *testing.T) {
		// ~330 KB in 1 KB stints: every partition of the rack is drawn.
		if got := run(t, true, "az-1"); !slices.Equal(got, []int32{1, 4, 7}) {
			t.Fatalf("keyless records went to partitions %v, want those led from az-1: [1 4 7]", got)
		}
	})
	t.Run("rack awareness off", func(t *testing.T) {
		if got := run(t, false, "az-1"); !slices.Equal(got, all) {
			t.Fatalf("keyless records went to partitions %v, want all", got)
		}
	})
	t.Run("no leader in the rack", func(t *testing.T) {
		if got := run(t, true, "az-9"); !slices.Equal(got, all) {
			t.Fatalf("keyless records went to partitions %v, want all", got)
		}
	})
}
