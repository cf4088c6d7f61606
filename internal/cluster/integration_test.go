package cluster

// Integration tests against the real 3-node Apache Kafka cluster that
// scripts/kafka-cluster.sh runs. testcluster.Brokers skips them unless
// KPROD_INTEGRATION=1 (or CI) is set:
//
//	bash scripts/kafka-cluster.sh up
//	KPROD_INTEGRATION=1 go test ./internal/cluster/

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/internal/testcluster"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// realConfig is testConfig with the Java defaults that matter against a
// real cluster (request timeout, setup timeout).
func realConfig(brokers []string) Config {
	cfg := testConfig(brokers...)
	cfg.Broker = (&broker.Config{ClientID: "kprod-integration"}).Defaults()
	cfg.RetryBackoff = 50 * time.Millisecond
	cfg.RetryBackoffMax = time.Second
	return cfg
}

// Every node negotiates, for every API key it lists, the highest version
// both it and kmsg support; the ones the producer needs are recent.
func TestIntegrationVersions(t *testing.T) {
	brokers := testcluster.Brokers(t)
	c := newClient(t, realConfig(brokers))
	ctx := ctxFor(t, 30*time.Second)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Brokers()); n != testcluster.NumNodes {
		t.Fatalf("metadata lists %d brokers, want %d", n, testcluster.NumNodes)
	}
	for _, b := range c.Brokers() {
		conn, err := b.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for key, least := range map[kmsg.Key]int16{
			kmsg.Produce:        9, // flexible, KIP-896's floor is 3
			kmsg.Metadata:       12,
			kmsg.ApiVersions:    3,
			kmsg.InitProducerID: 4,
		} {
			if v, ok := conn.Version(int16(key)); !ok || v < least {
				t.Errorf("node %d: %s negotiated v%d (ok=%v), want >= v%d", b.ID(), key.Name(), v, ok, least)
			}
		}

		pv, _ := conn.Version(int16(kmsg.Produce))
		mv, _ := conn.Version(int16(kmsg.Metadata))
		av, _ := conn.Version(int16(kmsg.ApiVersions))
		t.Logf("node %d: Produce v%d, Metadata v%d, ApiVersions v%d", b.ID(), pv, mv, av)

		// Cross-check the whole table against the broker's own list.
		avReq := kmsg.NewPtrApiVersionsRequest()
		avReq.ClientSoftwareName, avReq.ClientSoftwareVersion = "kprod-test", "0" // v3+: required
		resp, err := conn.Do(ctx, avReq)
		if err != nil {
			t.Fatal(err)
		}
		avr := resp.(*kmsg.ApiVersionsResponse)
		if avr.ErrorCode != 0 || len(avr.ApiKeys) == 0 {
			t.Fatalf("node %d: ApiVersions error %d, %d keys", b.ID(), avr.ErrorCode, len(avr.ApiKeys))
		}
		for _, k := range avr.ApiKeys {
			req := kmsg.RequestForKey(k.ApiKey)
			want, wantOK := int16(0), false
			if req != nil {
				if m := min(req.MaxVersion(), k.MaxVersion); m >= k.MinVersion {
					want, wantOK = m, true
				}
			}
			if got, ok := conn.Version(k.ApiKey); ok != wantOK || got != want {
				t.Errorf("node %d: key %d (%s) broker v%d-%d: negotiated v%d (ok=%v), want v%d (ok=%v)",
					b.ID(), k.ApiKey, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, got, ok, want, wantOK)
			}
		}
	}
}

