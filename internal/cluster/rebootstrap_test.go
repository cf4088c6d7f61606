package cluster

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bootName is the bootstrap address of the rebootstrap tests: a name that
// only their dialer knows, pointing at whichever cluster the test says,
// as a DNS name or a load balancer in front of a replaced cluster does.
const bootName = "kafka-bootstrap.test:9092"

// movingBootstrap makes cfg bootstrap from bootName and returns the
// setter of the address that name leads to. Every other address is dialed
// as it is.
func movingBootstrap(cfg *Config, to string) func(string) {
	var target atomic.Pointer[string]
	target.Store(&to)
	cfg.Bootstrap = []string{bootName}
	cfg.Broker.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == bootName {
			addr = *target.Load()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return func(addr string) { target.Store(&addr) }
}

// rebootstrapClusters starts the cluster the client first learns (old) and
// the one that replaces it (new), told apart by their cluster ids.
func rebootstrapClusters(t *testing.T) (old, new *kfake.Cluster) {
	return newCluster(t, kfake.ClusterID("old-cluster")), newCluster(t, kfake.ClusterID("new-cluster"))
}

// refreshUntilCluster refreshes until the metadata comes from the cluster
// with id, as a producer does while its records wait for metadata.
func refreshUntilCluster(t *testing.T, c *Client, id string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.Snapshot().ClusterID != id {
		if time.Now().After(deadline) {
			t.Fatalf("metadata still from cluster %q after %v, want %q", c.Snapshot().ClusterID, within, id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.Refresh(ctx)
		cancel()
	}
}

// Every broker the metadata named is gone, and the bootstrap name now
// leads to a new cluster: with metadata.recovery.strategy=rebootstrap the
// client asks the bootstrap address again and learns the new brokers
// (KIP-899); with none it keeps asking the old ones.
func TestRebootstrapWhenKnownBrokersAreGone(t *testing.T) {
	for _, rebootstrap := range []bool{true, false} {
		name := map[bool]string{true: "rebootstrap", false: "none"}[rebootstrap]
		t.Run(name, func(t *testing.T) {
			old, new := rebootstrapClusters(t)
			cfg := testConfig()
			cfg.Rebootstrap = rebootstrap
			cfg.RebootstrapTrigger = time.Hour // not the trigger here
			point := movingBootstrap(&cfg, old.ListenAddrs()[0])
			c := newClient(t, cfg)
			refreshUntilCluster(t, c, "old-cluster", 5*time.Second)

			old.Close()
			point(new.ListenAddrs()[0])
			if !rebootstrap {
				for range 3 {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					err := c.Refresh(ctx)
					cancel()
					if err == nil {
						t.Fatal("Refresh succeeded with every known broker gone and no rebootstrap")
					}
				}
				if id := c.Snapshot().ClusterID; id != "old-cluster" {
					t.Fatalf("metadata from %q without rebootstrapping", id)
				}
				return
			}
			refreshUntilCluster(t, c, "new-cluster", 10*time.Second)
			if n := len(c.Brokers()); n != 3 {
				t.Errorf("%d brokers after the rebootstrap, want the new cluster's 3", n)
			}
			for _, b := range c.Brokers() {
				if b.ID() < 0 {
					t.Errorf("bootstrap connection %d kept after the new cluster answered", b.ID())
				}
			}
		})
	}
}

// A rebootstrap does not wait for the gone brokers' reconnect backoff:
// the bootstrap addresses it goes back to are fresh (Java rebootstraps as
// soon as no node is available).
func TestRebootstrapNotHeldByReconnectBackoff(t *testing.T) {
	old, new := rebootstrapClusters(t)
	cfg := testConfig()
	cfg.Rebootstrap = true
	cfg.RebootstrapTrigger = time.Hour
	cfg.Broker.ReconnectBackoff, cfg.Broker.ReconnectBackoffMax = 5*time.Second, 5*time.Second
	point := movingBootstrap(&cfg, old.ListenAddrs()[0])
	c := newClient(t, cfg)
	refreshUntilCluster(t, c, "old-cluster", 5*time.Second)
	// Moved first: a rebootstrap that dialed the old address would wait
	// out that dial's own backoff.
	point(new.ListenAddrs()[0])
	old.Close()
	refreshUntilCluster(t, c, "new-cluster", 3*time.Second)
}

// A broker that answers REBOOTSTRAP_REQUIRED (Metadata v13, KIP-1102)
// sends the client back to the bootstrap addresses at once, though the
// brokers it knows still answer.
func TestRebootstrapWhenToldTo(t *testing.T) {
	old, new := rebootstrapClusters(t)
	cfg := testConfig()
	cfg.Rebootstrap = true
	cfg.RebootstrapTrigger = time.Hour
	point := movingBootstrap(&cfg, old.ListenAddrs()[0])
	c := newClient(t, cfg)
	refreshUntilCluster(t, c, "old-cluster", 5*time.Second)

	point(new.ListenAddrs()[0])
	h := old.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, TopLevel: true, Err: fkerr.RebootstrapRequired, Count: -1})
	refreshUntilCluster(t, c, "new-cluster", 10*time.Second)
	// After a rebootstrap the bootstrap addresses are asked first, not
	// the known brokers that said to rebootstrap (or that hang).
	if n := h.Hits(); n != 1 {
		t.Errorf("the old brokers were asked %d times, want once: the refresh after it goes to bootstrap.servers first", n)
	}
}

// Known brokers that answer, but only with errors, are given up on once
// refreshes have failed for metadata.recovery.rebootstrap.trigger.ms
// (KIP-1102), and not before.
func TestRebootstrapAfterTrigger(t *testing.T) {
	old, new := rebootstrapClusters(t)
	cfg := testConfig()
	cfg.Rebootstrap = true
	cfg.RebootstrapTrigger = 700 * time.Millisecond
	point := movingBootstrap(&cfg, old.ListenAddrs()[0])
	c := newClient(t, cfg)
	refreshUntilCluster(t, c, "old-cluster", 5*time.Second)

	point(new.ListenAddrs()[0])
	old.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, TopLevel: true, Err: fkerr.UnknownServerError, Count: -1})
	failedAt := time.Now()
	refreshUntilCluster(t, c, "new-cluster", 10*time.Second)
	if d := time.Since(failedAt); d < cfg.RebootstrapTrigger {
		t.Errorf("rebootstrapped %v after the first failure, want no sooner than the trigger (%v)", d, cfg.RebootstrapTrigger)
	}
}

