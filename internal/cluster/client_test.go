package cluster

import (
	"context"
	"errors"
	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/internal/testcluster"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/kerr"
	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// recordDials makes cfg's dialer record every address it dials.
func recordDials(cfg *Config) func() []string {
	var mu sync.Mutex
	var dialed []string
	cfg.Broker.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), dialed...)
	}
}

// The first bootstrap address is dead: the client tries it first (the
// order the user gave), moves on to the second, and learns the cluster.
func TestBootstrapDeadFirst(t *testing.T) {
	kc := newCluster(t)
	dead, good := testcluster.FreeAddr(t), kc.ListenAddrs()[0]
	cfg := testConfig(dead, good)
	dials := recordDials(&cfg)
	c := newClient(t, cfg)

	if err := c.Refresh(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("Refresh with one live bootstrap address: %v", err)
	}
	if d := dials(); len(d) < 2 || d[0] != dead || d[1] != good {
		t.Errorf("dialed %v, want the dead address first, then the good one", d)
	}
	s := c.Snapshot()
	if len(s.Brokers) != 3 {
		t.Fatalf("snapshot has %d brokers, want 3", len(s.Brokers))
	}
	var addrs []string
	for _, b := range s.Brokers {
		addrs = append(addrs, b.Addr())
	}
	want := kc.ListenAddrs()
	sort.Strings(addrs)
	sort.Strings(want)
	if !slices.Equal(addrs, want) {
		t.Errorf("broker addresses %v, want %v", addrs, want)
	}
	if s.ClusterID == "" || s.ControllerID < 0 {
		t.Errorf("ClusterID %q ControllerID %d", s.ClusterID, s.ControllerID)
	}
	bs := c.Brokers()
	if len(bs) != 3 || bs[0].ID() != 0 || bs[1].ID() != 1 || bs[2].ID() != 2 {
		t.Errorf("Brokers() not the 3 nodes by id: %v", bs)
	}
	if b := c.Broker(1); b == nil || b.Addr() != s.Brokers[1].Addr() {
		t.Errorf("Broker(1) = %v", b)
	}
}

// Every bootstrap address dead: Refresh fails with an error that says so
// and wraps the dial errors.
func TestBootstrapAllDead(t *testing.T) {
	cfg := testConfig(testcluster.FreeAddr(t), testcluster.FreeAddr(t))
	c := newClient(t, cfg)
	err := c.Refresh(ctxFor(t, 5*time.Second))
	if !errors.Is(err, kerr.ErrMetadataTimeout) || !errors.Is(err, kerr.ErrDial) {
		t.Fatalf("err = %v, want ErrMetadataTimeout wrapping ErrDial", err)
	}
	for _, a := range cfg.Bootstrap {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("error does not name %s: %v", a, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	for _, bs := range [][]string{nil, {"no-port"}} {
		if _, err := New(testConfig(bs...)); !errors.Is(err, kerr.ErrInvalidConfig) {
			t.Errorf("bootstrap %q: err = %v, want ErrInvalidConfig", bs, err)
		}
	}
}

// The metadata of a seeded topic: every partition, leaders as kfake has
// them, replicas, a topic id; Leader() reads it back.
func TestTopicMetadata(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(6, "orders"))
	var updates atomic.Int32
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.OnUpdate = func(*Snapshot) { updates.Add(1) }
	c := newClient(t, cfg)

	topic, err := c.WaitTopic(ctxFor(t, 5*time.Second), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if topic.Name != "orders" || topic.Err != nil || topic.ID == [16]byte{} {
		t.Errorf("topic = %+v", topic)
	}
	if len(topic.Partitions) != 6 {
		t.Fatalf("%d partitions, want 6", len(topic.Partitions))
	}
	s := c.Snapshot()
	for i, p := range topic.Partitions {
		if p.ID != int32(i) {
			t.Errorf("Partitions[%d].ID = %d", i, p.ID)
		}
		want := kc.LeaderFor("orders", int32(i))
		if p.Leader != want || s.Leader("orders", int32(i)) != want {
			t.Errorf("partition %d: leader %d, kfake says %d", i, p.Leader, want)
		}
		if _, ok := s.Brokers[p.Leader]; !ok {
			t.Errorf("partition %d: leader %d not among the brokers", i, p.Leader)
		}
		if !slices.Contains(p.Replicas, p.Leader) || p.Err != nil {
			t.Errorf("partition %d: replicas %v err %v", i, p.Replicas, p.Err)
		}
	}
	if s.Leader("orders", 6) != -1 || s.Leader("orders", -1) != -1 || s.Leader("nope", 0) != -1 {
		t.Error("Leader() of a partition that does not exist is not -1")
	}
	if updates.Load() == 0 {
		t.Error("OnUpdate never called")
	}
}

// A leader move shows up in the next refresh.
func TestLeaderMove(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "moving"))
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	ctx := ctxFor(t, 5*time.Second)
	topic, err := c.WaitTopic(ctx, "moving")
	if err != nil {
		t.Fatal(err)
	}
	old := topic.Partitions[0]
	to := (old.Leader + 1) % 3
	if err := kc.MoveTopicPartition("moving", 0, to); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	p := c.Snapshot().Topics["moving"].Partitions[0]
	if p.Leader != to || p.LeaderEpoch <= old.LeaderEpoch {
		t.Errorf("after the move: leader %d epoch %d, want leader %d and an epoch above %d", p.Leader, p.LeaderEpoch, to, old.LeaderEpoch)
	}
}

