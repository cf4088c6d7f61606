package cluster

import (
	"net"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLedFromRack: a topic's partitions grouped by their leader's rack,
// for the rack-aware partitioner (KIP-1123).
func TestLedFromRack(t *testing.T) {
	brokers := map[int32]BrokerInfo{1: {ID: 1, Rack: "a"}, 2: {ID: 2, Rack: "b"}, 3: {ID: 3}}
	parts := func(leaders ...int32) []Partition {
		out := make([]Partition, len(leaders))
		for i, l := range leaders {
			out[i] = Partition{ID: int32(i), Leader: l}
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		leaders []int32
		want    map[string][]int32
	}{
		// No leader (-1), a leader without a rack (3), a leader
		// metadata does not list (9): in no rack.
		{"mixed", []int32{1, 2, -1, 1, 3, 9, 2}, map[string][]int32{"a": {0, 3}, "b": {1, 6}}},
		{"no leader has a rack", []int32{3, -1, 3}, nil},
		{"no partitions", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ledFromRack(parts(tt.leaders...), brokers); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ledFromRack = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSnapshotLedFromRack: the snapshot has the lists as soon as it has
// the topic (kfake puts every broker in rack "krack").
func TestSnapshotLedFromRack(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(4, "racks"))
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	topic, err := c.WaitTopic(ctxFor(t, 5*time.Second), "racks")
	if err != nil {
		t.Fatal(err)
	}
	for id, b := range c.Snapshot().Brokers {
		if b.Rack != "krack" {
			t.Fatalf("broker %d in rack %q, want kfake's krack", id, b.Rack)
		}
	}
	if want := map[string][]int32{"krack": {0, 1, 2, 3}}; !reflect.DeepEqual(topic.LedFromRack, want) {
		t.Fatalf("LedFromRack = %v, want %v", topic.LedFromRack, want)
	}
}

// TestUnlistedLeaderIsNoLeader: a partition whose leader the response
// does not list among its brokers has no leader in the snapshot (Java's
// toPartitionInfo gives it a null leader), so that the partitioners treat
// it as unavailable and the sender waits for a refresh.
func TestUnlistedLeaderIsNoLeader(t *testing.T) {
	kc := newCluster(t)
	kc.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.SetVersion(req.GetVersion())
		for i, addr := range kc.ListenAddrs() {
			host, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = int32(i), host, int32(p)
			resp.Brokers = append(resp.Brokers, b)
		}
		topic := kmsg.NewMetadataResponseTopic()
		topic.Topic = kmsg.StringPtr("t")
		for i, leader := range []int32{0, 9} {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.Replicas, p.ISR = int32(i), leader, []int32{leader}, []int32{leader}
			topic.Partitions = append(topic.Partitions, p)
		}
		resp.Topics = append(resp.Topics, topic)
		return resp, nil, true
	})
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	topic, err := c.WaitTopic(ctxFor(t, 5*time.Second), "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := []int32{topic.Partitions[0].Leader, topic.Partitions[1].Leader}; got[0] != 0 || got[1] != -1 {
		t.Fatalf("leaders %v, want [0 -1]: broker 9 is not in the response", got)
	}
}

// TestBrokerAddr: an advertised IPv6 host is bracketed, so that it can be
// dialed (and its name taken for TLS).
func TestBrokerAddr(t *testing.T) {
	for _, tt := range []struct {
		host string
		want string
	}{
		{"b1.example", "b1.example:9093"},
		{"10.0.0.1", "10.0.0.1:9093"},
		{"::1", "[::1]:9093"},
		{"fe80::1%eth0", "[fe80::1%eth0]:9093"},
	} {
		if got := (BrokerInfo{Host: tt.host, Port: 9093}).Addr(); got != tt.want {
			t.Errorf("Addr of %q = %q, want %q", tt.host, got, tt.want)
		}
	}
}
