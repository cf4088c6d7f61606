package kprod

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/cluster"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// After a partition's leader moves, a produce to the old leader comes
// back NOT_LEADER_OR_FOLLOWER naming the new leader (KIP-951). The
// producer uses that answer: here every Metadata request gets the stale
// view (the old leader) after the move, so the records reach the new
// leader only through the hint, before delivery.timeout.ms.
func TestLeaderHintFromProduceResponse(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.RequestTimeout = 2 * time.Second
	cfg.DeliveryTimeout = 5 * time.Second
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 20*time.Second)
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("before")}).ToPartition(0)); err != nil {
		t.Fatal(err)
	}

	// The stale view: what metadata says now, before the move.
	snap := p.cl.Snapshot()
	mt := snap.Topics["t"]
	oldLeader, oldEpoch := mt.Partitions[0].Leader, mt.Partitions[0].LeaderEpoch
	var stale atomic.Int64
	c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.SetVersion(req.GetVersion())
		resp.ControllerID = snap.ControllerID
		for _, b := range snap.Brokers {
			rb := kmsg.NewMetadataResponseBroker()
			rb.NodeID, rb.Host, rb.Port = b.ID, b.Host, b.Port
			resp.Brokers = append(resp.Brokers, rb)
		}
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr("t"), mt.ID
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Leader, rp.LeaderEpoch = oldLeader, oldEpoch
		rp.Replicas, rp.ISR = []int32{oldLeader}, []int32{oldLeader}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		stale.Add(1)
		return resp, nil, true
	})
	newLeader := (oldLeader + 1) % 3
	if err := c.MoveTopicPartition("t", 0, newLeader); err != nil {
		t.Fatal(err)
	}

	const n = 100
	o := newOutcomes(t)
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = (&Record{Topic: "t", Value: []byte("after")}).ToPartition(0)
		p.Send(ctx, recs[i], o.cb())
	}
	o.wait(t, 15*time.Second)
	if ok, failed := o.errCount(); ok != n {
		t.Fatalf("%d of %d records delivered after the leader moved, %d failed (first: %v); metadata answered stale %d times",
			ok, n, failed, firstErr(o), stale.Load())
	}
	if got := p.cl.Snapshot().Leader("t", 0); got != newLeader {
		t.Fatalf("the producer's metadata has leader %d for t[0], want %d from the produce response", got, newLeader)
	}
	// Each callback names the leader epoch its record was written under:
	// the new leader's.
	newEpoch := p.cl.Snapshot().Topics["t"].Partitions[0].LeaderEpoch
	for _, r := range recs {
		if r.LeaderEpoch != newEpoch || newEpoch <= oldEpoch {
			t.Fatalf("a record written by the new leader reports leader epoch %d, want %d (the old one was %d)", r.LeaderEpoch, newEpoch, oldEpoch)
		}
	}
}

// A hint older than what metadata already says is ignored, and one that
// names a broker nobody described asks for a Metadata refresh instead.
func TestLeaderHintIgnoredWhenStale(t *testing.T) {
	c := newFake(t, 1)
	p := newTestProducer(t, testConfig(c))
	ctx := ctxT(t, 10*time.Second)
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("x")}).ToPartition(0)); err != nil {
		t.Fatal(err)
	}
	before := p.cl.Snapshot()
	part := before.Topics["t"].Partitions[0]
	stale := []leaderHintCase{
		{leader: (part.Leader + 1) % 3, epoch: part.LeaderEpoch}, // not newer
		{leader: 42, epoch: part.LeaderEpoch + 1},                // unknown broker
		{leader: (part.Leader + 1) % 3, epoch: -1, noHint: true}, // no CurrentLeader
	}
	for _, tc := range stale {
		rp := kmsg.NewProduceResponseTopicPartition()
		rp.ErrorCode = 6 // NOT_LEADER_OR_FOLLOWER
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = tc.leader, tc.epoch
		h, ok := leaderHint("t", &rp)
		if ok == tc.noHint {
			t.Fatalf("leaderHint(%d, %d) = %v, want a hint: %v", tc.leader, tc.epoch, ok, !tc.noHint)
		}
		if !ok {
			continue
		}
		if applied := p.cl.UpdateLeaders(nil, nil); applied != nil {
			t.Fatal("UpdateLeaders of nothing applied something")
		}
		if applied := p.cl.UpdateLeaders([]cluster.LeaderHint{h}, nil); len(applied) != 0 {
			t.Fatalf("hint %+v applied over leader %d epoch %d", h, part.Leader, part.LeaderEpoch)
		}
		// The sender, given such a hint, asks for a Metadata refresh.
		s := &sender{p: p} // not the producer's: only its method is used
		if !s.applyLeaderHints(part.Leader, []cluster.LeaderHint{h}, []*batch{nil}, nil, time.Now()) {
			t.Errorf("hint %+v ignored without asking for a Metadata refresh", h)
		}
	}
	if p.cl.Snapshot() != before {
		t.Fatal("ignored hints replaced the metadata snapshot")
	}
}

type leaderHintCase struct {
	leader, epoch int32
	noHint        bool
}

