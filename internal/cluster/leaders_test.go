package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// UpdateLeaders: a newer leader is installed in a new snapshot (the old
// one is left as it was), a broker known only from the response's
// endpoints joins it, and older or unknown hints change nothing.
func TestUpdateLeaders(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(2, "moving"), kfake.SeedTopics(1, "other"))
	var updates atomic.Int32
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.OnUpdate = func(*Snapshot) { updates.Add(1) }
	c := newClient(t, cfg)
	if _, err := c.WaitTopic(ctxFor(t, 5*time.Second), "moving"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTopic(ctxFor(t, 5*time.Second), "other"); err != nil {
		t.Fatal(err)
	}
	old := c.Snapshot()
	p0 := old.Topics["moving"].Partitions[0]
	to := (p0.Leader + 1) % 3
	n := updates.Load()

	ignored := []LeaderHint{
		{Topic: "moving", Partition: 0, Leader: to, Epoch: p0.LeaderEpoch},    // not newer
		{Topic: "moving", Partition: 0, Leader: 7, Epoch: p0.LeaderEpoch + 1}, // no such broker
		{Topic: "moving", Partition: 5, Leader: to, Epoch: 99},                // no such partition
		{Topic: "nope", Partition: 0, Leader: to, Epoch: 99},                  // no such topic
	}
	if got := c.UpdateLeaders(ignored, nil); len(got) != 0 || c.Snapshot() != old || updates.Load() != n {
		t.Fatalf("hints that should be ignored applied: %+v", got)
	}

	newNode := BrokerInfo{ID: 7, Host: "127.0.0.1", Port: 1, Rack: "r7"}
	hints := []LeaderHint{
		{Topic: "moving", Partition: 0, Leader: to, Epoch: p0.LeaderEpoch + 1},
		{Topic: "moving", Partition: 1, Leader: 7, Epoch: old.Topics["moving"].Partitions[1].LeaderEpoch + 1},
	}
	if got := c.UpdateLeaders(hints, []BrokerInfo{newNode}); len(got) != 2 {
		t.Fatalf("applied %+v, want both hints", got)
	}
	s := c.Snapshot()
	if s.Leader("moving", 0) != to || s.Topics["moving"].Partitions[0].LeaderEpoch != p0.LeaderEpoch+1 || s.Leader("moving", 1) != 7 {
		t.Fatalf("after the hints: leaders %d, %d", s.Leader("moving", 0), s.Leader("moving", 1))
	}
	if s.Brokers[7] != newNode || c.Broker(7) == nil {
		t.Fatalf("the broker named only by the endpoints did not join: %+v, %v", s.Brokers[7], c.Broker(7))
	}
	if got := s.Topics["moving"].LedFromRack["r7"]; len(got) != 1 || got[0] != 1 {
		t.Fatalf("LedFromRack[r7] = %v, want [1]", got)
	}
	if s.Topics["other"] != old.Topics["other"] {
		t.Fatal("a topic without hints was copied")
	}
	if old.Leader("moving", 0) != p0.Leader || old.Brokers[7].ID != 0 {
		t.Fatal("the old snapshot was changed")
	}
	if updates.Load() != n+1 {
		t.Fatalf("OnUpdate called %d times for one update", updates.Load()-n)
	}
}

