package cluster

import (
	"net"
	"strconv"
	"time"
)

// Snapshot is one immutable view of the cluster, as one Metadata response
// gave it. It is swapped atomically; readers never lock and never mutate.
type Snapshot struct {
	ClusterID    string
	ControllerID int32
	Brokers      map[int32]BrokerInfo
	Topics       map[string]*Topic
	At           time.Time // when the response arrived
}

// BrokerInfo is a broker as metadata lists it.
type BrokerInfo struct {
	ID   int32
	Host string
	Port int32
	Rack string
}

// Addr is host:port ([host]:port for an IPv6 address).
func (b BrokerInfo) Addr() string {
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
}

// Topic is one topic's metadata. Err is the topic-level error (for
// example UNKNOWN_TOPIC_OR_PARTITION); Partitions is indexed by partition
// id.
type Topic struct {
	Name       string
	ID         [16]byte
	Err        error
	Partitions []Partition

	// LedFromRack lists, per broker rack (broker.rack), the partitions
	// whose leader is in that rack, in increasing order. Partitions
	// without a leader, or led by a broker without a rack, are in no
	// list; nil when no leader has a rack. It is built with the snapshot
	// so that the rack-aware partitioner (KIP-1123) finds a rack's
	// partitions with one map lookup when it switches partitions, not by
	// walking the brokers for every switch.
	LedFromRack map[string][]int32
}

// Partition is one partition's metadata. Leader is -1 when the partition
// has no leader right now.
type Partition struct {
	ID          int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	Offline     []int32
	Err         error
}

// ledFromRack builds Topic.LedFromRack from a topic's partitions and the
// brokers of the same metadata response.
func ledFromRack(parts []Partition, brokers map[int32]BrokerInfo) map[string][]int32 {
	var m map[string][]int32
	for i := range parts {
		if parts[i].Leader < 0 {
			continue
		}
		rack := brokers[parts[i].Leader].Rack
		if rack == "" {
			continue
		}
		if m == nil {
			m = make(map[string][]int32)
		}
		m[rack] = append(m[rack], int32(i))
	}
	return m
}

// Leader returns the leader of topic/partition, or -1.
func (s *Snapshot) Leader(topic string, partition int32) int32 {
	t := s.Topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1
	}
	return t.Partitions[partition].Leader
}

var emptySnapshot = &Snapshot{
	ControllerID: -1,
	Brokers:      map[int32]BrokerInfo{},
	Topics:       map[string]*Topic{},
}
