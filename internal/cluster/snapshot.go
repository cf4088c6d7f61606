package cluster

import (
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

// Addr is host:port.
func (b BrokerInfo) Addr() string {
	return b.Host + ":" + strconv.Itoa(int(b.Port))
}

// Topic is one topic's metadata. Err is the topic-level error (for
// example UNKNOWN_TOPIC_OR_PARTITION); Partitions is indexed by partition
// id.
type Topic struct {
	Name       string
	ID         [16]byte
	Err        error
	Partitions []Partition
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