// Nodes that join get a Broker; nodes that leave are closed and dropped.
func TestBrokerSetFollowsMetadata(t *testing.T) {
	kc := newCluster(t)
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	ctx := ctxFor(t, 5*time.Second)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	id, _, err := kc.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.Brokers()) != 4 || c.Broker(id) == nil {
		t.Fatalf("after AddNode(%d): brokers %v", id, c.Brokers())
	}
	gone := c.Broker(id)
	if _, err := gone.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kc.RemoveNode(id); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.Brokers()) != 3 || c.Broker(id) != nil {
		t.Fatalf("after RemoveNode(%d): brokers %v", id, c.Brokers())
	}
	// Closed, and saying why: not ErrClosed, which means the producer is.
	if _, err := gone.Connect(ctx); !errors.Is(err, kerr.ErrConnectionLost) || errors.Is(err, kerr.ErrClosed) ||
		!strings.Contains(err.Error(), "left the cluster metadata") {
		t.Errorf("the removed node's Broker was not retired: Connect err = %v", err)
	}
}

// A node missing from a Metadata answer (a broker restarting, or a stale
// answer) keeps its connection until the requests in flight on it are
// answered, as in the Java client, which never closes a connection for
// that; it is closed at a later answer once nothing is in flight.
func TestBrokerLeavingMetadataFinishesInFlight(t *testing.T) {
	kc := newCluster(t)
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	ctx := ctxFor(t, 10*time.Second)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// Nodes 0 and 1 connected and idle: the refreshes below go to them,
	// not behind the held request on node 2's connection.
	for id := range int32(2) {
		if _, err := c.Broker(id).Connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b2 := c.Broker(2)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open) // also when the test fails before it releases
	kc.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if kc.CurrentNode() == 2 {
			close(held)
			kc.SleepControl(func() { <-release }) // the others are served meanwhile
		}
		return nil, nil, false
	})
	var without2 atomic.Bool
	kc.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if !without2.Load() {
			return nil, nil, false
		}
		resp := kreq.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		for i, addr := range kc.ListenAddrs()[:2] {
			host, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: int32(i), Host: host, Port: int32(p)})
		}
		id := "kfake"
		resp.ClusterID, resp.ControllerID = &id, 0
		return resp, nil, true
	})

	done := make(chan error, 1)
	go func() {
		_, err := b2.Do(ctx, kmsg.NewPtrListOffsetsRequest())
		done <- err
	}()
	<-held
	without2.Store(true)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Broker(2) != nil {
		t.Fatal("node 2 still listed after an answer without it")
	}
	open()
	if err := <-done; err != nil {
		t.Fatalf("the request in flight on the node that left the metadata failed: %v", err)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Connect(ctx); !errors.Is(err, kerr.ErrConnectionLost) {
		t.Errorf("node 2's Broker not closed after it drained: Connect err = %v", err)
	}
}