// A Metadata answer that knows an older leader epoch than the snapshot
// (a broker not yet told of the move a produce response's hint
// installed) keeps the newer leader, as Java's metadata does (KIP-320);
// a newer epoch without a leader known stays leaderless, and a newer
// leader gone from the brokers leaves the partition leaderless at its
// epoch (Java's Metadata.updateLatestMetadata keeps the cached entry;
// the old leader would refuse the records); a newer epoch, another topic
// id or a response without epochs replaces it as usual.
func TestMetadataKeepsNewerLeaders(t *testing.T) {
	brokers := map[int32]BrokerInfo{0: {ID: 0, Rack: "r0"}, 1: {ID: 1, Rack: "r1"}, 2: {ID: 2}}
	topic := func(id byte, parts ...Partition) *Topic {
		for i := range parts {
			parts[i].ID = int32(i)
		}
		return &Topic{Name: "t", ID: [16]byte{id}, Partitions: parts}
	}
	cases := []struct {
		name      string
		prev, got Partition
		id        byte // the new answer's topic id; the old one's is 1
		brokers   map[int32]BrokerInfo
		want      Partition
	}{
		{"older epoch", Partition{Leader: 1, LeaderEpoch: 5}, Partition{Leader: 0, LeaderEpoch: 4}, 1, brokers, Partition{Leader: 1, LeaderEpoch: 5}},
		{"newer epoch", Partition{Leader: 1, LeaderEpoch: 5}, Partition{Leader: 0, LeaderEpoch: 6}, 1, brokers, Partition{Leader: 0, LeaderEpoch: 6}},
		{"same epoch", Partition{Leader: 1, LeaderEpoch: 5}, Partition{Leader: 0, LeaderEpoch: 5}, 1, brokers, Partition{Leader: 0, LeaderEpoch: 5}},
		{"recreated topic", Partition{Leader: 1, LeaderEpoch: 5}, Partition{Leader: 0, LeaderEpoch: 0}, 2, brokers, Partition{Leader: 0, LeaderEpoch: 0}},
		{"leader gone", Partition{Leader: 1, LeaderEpoch: 5}, Partition{Leader: 0, LeaderEpoch: 4}, 1, map[int32]BrokerInfo{0: {}}, Partition{Leader: -1, LeaderEpoch: 5}},
		{"newer epoch without a leader", Partition{Leader: -1, LeaderEpoch: 6}, Partition{Leader: 1, LeaderEpoch: 5}, 1, brokers, Partition{Leader: -1, LeaderEpoch: 6}},
		{"no epochs", Partition{Leader: 1, LeaderEpoch: 5}, Partition{Leader: 0, LeaderEpoch: -1}, 1, brokers, Partition{Leader: 0, LeaderEpoch: -1}},
	}
	for _, c := range cases {
		prev := &Snapshot{Brokers: brokers, Topics: map[string]*Topic{"t": topic(1, c.prev)}}
		s := &Snapshot{Brokers: c.brokers, Topics: map[string]*Topic{"t": topic(c.id, c.got)}}
		s.Topics["t"].LedFromRack = ledFromRack(s.Topics["t"].Partitions, s.Brokers)
		keepNewerLeaders(prev, s)
		p := s.Topics["t"].Partitions[0]
		if p.Leader != c.want.Leader || p.LeaderEpoch != c.want.LeaderEpoch {
			t.Errorf("%s: leader %d epoch %d, want %d epoch %d", c.name, p.Leader, p.LeaderEpoch, c.want.Leader, c.want.LeaderEpoch)
		}
		if rack := c.brokers[p.Leader].Rack; rack != "" {
			if got := s.Topics["t"].LedFromRack[rack]; len(got) != 1 {
				t.Errorf("%s: LedFromRack[%s] = %v, want [0]", c.name, rack, got)
			}
		}
	}
}

// A hint that arrives after Close (the producer's sender still handles
// answers after a forced Close) adds no Broker: Close has closed them
// all, and one added later would outlive the Client.
func TestUpdateLeadersAfterClose(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "moving"))
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	if _, err := c.WaitTopic(ctxFor(t, 5*time.Second), "moving"); err != nil {
		t.Fatal(err)
	}
	p0 := c.Snapshot().Topics["moving"].Partitions[0]
	c.Close()
	hint := []LeaderHint{{Topic: "moving", Partition: 0, Leader: 7, Epoch: p0.LeaderEpoch + 1}}
	if got := c.UpdateLeaders(hint, []BrokerInfo{{ID: 7, Host: "127.0.0.1", Port: 1}}); len(got) != 0 || c.Broker(7) != nil {
		t.Fatalf("after Close: applied %+v, broker 7 %v; want nothing", got, c.Broker(7))
	}
}