// A refresh does not wait out the reconnect backoff of a broker whose
// connection was lost: it moves on (Java's leastLoadedNode skips a node
// in reconnect backoff), here to a rebootstrap, since that broker was the
// only one known.
func TestRefreshSkipsBrokerBackingOffAfterLostConnection(t *testing.T) {
	c, lose := lostConnectionClient(t, true, 5*time.Second)
	lose()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	for {
		err := c.Refresh(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no metadata %v after the connection was lost (reconnect.backoff.ms 5s): %v", time.Since(start).Round(time.Millisecond), err)
		}
	}
}

// The one known broker lost its connection a moment ago (a blip; the
// default reconnect.backoff.ms, 50ms): the next refresh succeeds, at
// once. With rebootstrap it goes back to bootstrap.servers, as Java's
// NetworkClient does when no node is available or connected; without,
// it waits for the broker's backoff.
func TestRefreshAfterLostConnectionSucceeds(t *testing.T) {
	for _, rebootstrap := range []bool{true, false} {
		t.Run(map[bool]string{true: "rebootstrap", false: "none"}[rebootstrap], func(t *testing.T) {
			c, lose := lostConnectionClient(t, rebootstrap, 50*time.Millisecond)
			lose()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := c.Refresh(ctx); err != nil {
				t.Fatalf("the first refresh after the connection was lost: %v", err)
			}
		})
	}
}

// lostConnectionClient is a Client of a one-broker cluster, connected to
// the broker its metadata named, with reconnect.backoff.ms backoff; lose
// closes its connections and returns once the broker is seen lost.
func lostConnectionClient(t *testing.T, rebootstrap bool, backoff time.Duration) (*Client, func()) {
	fake := newCluster(t, kfake.NumBrokers(1))
	cfg := testConfig(fake.ListenAddrs()...)
	cfg.Rebootstrap = rebootstrap
	cfg.RebootstrapTrigger = time.Hour
	cfg.Broker.ReconnectBackoff, cfg.Broker.ReconnectBackoffMax = backoff, backoff
	var conns struct {
		sync.Mutex
		all []net.Conn
	}
	cfg.Broker.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			conns.Lock()
			conns.all = append(conns.all, c)
			conns.Unlock()
		}
		return c, err
	}
	c := newClient(t, cfg)
	// Until the metadata came from the broker itself, not its bootstrap
	// address.
	deadline := time.Now().Add(5 * time.Second)
	for len(c.Brokers()) != 1 || !c.Brokers()[0].Connected() {
		if time.Now().After(deadline) {
			t.Fatal("no connection to the broker the metadata named")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.Refresh(ctx)
		cancel()
	}
	b := c.Brokers()[0]
	return c, func() {
		t.Helper()
		conns.Lock()
		for _, conn := range conns.all {
			conn.Close()
		}
		conns.Unlock()
		deadline := time.Now().Add(5 * time.Second)
		for b.Connected() {
			if time.Now().After(deadline) {
				t.Fatal("the closed connection is not seen lost")
			}
			time.Sleep(time.Millisecond)
		}
	}
}