// Concurrent Refresh calls share Metadata requests (single flight).
func TestRefreshSingleFlight(t *testing.T) {
	kc := newCluster(t)
	log := logMetadata(kc)
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	ctx := ctxFor(t, 10*time.Second)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	before, sentBefore := log.count(), c.MetadataRequests()

	const n = 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := c.Refresh(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	got := log.count() - before
	// Idle, 1 to 3: later callers join the refresh under way or the next.
	// Loose for a loaded machine, where the callers arrive spread out;
	// without single flight it would be one per caller.
	if got < 1 || got > 10 {
		t.Errorf("%d concurrent Refresh calls sent %d Metadata requests, want a few (1 to 3 idle)", n, got)
	}
	if sent := c.MetadataRequests() - sentBefore; sent != int64(got) {
		t.Errorf("MetadataRequests() counted %d, the broker saw %d", sent, got)
	}
}

// Refresh waits for a refresh that started after it was called, so that
// a caller who saw stale metadata gets a newer view.
func TestRefreshIsFresh(t *testing.T) {
	kc := newCluster(t)
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	ctx := ctxFor(t, 5*time.Second)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		called := time.Now()
		if err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if at := c.Snapshot().At; at.Before(called) {
			t.Fatalf("Refresh returned a snapshot from %v, before it was called at %v", at, called)
		}
	}
}

// With auto-creation off, WaitTopic on a topic that does not exist fails
// when ctx ends, with ErrUnknownTopic naming the topic.
func TestWaitTopicUnknown(t *testing.T) {
	kc := newCluster(t) // kfake does not auto-create unless AllowAutoTopicCreation
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.AutoCreateTopics = true // the broker still says no
	c := newClient(t, cfg)
	start := time.Now()
	_, err := c.WaitTopic(ctxFor(t, time.Second), "no-such-topic")
	if !errors.Is(err, kerr.ErrUnknownTopic) || !strings.Contains(err.Error(), `"no-such-topic"`) {
		t.Fatalf("err = %v, want ErrUnknownTopic naming the topic", err)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 3*time.Second {
		t.Errorf("WaitTopic returned after %v, want when its 1s ctx ended", d)
	}
	if topic := c.Snapshot().Topics["no-such-topic"]; topic == nil || !errors.Is(topic.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("snapshot entry = %+v, want UNKNOWN_TOPIC_OR_PARTITION", topic)
	}
}

// With auto-creation allowed on both sides, WaitTopic gets the new topic.
func TestWaitTopicAutoCreate(t *testing.T) {
	kc := newCluster(t, kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4))
	log := logMetadata(kc)
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.AutoCreateTopics = true
	c := newClient(t, cfg)
	topic, err := c.WaitTopic(ctxFor(t, 5*time.Second), "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if len(topic.Partitions) != 4 {
		t.Errorf("%d partitions, want 4", len(topic.Partitions))
	}
	if !log.last().autoCreat {
		t.Error("Metadata request did not ask for auto-creation")
	}
}

// The client asks for auto-creation only when configured to.
func TestNoAutoCreateWhenOff(t *testing.T) {
	kc := newCluster(t, kfake.AllowAutoTopicCreation())
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	if _, err := c.WaitTopic(ctxFor(t, 300*time.Millisecond), "not-created"); !errors.Is(err, kerr.ErrUnknownTopic) {
		t.Fatalf("err = %v, want ErrUnknownTopic", err)
	}
}

// A non-retriable topic error (here authorization) fails WaitTopic at once
// rather than at the end of max.block.ms.
func TestWaitTopicFatalError(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "secret"))
	kc.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Metadata},
		Topic: "secret",
		Err:   fkerr.TopicAuthorizationFailed,
		Count: -1,
	})
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	start := time.Now()
	_, err := c.WaitTopic(ctxFor(t, 10*time.Second), "secret")
	if !errors.Is(err, kerr.ForCode(fkerr.TopicAuthorizationFailed.Code)) || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("err = %v, want TOPIC_AUTHORIZATION_FAILED naming the topic", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v: a fatal error waited for the deadline", d)
	}
}

