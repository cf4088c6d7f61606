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
