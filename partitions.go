package kprod

import (
	"context"
	"fmt"
	"time"

	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/kerr"
)

// Node is a broker as the metadata describes it (Java's Node). A replica
// the metadata names but does not describe has only its ID and Port -1.
type Node struct {
	ID   int32
	Host string
	Port int32
	Rack string // "" when the broker has no broker.rack
}

// PartitionInfo is one partition of a topic, as the producer's metadata
// has it (Java's PartitionInfo).
type PartitionInfo struct {
	Topic     string
	Partition int32
	// Leader is nil while the partition has no leader the metadata
	// describes: records for it wait (up to delivery.timeout.ms).
	Leader          *Node
	LeaderEpoch     int32 // -1 if the broker does not say
	Replicas        []Node
	InSyncReplicas  []Node
	OfflineReplicas []Node
}

// PartitionsFor returns the partitions of topic, in partition order, from
// the producer's metadata, waiting for it as Send does: up to max.block.ms,
// or until ctx ends (Java's partitionsFor), for use by a custom
// partitioner or to check a topic before producing. The errors are
// Send's: ErrUnknownTopic when the topic is not in the metadata within
// max.block.ms, ErrMetadataTimeout when no broker answered, both wrapping
// what the brokers said; a non-retriable error of the topic at once, from
// a metadata answer to this call (e.g. TOPIC_AUTHORIZATION_FAILED:
// errors.Is(err, kerr.TopicAuthorizationFailed)); ctx's error when it
// ended first; ErrClosed after Close.
func (p *Producer) PartitionsFor(ctx context.Context, topic string) ([]PartitionInfo, error) {
	if p.closed.Load() {
		return nil, fmt.Errorf("partitions of %q: %w", topic, kerr.ErrClosed)
	}
	if topic == "" {
		return nil, fmt.Errorf("%w: partitions of a topic with no name", kerr.ErrInvalidRecord)
	}
	snap := p.cl.Snapshot()
	mt := snap.Topics[topic]
	if mt == nil || mt.Err != nil || len(mt.Partitions) == 0 {
		var err error
		if mt, err = p.waitMetadata(ctx, &Record{Topic: topic}, time.Now()); err != nil {
			return nil, err
		}
		// The brokers from the same response as the partitions, when
		// that is still the current one (a newer one may have come).
		snap = p.cl.Snapshot()
		if t := snap.Topics[topic]; t != nil && t.Err == nil && len(t.Partitions) > 0 {
			mt = t
		}
	}
	out := make([]PartitionInfo, len(mt.Partitions))
	for i, pt := range mt.Partitions {
		out[i] = PartitionInfo{
			Topic: topic, Partition: pt.ID, LeaderEpoch: pt.LeaderEpoch,
			Replicas: nodes(snap, pt.Replicas), InSyncReplicas: nodes(snap, pt.ISR), OfflineReplicas: nodes(snap, pt.Offline),
		}
		if _, ok := snap.Brokers[pt.Leader]; ok {
			n := node(snap, pt.Leader)
			out[i].Leader = &n
		}
	}
	return out, nil
}

// node is broker id as snap describes it.
func node(snap *cluster.Snapshot, id int32) Node {
	if b, ok := snap.Brokers[id]; ok {
		return Node{ID: id, Host: b.Host, Port: b.Port, Rack: b.Rack}
	}
	return Node{ID: id, Port: -1}
}

func nodes(snap *cluster.Snapshot, ids []int32) []Node {
	out := make([]Node, len(ids))
	for i, id := range ids {
		out[i] = node(snap, id)
	}
	return out
}