// A partition-level error is kept on the partition, and the rest of the
// topic is usable.
func TestPartitionError(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(3, "half"))
	kc.Fault(kfake.Fault{
		Keys:       []kmsg.Key{kmsg.Metadata},
		Topic:      "half",
		Partitions: []int32{1},
		Err:        fkerr.LeaderNotAvailable,
		Count:      -1,
	})
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	topic, err := c.WaitTopic(ctxFor(t, 5*time.Second), "half")
	if err != nil {
		t.Fatal(err)
	}
	if len(topic.Partitions) != 3 {
		t.Fatalf("%d partitions", len(topic.Partitions))
	}
	if p := topic.Partitions[1]; !errors.Is(p.Err, kerr.LeaderNotAvailable) || p.ID != 1 {
		t.Errorf("partition 1 = %+v, want LEADER_NOT_AVAILABLE", p)
	}
	if p := topic.Partitions[0]; p.Err != nil || p.Leader < 0 {
		t.Errorf("partition 0 = %+v", p)
	}
}

// holdCluster is a 1-broker cluster whose Metadata requests are held until
// the returned release function is called (also at the end of the test).
// Holding blocks that cluster's request loop, which only its own broker
// uses.
func holdCluster(t *testing.T) (*kfake.Cluster, func()) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	rel := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(rel) }) }
	t.Cleanup(release)
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		select {
		case <-rel:
		case <-time.After(10 * time.Second):
		}
		return nil, nil, false
	})
	return kc, release
}

// leastLoaded: a connected broker with the fewest requests in flight, then
// any connected one, then one that can be dialed, then the one whose
// backoff ends first.
func TestLeastLoadedOrder(t *testing.T) {
	cfg := (&broker.Config{ClientID: "kprod-test", RequestTimeout: 5 * time.Second}).Defaults()
	cfg.MaxInFlight = 5
	busy, releaseBusy := holdCluster(t)
	idle, releaseIdle := holdCluster(t)
	spare := newCluster(t)

	// Ids chosen so that the lowest id is never the right answer.
	bBusy := broker.NewBroker(0, busy.ListenAddrs()[0], cfg)
	bIdle := broker.NewBroker(5, idle.ListenAddrs()[0], cfg)
	bSpare := broker.NewBroker(1, spare.ListenAddrs()[0], cfg)
	bDead := broker.NewBroker(2, testcluster.FreeAddr(t), cfg)
	fullCfg := *cfg
	fullCfg.MaxInFlight = 1
	bFull := broker.NewBroker(3, busy.ListenAddrs()[0], &fullCfg)
	for _, b := range []*broker.Broker{bBusy, bIdle, bSpare, bDead, bFull} {
		t.Cleanup(b.Close)
	}
	ctx := ctxFor(t, 5*time.Second)
	for _, b := range []*broker.Broker{bBusy, bIdle, bFull} {
		if _, err := b.Connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bDead.Connect(ctx); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	var done sync.WaitGroup
	for _, b := range []*broker.Broker{bBusy, bBusy, bIdle} {
		done.Add(1)
		if !b.TrySend(kmsg.NewPtrMetadataRequest(), false, func(kmsg.Response, error) { done.Done() }) {
			t.Fatal("TrySend refused")
		}
	}
	t.Cleanup(func() { // before the brokers close
		releaseBusy()
		releaseIdle()
		done.Wait()
	})

	// A connection with every slot taken (max.in.flight 1 here) comes
	// after dialing, as Java's canSendRequest has it.
	done.Add(1)
	if !bFull.TrySend(kmsg.NewPtrMetadataRequest(), false, func(kmsg.Response, error) { done.Done() }) {
		t.Fatal("TrySend refused")
	}
	if got := leastLoaded([]*broker.Broker{bFull, bSpare}, nil); got != bSpare {
		t.Errorf("a connection with no slot free: got broker %d, want the dialable %d", got.ID(), bSpare.ID())
	}
	if got := leastLoaded([]*broker.Broker{bFull, bDead}, nil); got != bFull {
		t.Errorf("a full connection against one backing off: got broker %d, want the full %d", got.ID(), bFull.ID())
	}

	all := []*broker.Broker{bBusy, bIdle, bSpare, bDead}
	for _, tc := range []struct {
		skip []*broker.Broker
		want *broker.Broker
		why  string
	}{
		{nil, bIdle, "connected with 1 in flight beats 2 in flight and unconnected ones"},
		{[]*broker.Broker{bIdle}, bBusy, "a connected broker, even busy, beats dialing"},
		{[]*broker.Broker{bIdle, bBusy}, bSpare, "a dialable broker beats one backing off"},
		{[]*broker.Broker{bIdle, bBusy, bSpare}, bDead, "backing off is the last resort"},
	} {
		skip := map[*broker.Broker]bool{}
		for _, b := range tc.skip {
			skip[b] = true
		}
		if got := leastLoaded(all, skip); got != tc.want {
			t.Errorf("%s: got broker %d, want %d", tc.why, got.ID(), tc.want.ID())
		}
	}
}

// Client.LeastLoaded prefers a connected node to a lower-numbered one that
// is not connected, and the next refresh goes to it.
func TestLeastLoadedClient(t *testing.T) {
	kc := newCluster(t)
	log := logMetadata(kc)
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	ctx := ctxFor(t, 5*time.Second)
	// Wait for the refresh New starts (a Refresh call could add a
	// second one, which would connect a node).
	eventually(t, 5*time.Second, "first metadata", func() bool { return len(c.Brokers()) == 3 })
	// The first refresh went through a bootstrap connection, which is
	// closed now; no node is connected yet.
	for _, b := range c.Brokers() {
		if b.Connected() {
			t.Fatalf("broker %d connected before anything used it", b.ID())
		}
	}
	b2 := c.Broker(2)
	if _, err := b2.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.LeastLoaded(); got != b2 {
		t.Fatalf("LeastLoaded() = %d, want the connected broker 2", got.ID())
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if n := log.last().node; n != 2 {
		t.Errorf("refresh sent to node %d, want the least loaded, 2", n)
	}
}

// Topics idle for longer than metadata.max.idle.ms are no longer asked
// for; a topic in use is.
func TestIdleTopicDropped(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "busy", "quiet"))
	log := logMetadata(kc)
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.MetadataMaxIdle = 300 * time.Millisecond
	c := newClient(t, cfg)
	ctx := ctxFor(t, 5*time.Second)
	busy := c.UseTopic("busy")
	c.UseTopic("quiet")
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := log.last().topics; !sameSet(got, "busy", "quiet") {
		t.Fatalf("first request asked for %v, want both topics", got)
	}
	if s := c.Snapshot(); s.Topics["busy"] == nil || s.Topics["quiet"] == nil {
		t.Fatal("topics in use missing from the snapshot")
	}

	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); {
		busy.Touch(time.Now().UnixNano())
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := log.last().topics; !sameSet(got, "busy") {
		t.Errorf("after 500ms with only busy in use, asked for %v, want [busy]", got)
	}
	if got := log.last().topics; got == nil {
		t.Error("asked for every topic (null list)")
	}
	if s := c.Snapshot(); s.Topics["quiet"] != nil || s.Topics["busy"] == nil {
		t.Errorf("snapshot topics after the drop: %v", keys(s.Topics))
	}
}

