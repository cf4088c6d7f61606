package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: Close
// must end the metadata goroutine and every connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newCluster starts a 3-broker kfake cluster, closed when the test ends.
func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig has short backoffs and long ages: tests that want periodic
// refreshes or idle topics set those themselves.
func testConfig(bootstrap ...string) Config {
	return Config{
		Broker:          (&broker.Config{ClientID: "kprod-test", RequestTimeout: 5 * time.Second}).Defaults(),
		Bootstrap:       bootstrap,
		MetadataMaxAge:  5 * time.Minute,
		MetadataMaxIdle: 5 * time.Minute,
		RetryBackoff:    10 * time.Millisecond,
		RetryBackoffMax: 100 * time.Millisecond,
	}
}

// newClient starts a Client, closed when the test ends (before the
// cluster: cleanups run last-in first-out).
func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// metadataLog records the Metadata requests a kfake cluster receives,
// without answering them (the cluster does).
type metadataLog struct {
	mu   sync.Mutex
	reqs []loggedMetadata
}

type loggedMetadata struct {
	node      int32
	topics    []string // nil: all topics
	autoCreat bool
	at        time.Time
}

func logMetadata(kc *kfake.Cluster) *metadataLog {
	l := &metadataLog{}
	kc.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kreq.(*kmsg.MetadataRequest)
		e := loggedMetadata{node: kc.CurrentNode(), autoCreat: req.AllowAutoTopicCreation, at: time.Now()}
		if req.Topics != nil {
			e.topics = []string{}
			for _, t := range req.Topics {
				if t.Topic != nil {
					e.topics = append(e.topics, *t.Topic)
				}
			}
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, e)
		l.mu.Unlock()
		return nil, nil, false
	})
	return l
}

func (l *metadataLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

func (l *metadataLog) all() []loggedMetadata {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedMetadata(nil), l.reqs...)
}

func (l *metadataLog) last() loggedMetadata {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.reqs) == 0 {
		return loggedMetadata{node: -1}
	}
	return l.reqs[len(l.reqs)-1]
}

// eventually polls cond every 5ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