// The metadata of a 6-partition, replication factor 3 topic: every
// partition has a leader among the 3 nodes, 3 replicas, a full ISR, and
// the leaders agree with another client's view.
func TestIntegrationTopicMetadata(t *testing.T) {
	brokers := testcluster.Brokers(t)
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
	c := newClient(t, realConfig(brokers))
	tp, err := c.WaitTopic(ctxFor(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Partitions) != 6 || tp.ID == [16]byte{} {
		t.Fatalf("%d partitions, topic id %x", len(tp.Partitions), tp.ID)
	}
	s := c.Snapshot()
	if len(s.Brokers) != testcluster.NumNodes || s.ClusterID == "" {
		t.Fatalf("snapshot: %d brokers, cluster id %q", len(s.Brokers), s.ClusterID)
	}
	for id, b := range s.Brokers {
		if testcluster.NodeForPort(b.Addr()) != int(id) {
			t.Errorf("node %d advertises %s, not its own port", id, b.Addr())
		}
	}
	theirs := testcluster.Leaders(t, brokers, topic)
	for _, p := range tp.Partitions {
		if _, ok := s.Brokers[p.Leader]; !ok || p.Err != nil {
			t.Errorf("partition %d: leader %d (not a listed broker?) err %v", p.ID, p.Leader, p.Err)
		}
		if len(p.Replicas) != 3 || len(p.ISR) != 3 || !slices.Contains(p.Replicas, p.Leader) {
			t.Errorf("partition %d: replicas %v ISR %v leader %d", p.ID, p.Replicas, p.ISR, p.Leader)
		}
		if theirs[p.ID] != p.Leader {
			t.Errorf("partition %d: leader %d, franz-go sees %d", p.ID, p.Leader, theirs[p.ID])
		}
	}
}

// Killing the leader of partition 0: a refresh shows another leader within
// seconds (the broker session timeout is 6s), without the client being
// restarted. The node is restarted, and waited for, before the test ends.
func TestIntegrationLeaderFailover(t *testing.T) {
	brokers := testcluster.Brokers(t)
	testcluster.SkipIfShort(t, "kills a broker")
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
	c := newClient(t, realConfig(brokers))
	ctx := ctxFor(t, 90*time.Second)
	tp, err := c.WaitTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	old := tp.Partitions[0]
	// Be connected to every node, the dead one included, as a producer
	// would be.
	for _, b := range c.Brokers() {
		if _, err := b.Connect(ctx); err != nil {
			t.Fatal(err)
		}
	}

	testcluster.Kill(t, int(old.Leader))
	killed := time.Now()
	var now Partition
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Refresh(rctx)
		cancel()
		if err == nil {
			if t := c.Snapshot().Topics[topic]; t != nil && len(t.Partitions) == 6 {
				now = t.Partitions[0]
				if now.Leader >= 0 && now.Leader != old.Leader {
					break
				}
			}
		}
		if time.Since(killed) > 15*time.Second {
			t.Fatalf("15s after killing node %d, partition 0 still shows leader %d (last refresh error: %v)", old.Leader, now.Leader, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("partition 0: leader %d (epoch %d) -> %d (epoch %d) in %v",
		old.Leader, old.LeaderEpoch, now.Leader, now.LeaderEpoch, time.Since(killed).Round(time.Millisecond))
	if now.LeaderEpoch <= old.LeaderEpoch {
		t.Errorf("leader epoch %d, not above the old %d", now.LeaderEpoch, old.LeaderEpoch)
	}
	if b := c.Broker(now.Leader); b == nil {
		t.Errorf("new leader %d not among the client's brokers", now.Leader)
	}

	// Put the cluster back for the tests that follow: the node answers
	// again, is in the client's metadata, and the topic's ISR is full.
	testcluster.Restart(t, int(old.Leader))
	testcluster.WaitISR(t, brokers, topic, 3, 60*time.Second)
	eventually(t, 30*time.Second, "restarted node back in the client's metadata", func() bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := c.Refresh(rctx); err != nil {
			return false
		}
		_, ok := c.Snapshot().Brokers[old.Leader]
		return ok
	})
	b := c.Broker(old.Leader)
	if b == nil {
		t.Fatalf("node %d not in the client's brokers", old.Leader)
	}
	// The node may still be in its reconnect backoff from the failed
	// dials while it was down; it must come back once that ends.
	eventually(t, 10*time.Second, "reconnect to the restarted node", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := b.Connect(cctx)
		return err == nil
	})
}

// With auto-creation off in the client, a topic that does not exist is
// reported as unknown, by name, when ctx ends, and is not created (the
// test cluster's brokers do allow auto-creation).
func TestIntegrationUnknownTopic(t *testing.T) {
	brokers := testcluster.Brokers(t)
	topic := testcluster.UniqueTopic(t)
	cfg := realConfig(brokers)
	cfg.AutoCreateTopics = false
	c := newClient(t, cfg)
	_, err := c.WaitTopic(ctxFor(t, 2*time.Second), topic)
	if !errors.Is(err, kerr.ErrUnknownTopic) || !strings.Contains(err.Error(), topic) {
		t.Fatalf("err = %v, want ErrUnknownTopic naming %s", err, topic)
	}
	if tp := c.Snapshot().Topics[topic]; tp == nil || !errors.Is(tp.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("snapshot entry %+v, want UNKNOWN_TOPIC_OR_PARTITION", tp)
	}
}

// With auto-creation on (the Java default), the brokers create the topic.
func TestIntegrationAutoCreate(t *testing.T) {
	brokers := testcluster.Brokers(t)
	topic := testcluster.UniqueTopic(t)
	cfg := realConfig(brokers)
	cfg.AutoCreateTopics = true
	c := newClient(t, cfg)
	tp, err := c.WaitTopic(ctxFor(t, 30*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Partitions) == 0 {
		t.Fatal("auto-created topic has no partitions")
	}
}