// A handle whose topic was dropped for idleness works again on its next
// Touch: the topic is asked for again, without calling UseTopic.
func TestDroppedTopicComesBackOnTouch(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "sometimes"))
	log := logMetadata(kc)
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.MetadataMaxIdle = 100 * time.Millisecond
	c := newClient(t, cfg)
	ctx := ctxFor(t, 5*time.Second)
	u := c.UseTopic("sometimes")
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := log.last().topics; len(got) != 0 {
		t.Fatalf("idle topic still asked for: %v", got)
	}
	u.Touch(time.Now().UnixNano())
	eventually(t, 2*time.Second, "the touched topic back in the snapshot", func() bool {
		return c.Snapshot().Topics["sometimes"] != nil
	})
	if got := log.last().topics; !sameSet(got, "sometimes") {
		t.Errorf("after Touch asked for %v, want [sometimes]", got)
	}

	// Dropped again, then UseTopic: the same handle (callers cache it),
	// which keeps working.
	time.Sleep(200 * time.Millisecond)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := log.last().topics; len(got) != 0 {
		t.Fatalf("idle topic still asked for: %v", got)
	}
	if again := c.UseTopic("sometimes"); again != u {
		t.Error("UseTopic after a drop returned a new handle; the cached one would no longer count")
	}
	if _, err := c.WaitTopic(ctx, "sometimes"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		time.Sleep(60 * time.Millisecond)
		u.Touch(time.Now().UnixNano())
	}
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := log.last().topics; !sameSet(got, "sometimes") {
		t.Errorf("topic touched through the cached handle was dropped: asked for %v", got)
	}
}

