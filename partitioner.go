package kprod

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/murmur"
	"github.com/kprod/kprod/kerr"
)

// Partitioner chooses the partition of a record that does not name one
// (Record.PartitionSet false). It is the Go counterpart of the Java
// client's org.apache.kafka.clients.producer.Partitioner, set with
// Config.Partitioner (Java: partitioner.class).
//
// # Partitioning
//
// A record goes to the first of these that applies:
//
//  1. the partition set on the record (Record.ToPartition). A partition
//     the topic does not have fails the record with ErrUnknownPartition
//     after waiting up to max.block.ms for the topic to grow;
//  2. Config.Partitioner, if set; it is asked for every other record,
//     keyed or not, and partitioner.ignore.keys has no effect on it (as in
//     Java);
//  3. the built-in partitioner, which is Java 4.x's BuiltInPartitioner:
//     - a record with a key (and partitioner.ignore.keys=false) goes to
//     toPositive(murmur2(key)) % numPartitions, bit for bit the Java
//     client's choice, so Go and Java producers agree on every key;
//     - a record without a key goes to the topic's sticky partition
//     (KIP-794, "uniform sticky"): it stays there until batch.size bytes
//     were produced to it and its last batch no longer accepts records
//     (it is full or already sent), or until 2 × batch.size bytes were
//     produced in any case; then the next sticky partition is drawn at
//     random among the partitions that have a leader;
//     - with partitioner.adaptive.partitioning.enable=true (the default)
//     that draw is weighted by how many batches wait in each partition's
//     queue: a partition with q queued batches has weight max(q)+1-q, so
//     partitions of brokers that keep up get more records than those of
//     a slow broker. With partitioner.availability.timeout.ms > 0, the
//     partitions of a broker that has had a sendable batch waiting for
//     longer than that are left out of the draw altogether.
//     - with partitioner.rack.aware=true (KIP-1123), that draw, uniform
//     or adaptive, is among the partitions whose leader is in
//     client.rack (as the brokers' broker.rack names it), so that
//     keyless records do not cross racks or availability zones; the
//     adaptive weights are then those of the rack's partitions alone.
//     If none of the partitions the draw may pick is led from
//     client.rack (no leader is there, or its brokers were left out as
//     slow), the draw is over all of them, as without rack awareness.
//     Keyed records are still hashed, and a Config.Partitioner is not
//     affected. The brokers of a rack then take the keyless records of
//     every producer in that rack: unless producers and leaders are
//     spread alike over the racks, the load is not.
//
// As in the Java client, a record's bytes count against batch.size as
// its batch counts them (what it added to the batch's estimated size):
// with compression, the estimated compressed size (with the batch's
// compression estimate, see accumulator.newBatchSize); the record that
// opens a batch also counts the batch header, as Java's appendNewBatch.
//
// Differences from the Java client: Java samples queue lengths for the adaptive draw on every pass of its
// sender; kprod reads them at the moment it switches partitions (so the
// hot path is untouched), and judges a broker's availability from its
// oldest waiting batch rather than from sender timestamps; a broker found
// slow so loses all its partitions from the draw, where Java keeps its
// partitions with nothing queued. Like Java,
// adaptive weighting starts once every partition of the topic has had a
// batch; until then the draw is uniform.
//
// Partition is called on the goroutine that called Send, concurrently
// from any number of goroutines, and must be fast and must not block.
// numPartitions is the topic's partition count (> 0); available lists,
// in increasing order, the partitions that currently have a leader (it
// may be empty; it is shared: do not modify or keep it). The result must
// be in [0, numPartitions): a negative one fails the record with
// ErrInvalidRecord, a larger one with ErrUnknownPartition. A Partitioner
// that panics fails only that record (with ErrInvalidRecord). A
// Partitioner that also implements io.Closer is closed by Producer.Close
// after the interceptors, as Java closes its partitioner; a failure there
// is logged.
type Partitioner interface {
	Partition(r *Record, numPartitions int32, available []int32) int32
}

// PartitionerFunc adapts a function to the Partitioner interface.
type PartitionerFunc func(r *Record, numPartitions int32, available []int32) int32

// Partition calls f.
func (f PartitionerFunc) Partition(r *Record, numPartitions int32, available []int32) int32 {
	return f(r, numPartitions, available)
}

