package kprod

import (
	"math/rand/v2"

	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/internal/murmur"
)

// partition picks the record's partition as the Java 4.x built-in
// partitioner does: the caller's explicit partition; else, for a keyed
// record, murmur2(key) made positive, modulo the partition count (so the
// same key lands on the same partition as with the Java client); else
// the topic's sticky partition (KIP-794): unkeyed records go to one
// partition until batch.size bytes went there, then to another, chosen at
// random among the partitions that have a leader.
func (p *Producer) partition(t *topicState, mt *cluster.Topic, r *Record, recSize int) int32 {
	if r.PartitionSet {
		return r.Partition
	}
	n := int32(len(mt.Partitions))
	if r.Key != nil && !p.cfg.PartitionerIgnoreKeys {
		return murmur.Partition(r.Key, n)
	}
	t.stickyMu.Lock()
	defer t.stickyMu.Unlock()
	if t.stickyPart < 0 || t.stickyPart >= n || t.stickyBytes >= p.cfg.BatchSize {
		t.stickyPart = pickAvailable(mt, t.stickyPart)
		t.stickyBytes = 0
	}
	t.stickyBytes += recSize
	return t.stickyPart
}

// pickAvailable chooses a random partition with a leader, other than
// prev when there is a choice; any partition if none has a leader.
func pickAvailable(mt *cluster.Topic, prev int32) int32 {
	n := len(mt.Partitions)
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		c := int32((start + i) % n)
		if mt.Partitions[c].Leader >= 0 && (c != prev || n == 1) {
			return c
		}
	}
	return int32(start)
}