// metadata.max.age.ms: with nothing else happening, metadata is refreshed
// periodically.
func TestPeriodicRefresh(t *testing.T) {
	kc := newCluster(t)
	log := logMetadata(kc)
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.MetadataMaxAge = 100 * time.Millisecond
	c := newClient(t, cfg)
	if err := c.Refresh(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	first := c.Snapshot().At
	base := log.count()
	time.Sleep(650 * time.Millisecond)
	got := log.count() - base
	if got < 2 || got > 10 {
		t.Errorf("%d refreshes in 650ms with a 100ms max age, want about 6", got)
	}
	if !c.Snapshot().At.After(first) {
		t.Error("snapshot not renewed")
	}
	reqs := log.all()[base:]
	for i := 1; i < len(reqs); i++ {
		// Seen by the broker, so the gap varies with the requests'
		// latency; a refresh loop without its timer would be ~0 apart.
		if gap := reqs[i].at.Sub(reqs[i-1].at); gap < 25*time.Millisecond {
			t.Errorf("refreshes %v apart, want about the max age (100ms)", gap)
		}
	}
}

// A failing refresh is retried with growing backoff, not in a busy loop.
func TestRefreshRetryBackoff(t *testing.T) {
	kc := newCluster(t)
	log := logMetadata(kc)
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, TopLevel: true, Err: fkerr.UnknownServerError, Count: -1})
	// One bootstrap address: one Metadata request per refresh attempt
	// (each attempt tries every candidate broker once).
	cfg := testConfig(kc.ListenAddrs()[0])
	cfg.RetryBackoff = 20 * time.Millisecond
	cfg.RetryBackoffMax = 80 * time.Millisecond
	c := newClient(t, cfg)
	time.Sleep(500 * time.Millisecond)
	// Kafka 4 answers Metadata v13 with a top-level error only for
	// rebootstrapping; kfake's fault sets it for any error. Either way
	// no snapshot is installed, and retries are paced: the first ones
	// 20, 40, 80ms apart, then 80ms.
	n := log.count()
	if n < 3 || n > 12 {
		t.Errorf("%d Metadata requests in 500ms of failures, want backoff-paced retries (about 7)", n)
	}
	if len(c.Snapshot().Brokers) != 0 {
		t.Error("a failed refresh installed a snapshot")
	}
}