// JavaRoundRobinPartitioner is the Java class name that
// Config.Set("partitioner.class", ...) maps to RoundRobinPartitioner.
const JavaRoundRobinPartitioner = "org.apache.kafka.clients.producer.RoundRobinPartitioner"

// RoundRobinPartitioner returns a new partitioner that behaves as the Java
// client's org.apache.kafka.clients.producer.RoundRobinPartitioner: it
// ignores keys and hands out, per topic, the available partitions (those
// with a leader) in turn; if none has a leader, all partitions in turn.
//
// Its counters live in the returned value: producers that share one
// Config (and so one RoundRobinPartitioner) share its rotation.
//
// Java's RoundRobinPartitioner skipped partitions when batches filled up
// (KAFKA-9965, KAFKA-16283), as a new batch made the producer call it
// twice; Kafka 3.9 and 4.0 fixed that (KAFKA-17632), and kprod calls a
// partitioner once per record, so the rotation here is the fixed one.
func RoundRobinPartitioner() Partitioner { return &roundRobin{} }

type roundRobin struct {
	counters sync.Map // topic → *atomic.Uint32
}

func (rr *roundRobin) Partition(r *Record, numPartitions int32, available []int32) int32 {
	c, ok := rr.counters.Load(r.Topic)
	if !ok {
		c, _ = rr.counters.LoadOrStore(r.Topic, new(atomic.Uint32))
	}
	// Java: Utils.toPositive(counter.getAndIncrement()) on an int that
	// wraps around; the same sequence, from an unsigned counter.
	next := int32((c.(*atomic.Uint32).Add(1) - 1) & 0x7fffffff)
	if len(available) > 0 {
		return available[next%int32(len(available))]
	}
	return next % numPartitions
}

// partition picks the record's partition (see Partitioner for the rules).
func (p *Producer) partition(t *topicState, mt *cluster.Topic, r *Record) (int32, error) {
	if r.PartitionSet {
		return r.Partition, nil
	}
	n := int32(len(mt.Partitions))
	if p.cfg.Partitioner != nil {
		return p.userPartition(mt, r, n)
	}
	if r.Key != nil && !p.cfg.PartitionerIgnoreKeys {
		return murmur.Partition(r.Key, n), nil
	}
	return p.stickyCurrent(t, mt), nil
}

// sticky reports whether r goes to its topic's sticky partition; Send
// then tells stickyAppended what it appended.
func (p *Producer) sticky(r *Record) bool {
	return !r.PartitionSet && p.cfg.Partitioner == nil && (r.Key == nil || p.cfg.PartitionerIgnoreKeys)
}

func (p *Producer) userPartition(mt *cluster.Topic, r *Record, n int32) (part int32, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: partitioner %T panicked for a record to %q: %v", kerr.ErrInvalidRecord, p.cfg.Partitioner, r.Topic, v)
		}
	}()
	part = p.cfg.Partitioner.Partition(r, n, availablePartitions(mt))
	switch {
	case part < 0:
		return 0, fmt.Errorf("%w: partitioner %T returned partition %d for %q; partitions are never negative",
			kerr.ErrInvalidRecord, p.cfg.Partitioner, part, r.Topic)
	case part >= n:
		return 0, fmt.Errorf("%w: partitioner %T returned partition %d, but %q has %d partitions",
			kerr.ErrUnknownPartition, p.cfg.Partitioner, part, r.Topic, n)
	}
	return part, nil
}

// The uniform sticky partitioner of KIP-794 keeps, per topic, the current
// partition and the bytes appended to it since it was picked, packed into
// one atomic word (topicState.sticky): the partition + 1 in the high 32
// bits (0: none picked yet), the bytes in the low 32. Send reads the
// partition with stickyCurrent, appends, and reports the append with
// stickyAppended, which switches partitions once enough bytes went to
// the current one. This mirrors BuiltInPartitioner.updatePartitionInfo,
// which the Java client calls after each append under the partition's
// deque lock: switch after batch.size bytes if the partition's last batch
// takes no more records, and after 2 × batch.size bytes in any case; and
// accumulator.stickySwitchDueLocked is the check Java makes before each
// append, under the same partition lock as the append, and again after a
// wait for memory (partitionChanged, both times):
// past batch.size bytes, switch if no batch of the partition takes
// records any more (they were sent meanwhile).
// Concurrent Sends may each append once more to a partition being
// switched away from, as in Java; the count is then slightly off, never
// the switch itself.