// A topic deleted and recreated under the same name gets a new topic id:
// Produce v13 names topics by id, so the broker refuses the old one until
// the producer's metadata has the new one. That answer refreshes
// metadata, and the record goes to the new topic instead of waiting out
// delivery.timeout.ms for metadata.max.age.ms. (kfake answers
// UNKNOWN_TOPIC_OR_PARTITION; Kafka answers UNKNOWN_TOPIC_ID, which
// TestLeaderMovedCodes covers.)
func TestTopicRecreatedMeanwhile(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	cfg.RetryBackoff, cfg.RetryBackoffMax = 20*time.Millisecond, 100*time.Millisecond
	cfg.RequestTimeout, cfg.DeliveryTimeout = 5*time.Second, 15*time.Second
	cfg.Acks, cfg.EnableIdempotence = AcksLeader, new(false) // the plainest path: nothing but the retry
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"t"}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("t")
	del.Topics = append(del.Topics, dt)
	del.TimeoutMillis = 5000
	if resp, err := del.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("DeleteTopics: %v %+v", err, resp)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "t", 1, 1
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 5000
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics: %v %+v", err, resp)
	}
	start := time.Now()
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("new")}); err != nil {
		t.Fatalf("a record to the recreated topic: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the record to the recreated topic took %v", el)
	}
}

// The produce errors after which metadata is refreshed before a retry are
// Java's InvalidMetadataExceptions.
func TestLeaderMovedCodes(t *testing.T) {
	for _, be := range []*kerr.BrokerError{
		kerr.NotLeaderOrFollower, kerr.LeaderNotAvailable, kerr.UnknownTopicOrPartition,
		kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch, kerr.KafkaStorageError,
		kerr.UnknownTopicID, kerr.InconsistentTopicID, kerr.NetworkException, kerr.ReplicaNotAvailable,
	} {
		if !leaderMoved(be) {
			t.Errorf("%s does not refresh metadata", be.Name)
		}
	}
	for _, be := range []*kerr.BrokerError{kerr.NotEnoughReplicas, kerr.RequestTimedOut, kerr.CorruptMessage} {
		if leaderMoved(be) {
			t.Errorf("%s refreshes metadata", be.Name)
		}
	}
}

// A batch retried after NOT_LEADER_OR_FOLLOWER without a hint waits out
// its retry backoff, unless the metadata refresh that error asked for
// names a newer leader: then it goes at once, as in Java
// (ProducerBatch.hasLeaderChangedForTheOngoingRetry).
func TestRetryBackoffSkippedWhenLeaderChanged(t *testing.T) {
	c := newFake(t, 1)
	cfg := testConfig(c)
	// retry.backoff.ms also spaces metadata refreshes: the test waits it
	// out once, so that the refresh after the error goes at once, as it
	// does for a producer whose metadata is minutes old.
	cfg.RetryBackoff, cfg.RetryBackoffMax = 3*time.Second, 3*time.Second
	cfg.DeliveryTimeout = 2 * time.Minute
	var lastMeta atomic.Int64
	c.ControlKey(kmsg.Metadata.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lastMeta.Store(time.Now().UnixNano())
		return nil, nil, false
	})
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("before")}).ToPartition(0)); err != nil {
		t.Fatal(err)
	}
	oldLeader := p.cl.Snapshot().Leader("t", 0)
	// No refresh for longer than its backoff (3s ±20%): the one the
	// error asks for goes at once.
	for time.Since(time.Unix(0, lastMeta.Load())) < cfg.RetryBackoff*13/10 {
		time.Sleep(50 * time.Millisecond)
	}
	var moved atomic.Bool
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if moved.Swap(true) {
			return nil, nil, false
		}
		// Move the leader, and answer the old leader's way: no hint.
		if err := c.MoveTopicPartition("t", 0, (oldLeader+1)%3); err != nil {
			t.Error(err)
		}
		// NewProduceResponseTopicPartition has no CurrentLeader (-1).
		req := kreq.(*kmsg.ProduceRequest)
		resp := produceResp(req, kerr.NotLeaderOrFollower.Code, nil)
		resp.SetVersion(req.GetVersion())
		return resp, nil, true
	})
	done := make(chan error, 1)
	p.Send(ctx, (&Record{Topic: "t", Value: []byte("after")}).ToPartition(0), func(_ *Record, err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(cfg.RetryBackoff / 2): // the backoff is 3s ±20%
		t.Fatal("the retry waited for retry.backoff.ms though the metadata named a new leader")
	}
	if !moved.Load() {
		t.Fatal("the fault never hit")
	}
}

// A leader that dies while the producer's connection to it is idle, its
// partitions moved to another broker: the lost connection (and each
// failed dial after it) asks for new metadata, as Java's
// handleServerDisconnect does, so the next record finds the new leader
// at once instead of after metadata.max.age.ms (5 min), beyond its
// delivery.timeout.ms.
func TestLeaderLostWhileIdleRefreshesMetadata(t *testing.T) {
	c := newFake(t, 1)
	var mu sync.Mutex
	down := map[string]bool{}
	conns := map[string][]net.Conn{}
	cfg := testConfig(c)
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		isDown := down[addr]
		mu.Unlock()
		if isDown {
			return nil, errors.New("connection refused (the test's broker is down)")
		}
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns[addr] = append(conns[addr], nc)
			mu.Unlock()
		}
		return nc, err
	}
	cfg.RequestTimeout = 5 * time.Second
	cfg.DeliveryTimeout = 10 * time.Second
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("a")}).ToPartition(0)); err != nil {
		t.Fatal(err)
	}
	snap := p.cl.Snapshot()
	old := snap.Leader("t", 0)
	addr := snap.Brokers[old].Addr()
	mu.Lock()
	down[addr] = true
	for _, nc := range conns[addr] {
		nc.Close()
	}
	mu.Unlock()
	if err := c.MoveTopicPartition("t", 0, (old+1)%3); err != nil {
		t.Fatal(err)
	}
	if err := p.SendSync(ctx, (&Record{Topic: "t", Value: []byte("b")}).ToPartition(0)); err != nil {
		t.Fatalf("leader %d lost while idle, leadership moved: %v (the producer's leader is still %d)",
			old, err, p.cl.Snapshot().Leader("t", 0))
	}
}