// Close ends the metadata goroutine and the connections; it may be called
// concurrently and again; a Refresh after Close fails with ErrClosed.
func TestClose(t *testing.T) {
	before := live.Count()
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	c, err := New(testConfig(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTopic(ctxFor(t, 5*time.Second), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Broker(0).Connect(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := c.WaitTopic(context.Background(), "never")
		waiting <- err
	}()
	time.Sleep(50 * time.Millisecond)

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Close() }()
	}
	wg.Wait()
	// Every Close returned: the metadata goroutine, the dials and the
	// connections have all ended, at once (internal/live).
	if n := live.Count() - before; n > 0 {
		t.Errorf("%d goroutines of the client still counted when Close returned", n)
	}
	c.Close()
	select {
	case err := <-waiting:
		if !errors.Is(err, kerr.ErrClosed) {
			t.Errorf("WaitTopic across Close: err = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("WaitTopic did not return on Close")
	}
	if err := c.Refresh(context.Background()); !errors.Is(err, kerr.ErrClosed) {
		t.Errorf("Refresh after Close: err = %v, want ErrClosed", err)
	}
	if len(c.Brokers()) != 0 {
		t.Error("brokers left after Close")
	}
}

func sameSet(got []string, want ...string) bool {
	g := append([]string(nil), got...)
	sort.Strings(g)
	sort.Strings(want)
	return slices.Equal(g, want)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A Send waiting for a new topic while no broker can be reached asks for
// metadata once per reconnect backoff, not in a busy loop: a refresh
// fails at once while every broker is backing off, and a new topic cuts
// the refresh backoff, not the brokers' reconnect backoff.
func TestWaitTopicUnreachablePaced(t *testing.T) {
	cfg := testConfig(testcluster.FreeAddr(t))
	cfg.Broker.ReconnectBackoff, cfg.Broker.ReconnectBackoffMax = 50*time.Millisecond, time.Second
	c := newClient(t, cfg)
	if _, err := c.WaitTopic(ctxFor(t, time.Second), "t"); !errors.Is(err, kerr.ErrMetadataTimeout) {
		t.Fatalf("WaitTopic with no broker reachable: %v, want ErrMetadataTimeout", err)
	}
	// 50, 100, 200, 400 ms (±20%) apart: about 5 dials in the second.
	if n := c.MetadataRequests(); n > 15 {
		t.Errorf("%d Metadata attempts in 1s with the only broker unreachable, want one per reconnect backoff (about 5)", n)
	}
}

// A topic used for the first time is asked for at once, not
// retry.backoff.ms after the last refresh (Java's
// requestUpdateForNewTopics).
func TestNewTopicRefreshesAtOnce(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.RetryBackoff, cfg.RetryBackoffMax = time.Minute, time.Minute
	c := newClient(t, cfg)
	eventually(t, 5*time.Second, "first metadata", func() bool { return len(c.Brokers()) == 3 })
	if _, err := c.WaitTopic(ctxFor(t, 10*time.Second), "t"); err != nil {
		t.Fatalf("a new topic waited for the refresh backoff: %v", err)
	}
}

// Answers that bring nothing new (here a partition that stays without a
// leader, which the sender asks about in every round) space refreshes
// out exponentially up to retry.backoff.max.ms, as Java's
// Metadata.timeToAllowUpdate does, instead of one every retry.backoff.ms.
func TestRefreshBacksOffWithoutProgress(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "t"))
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "t", Err: fkerr.LeaderNotAvailable, Count: -1})
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.RetryBackoff, cfg.RetryBackoffMax = 20*time.Millisecond, 160*time.Millisecond
	c := newClient(t, cfg)
	c.UseTopic("t")
	if err := c.Refresh(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	log := logMetadata(kc)
	end := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(end) {
		c.RequestRefresh() // as the sender does while a partition has no leader
		time.Sleep(2 * time.Millisecond)
	}
	// At a steady 20ms: about 75. Growing to 160ms: about 14.
	if n := log.count(); n > 30 || n < 3 {
		t.Errorf("%d Metadata requests in 1.5s of answers without progress, want them spaced out to retry.backoff.max.ms (about 14)", n)
	}
}

// Equally loaded nodes are picked in random order, as Java's
// leastLoadedNode starts at a random offset: producers spread their
// Metadata and InitProducerId requests over the brokers.
func TestLeastLoadedSpreads(t *testing.T) {
	cfg := (&broker.Config{ClientID: "kprod-test", RequestTimeout: 5 * time.Second}).Defaults()
	var cands []*broker.Broker
	for id := range int32(3) {
		b := broker.NewBroker(id, testcluster.FreeAddr(t), cfg)
		t.Cleanup(b.Close)
		cands = append(cands, b)
	}
	picked := map[int32]int{}
	for range 300 {
		picked[leastLoaded(cands, nil).ID()]++
	}
	if len(picked) != 3 {
		t.Errorf("300 picks among 3 idle nodes chose %v: want all three", picked)
	}
}

// TOPIC_AUTHORIZATION_FAILED, then the ACL is granted: the next wait asks
// again before it returns the error, as Java's waitOnMetadata awaits an
// update before it throws one, instead of failing from the answer it
// already has until the next periodic refresh (metadata.max.age.ms).
func TestWaitTopicAsksAgainAfterANonRetriableError(t *testing.T) {
	kc := newCluster(t, kfake.SeedTopics(1, "secret"))
	h := kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "secret", Err: fkerr.TopicAuthorizationFailed, Count: -1})
	c := newClient(t, testConfig(kc.ListenAddrs()...))
	if _, err := c.WaitTopic(ctxFor(t, 5*time.Second), "secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("WaitTopic without the ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	before := c.MetadataRequests()
	if _, err := c.WaitTopic(ctxFor(t, 5*time.Second), "secret"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("WaitTopic again without the ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if c.MetadataRequests() == before {
		t.Error("the second WaitTopic failed from the answer it already had, without asking again")
	}
	h.Remove() // the ACL is granted
	if _, err := c.WaitTopic(ctxFor(t, 5*time.Second), "secret"); err != nil {
		t.Fatalf("WaitTopic once the ACL was granted: %v", err)
	}
}

// A wait longer than metadata.max.idle.ms keeps its topic in the metadata
// requests (Java's waitOnMetadata adds it again every round): the topic,
// created during the wait, is found, without a storm of requests that do
// not name it.
func TestWaitTopicLongerThanMetadataMaxIdle(t *testing.T) {
	kc := newCluster(t)
	log := logMetadata(kc)
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.MetadataMaxIdle = 300 * time.Millisecond // stands for 5 s (its minimum) against max.block.ms 60 s
	c := newClient(t, cfg)
	if err := c.Refresh(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(time.Second, func() { kc.CreateTopic("late", 2, nil) })
	start := time.Now()
	if _, err := c.WaitTopic(ctxFor(t, 4*time.Second), "late"); err != nil {
		t.Errorf("topic created 1s into the wait not found: %v (after %v)", err, time.Since(start))
	}
	// Refreshes about retry.backoff.ms apart: tens in a few seconds.
	if n := log.count(); n > 100 {
		t.Errorf("%d Metadata requests in %v", n, time.Since(start))
	}
}

// Retiring the bootstrap connection after the first answer is a close on
// purpose: it does not ask for another refresh (only a lost connection or
// a failed dial does).
func TestRetiredBootstrapAsksNoRefresh(t *testing.T) {
	kc := newCluster(t)
	log := logMetadata(kc)
	newClient(t, testConfig(kc.ListenAddrs()[0]))
	time.Sleep(time.Second) // the first refresh runs at once
	if n := log.count(); n != 1 {
		t.Errorf("%d Metadata requests in the first second, want 1", n)
	}
}

// A refresh that fails at once (a broker starting up answers Metadata
// with no brokers; a top-level REBOOTSTRAP_REQUIRED) is retried after
// retry.backoff.ms, growing, also while a Send waits for a topic that no
// answer named yet: the topic counts as new once, not on every failed
// round (they were sent back to back, thousands a second).
func TestWaitTopicBacksOffFailingRefreshes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(kc *kfake.Cluster) func() int
	}{
		{"no brokers in the answer", func(kc *kfake.Cluster) func() int {
			var n atomic.Int32
			kc.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				kc.KeepControl()
				n.Add(1)
				return kreq.ResponseKind().(*kmsg.MetadataResponse), nil, true
			})
			return func() int { return int(n.Load()) }
		}},
		{"REBOOTSTRAP_REQUIRED", func(kc *kfake.Cluster) func() int {
			h := kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, TopLevel: true, Err: fkerr.RebootstrapRequired, Count: -1})
			return func() int { return int(h.Hits()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			requests := tc.fault(kc)
			cfg := testConfig(kc.ListenAddrs()...)
			cfg.RetryBackoff, cfg.RetryBackoffMax = 100*time.Millisecond, time.Second
			c := newClient(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := c.WaitTopic(ctx, "t"); !errors.Is(err, kerr.ErrMetadataTimeout) {
				t.Fatalf("WaitTopic: %v, want ErrMetadataTimeout", err)
			}
			// 100, 200, 400, 800 ms: about 5 in 2 s.
			if n := requests(); n > 20 {
				t.Errorf("%d Metadata requests in 2s with retry.backoff.ms 100 growing to 1s", n)
			}
		})
	}
}

// A broker that supports no Metadata version kprod has (a KRaft
// controller's listener given as bootstrap.servers) fails the wait at
// once with ErrUnsupportedVersion, as Java's metadata fails fatally,
// rather than after max.block.ms.
func TestWaitTopicUnsupportedMetadataFailsAtOnce(t *testing.T) {
	kc := newCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	cfg := testConfig(kc.ListenAddrs()...)
	cfg.Broker.MaxVersions = map[int16]int16{int16(kmsg.Metadata): -1}
	c := newClient(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.WaitTopic(ctx, "t")
	if !errors.Is(err, kerr.ErrUnsupportedVersion) || ctx.Err() != nil {
		t.Fatalf("WaitTopic: %v (ctx: %v), want ErrUnsupportedVersion before the ctx ended", err, ctx.Err())
	}
}