// maxStickyBatchSize bounds the byte threshold so that twice it (plus a
// record) fits in the low 32 bits of topicState.sticky.
const maxStickyBatchSize = 1 << 30

func stickyPack(part int32, bytes uint32) uint64 { return uint64(uint32(part+1))<<32 | uint64(bytes) }

func stickyUnpack(v uint64) (part int32, bytes int) { return int32(v>>32) - 1, int(uint32(v)) }

// stickyCurrent returns the topic's sticky partition, picking one if
// there is none yet or the topic no longer has it.
func (p *Producer) stickyCurrent(t *topicState, mt *cluster.Topic) int32 {
	n := int32(len(mt.Partitions))
	for {
		v := t.sticky.Load()
		if cur, _ := stickyUnpack(v); cur >= 0 && cur < n {
			return cur
		}
		next := p.nextPartition(t, mt, drawRandom())
		if t.sticky.CompareAndSwap(v, stickyPack(next, 0)) {
			return next
		}
	}
}

// stickyAppended counts a record of recBytes appended to part and
// switches the topic's sticky partition when enough went to it. lastFull
// is whether the partition's last batch takes no more records after the
// append (Java's allBatchesFull).
func (p *Producer) stickyAppended(t *topicState, mt *cluster.Topic, part int32, recBytes int, lastFull bool) {
	// Java: stickyBatchSize = max(1, batch.size).
	sticky := min(max(p.cfg.BatchSize, 1), maxStickyBatchSize)
	if cur, _ := stickyUnpack(t.sticky.Load()); cur != part {
		return // switched meanwhile by another Send
	}
	v := t.sticky.Add(uint64(min(recBytes, maxStickyBatchSize)))
	cur, produced := stickyUnpack(v)
	if cur != part || (produced < 2*sticky && (produced < sticky || !lastFull)) {
		return
	}
	// Bytes another Send added since the Add must not cancel the switch
	// (Java decides under the partition's lock): retry while the topic
	// still sticks to part.
	next := stickyPack(p.nextPartition(t, mt, drawRandom()), 0)
	for !t.sticky.CompareAndSwap(v, next) {
		v = t.sticky.Load()
		// Switched by another Send: away, or (the draw may pick the same
		// partition again) back with its count reset, which only a switch
		// lowers.
		if cur, now := stickyUnpack(v); cur != part || now < produced {
			return
		}
	}
}

// stickySwitch moves the topic's sticky partition on from part, which
// the accumulator found due for a switch before an append
// (accumulator.stickySwitchDueLocked), and returns the partition to
// append to: the next one drawn, or whichever another Send switched to
// meanwhile.
func (p *Producer) stickySwitch(t *topicState, mt *cluster.Topic, part int32) int32 {
	v := t.sticky.Load()
	if cur, _ := stickyUnpack(v); cur == part {
		next := p.nextPartition(t, mt, drawRandom())
		if t.sticky.CompareAndSwap(v, stickyPack(next, 0)) {
			return next
		}
	}
	return p.stickyCurrent(t, mt)
}

// drawRandom is Java's BuiltInPartitioner.randomPartition:
// toPositive(random int).
func drawRandom() int32 { return rand.Int32() }

// nextPartition is BuiltInPartitioner.nextPartition: with adaptive
// partitioning and load statistics, a draw weighted by queue lengths;
// otherwise a uniform draw among the partitions with a leader (or among
// all, if none has one). With partitioner.rack.aware, either draw is
// first tried among the partitions led from client.rack (KIP-1123).
// draw is a non-negative random number, used as Java uses its random:
// modulo the range.
//
// It runs when Send switches partitions, not for every record.
func (p *Producer) nextPartition(t *topicState, mt *cluster.Topic, draw int32) int32 {
	if p.cfg.PartitionerAdaptivePartitioning {
		var buf [2 * 64]int32 // no allocation for topics up to 64 partitions
		if ls, ok := p.loadStats(t, mt, time.Now(), buf[:0]); ok {
			return ls.pick(draw)
		}
	}
	if p.cfg.PartitionerRackAware {
		// Java filters the available partitions by their leader's rack
		// on every switch; the snapshot has the list ready.
		if inRack := mt.LedFromRack[p.cfg.ClientRack]; len(inRack) > 0 {
			return inRack[draw%int32(len(inRack))]
		}
	}
	return uniformPartition(mt, draw)
}

// uniformPartition picks, with draw, one of the partitions with a leader,
// or any partition when none has one (Java: availablePartitionsForTopic,
// else partitionsForTopic).
func uniformPartition(mt *cluster.Topic, draw int32) int32 {
	avail := int32(0)
	for i := range mt.Partitions {
		if mt.Partitions[i].Leader >= 0 {
			avail++
		}
	}
	if avail == 0 {
		return draw % int32(len(mt.Partitions))
	}
	k := draw % avail
	for i := range mt.Partitions {
		if mt.Partitions[i].Leader >= 0 {
			if k == 0 {
				return int32(i)
			}
			k--
		}
	}
	panic("unreachable")
}

// loadStats is Java's PartitionLoadStats: a cumulative frequency table
// over the partitions eligible for the adaptive draw.
type loadStats struct {
	cft []int32 // running sums of the weights
	ids []int32 // partition of each entry
}

// pick is the weighted draw of BuiltInPartitioner.nextPartition: the
// first entry whose running sum is strictly greater than draw modulo the
// total.
func (ls loadStats) pick(draw int32) int32 {
	v := draw % ls.cft[len(ls.cft)-1]
	lo, hi := 0, len(ls.cft)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if ls.cft[mid] > v {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return ls.ids[lo]
}

// buildLoadStats turns queue sizes into a cumulative frequency table, in
// place, as BuiltInPartitioner.updatePartitionLoadStats does: each size s
// becomes the weight max+1-s, then the weights are summed up. sizes and
// ids hold the eligible partitions; total is the topic's partition count.
// ok is false where Java keeps no statistics and draws uniformly: fewer
// than 2 partitions, none eligible, or every partition eligible with the
// same queue size.
func buildLoadStats(sizes, ids []int32, total int) (loadStats, bool) {
	if !wantLoadStats(sizes, total) {
		return loadStats{}, false
	}
	return foldLoadStats(sizes, ids), true
}

// wantLoadStats reports whether Java keeps load statistics for these
// eligible queue sizes (see buildLoadStats).
func wantLoadStats(sizes []int32, total int) bool {
	if len(sizes) < 1 || total < 2 {
		return false
	}
	for _, s := range sizes[1:] {
		if s != sizes[0] {
			return true
		}
	}
	return len(sizes) < total
}

// foldLoadStats turns len(sizes) > 0 queue sizes into the table, in
// place: weights max+1-s, summed up.
func foldLoadStats(sizes, ids []int32) loadStats {
	maxSize := slices.Max(sizes)
	sizes[0] = maxSize + 1 - sizes[0]
	for i := 1; i < len(sizes); i++ {
		sizes[i] = maxSize + 1 - sizes[i] + sizes[i-1]
	}
	return loadStats{cft: sizes, ids: ids}
}

// buildRackLoadStats is buildLoadStats with partitioner.rack.aware
// (KIP-1123): when Java keeps statistics for the topic, it also builds a
// table of the eligible partitions led from the client's rack, weighted
// among themselves, and draws from that one if it has any partition.
// inRack lists the partitions led from the rack in increasing order, as
// ids does.
func buildRackLoadStats(sizes, ids []int32, total int, inRack []int32) (loadStats, bool) {
	if !wantLoadStats(sizes, total) {
		return loadStats{}, false
	}
	// Move the rack's entries to the front (both lists are increasing).
	// Swap rather than overwrite: when the rack has none, nothing moved
	// and the whole table is built instead.
	keep := 0
	for i, j := 0, 0; i < len(ids) && j < len(inRack); {
		switch {
		case ids[i] < inRack[j]:
			i++
		case ids[i] > inRack[j]:
			j++
		default:
			sizes[keep], sizes[i] = sizes[i], sizes[keep]
			ids[keep], ids[i] = ids[i], ids[keep]
			keep, i, j = keep+1, i+1, j+1
		}
	}
	if keep > 0 {
		sizes, ids = sizes[:keep], ids[:keep]
	}
	return foldLoadStats(sizes, ids), true
}

// loadStats gathers, at now, the queue size of every partition of the
// topic that has a leader (Java: RecordAccumulator.partitionReady) and
// builds the table from them, using buf for storage when it is large
// enough. With partitioner.availability.timeout.ms set, partitions led by
// a broker that has had a sendable batch waiting for longer than that are
// left out. With partitioner.rack.aware, the table is that of the
// partitions left that are led from client.rack, if there are any.
func (p *Producer) loadStats(t *topicState, mt *cluster.Topic, now time.Time, buf []int32) (loadStats, bool) {
	n := len(mt.Partitions)
	qs := *t.parts.Load()
	// Java waits until the accumulator has a queue for every partition,
	// as partitions without one would be invisible to the statistics.
	if len(qs) < n {
		return loadStats{}, false
	}
	for _, q := range qs[:n] {
		if q == nil {
			return loadStats{}, false
		}
	}
	if cap(buf) < 2*n {
		buf = make([]int32, 0, 2*n)
	}
	sizes, ids := buf[:0:n], buf[n:n:2*n]
	var slow []int32 // leaders whose data has waited too long
	timeout := p.cfg.PartitionerAvailabilityTimeout
	for i := 0; i < n; i++ {
		leader := mt.Partitions[i].Leader
		if leader < 0 {
			continue
		}
		size, waiting := qs[i].queueState(p.acc.lingerNs)
		sizes = append(sizes, int32(size))
		ids = append(ids, int32(i))
		if timeout > 0 && size > 0 && now.Sub(waiting) > timeout {
			slow = append(slow, leader)
		}
	}
	if len(slow) > 0 {
		keep := 0
		for j, id := range ids {
			if !containsInt32(slow, mt.Partitions[id].Leader) {
				sizes[keep], ids[keep] = sizes[j], id
				keep++
			}
		}
		sizes, ids = sizes[:keep], ids[:keep]
	}
	if p.cfg.PartitionerRackAware {
		return buildRackLoadStats(sizes, ids, n, mt.LedFromRack[p.cfg.ClientRack])
	}
	return buildLoadStats(sizes, ids, n)
}

func containsInt32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// queueState reads, under the queue's lock, how many batches wait in the
// partition's queue and since when the first of them has been sendable:
// once lingered (or full, which the next batch's creation marks), or,
// for a batch being retried, once its backoff ended.
func (q *partq) queueState(lingerNs int64) (size int, sendableSince time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	size = len(q.batches)
	if size == 0 {
		return 0, time.Time{}
	}
	b := q.batches[0]
	if b.attempts > 0 {
		return size, b.retryAt
	}
	sendableSince = b.created.Add(time.Duration(lingerNs))
	if size > 1 && q.batches[1].created.Before(sendableSince) {
		sendableSince = q.batches[1].created
	}
	return size, sendableSince
}

// identityIDs holds 0, 1, 2, ...: the available partitions of a topic
// whose partitions all have a leader, shared read-only by every producer
// so that a user Partitioner costs no allocation in the common case.
var identityIDs atomic.Pointer[[]int32]

// availablePartitions lists the partitions with a leader, in order.
func availablePartitions(mt *cluster.Topic) []int32 {
	n := len(mt.Partitions)
	all := true
	for i := range mt.Partitions {
		if mt.Partitions[i].Leader < 0 {
			all = false
			break
		}
	}
	if !all {
		out := make([]int32, 0, n)
		for i := range mt.Partitions {
			if mt.Partitions[i].Leader >= 0 {
				out = append(out, int32(i))
			}
		}
		return out
	}
	for {
		cur := identityIDs.Load()
		if cur != nil && len(*cur) >= n {
			return (*cur)[:n:n]
		}
		size := max(n, 2*lenOr0(cur), 64)
		ids := make([]int32, size)
		for i := range ids {
			ids[i] = int32(i)
		}
		if identityIDs.CompareAndSwap(cur, &ids) {
			return ids[:n:n]
		}
	}
}

func lenOr0(s *[]int32) int {
	if s == nil {
		return 0
	}
	return len(*s)
}
