package broker

import (
	"context"
	"github.com/kprod/kprod/internal/live"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// Conn and Broker goroutine must end on Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newCluster starts a kfake cluster that is closed when the test ends.
func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testConfig is a Config with the Java defaults and a request timeout short
// enough that a hung test fails rather than stalls.
func testConfig() *Config {
	return (&Config{ClientID: "kprod-test", RequestTimeout: 5 * time.Second}).Defaults()
}

// dialTest opens a Conn to addr and closes it when the test ends.
func dialTest(t *testing.T, addr string, cfg *Config) *Conn {
	t.Helper()
	c, err := dialConn(context.Background(), 0, addr, cfg, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// release returns a channel that is closed when the test ends, before the
// cluster is closed (cleanups run last-in first-out), so that control
// functions holding a request on it return.
func release(t *testing.T) chan struct{} {
	ch := make(chan struct{})
	t.Cleanup(func() { close(ch) })
	return ch
}

// hold blocks the current control function until ch is closed (or a safety
// limit passes, so that no kfake goroutine can outlive the test). It
// blocks kfake's whole request loop, which is what a test with one broker
// and one connection wants: responses are held back in order.
//
// It deliberately does not use kfake's SleepControl: a slept control that
// is woken just before Cluster.Close can deadlock kfake's run goroutine
// (the control function returns through Close's die channel holding
// kfake's control mutex), which goleak then reports.
func hold(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
	}
}

// holdMetadata makes kc hold every Metadata request until the test ends.
func holdMetadata(t *testing.T, kc *kfake.Cluster) {
	rel := release(t)
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		hold(rel)
		return nil, nil, false
	})
}

func metadataReq() *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Topics = []kmsg.MetadataRequestTopic{}
	return r
}

// checkEnded fails the test if a goroutine of a Conn or Broker started
// since before (live.Count at the test's start) is still counted: Close
// must wait for every one, so this is checked at once, with no grace
// period in which a goroutine Close did not wait for could end by itself.
// The stacks are only for the message.
func checkEnded(t *testing.T, before int64, after string) {
	t.Helper()
	if n := live.Count() - before; n > 0 {
		t.Errorf("%d Broker/Conn goroutines still counted when %s returned:\n%s", n, after, strings.Join(ourGoroutinesNow(), "\n\n"))
	}
}

func ourGoroutinesNow() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// A goroutine not yet scheduled shows only its go statement's
		// wrapper, e.g. broker.dialConn.gowrap1.
		if strings.Contains(g, "internal/broker.(*Conn).") || strings.Contains(g, "internal/broker.(*Broker).") ||
			strings.Contains(g, "internal/broker.dialConn.") {
			out = append(out, g)
		}
	}
	return out
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

// tcpPair is a connected loopback TCP pair: client (the dialled end) and
// server (the accepted end), both closed when the test ends.
func tcpPair(tb testing.TB) (client, server net.Conn) {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close() })
	server, err = l.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { server.Close() })
	return client, server
}

func netListen(t *testing.T) (net.Listener, error) {
	t.Helper()
	return net.Listen("tcp", "127.0.0.1:0")
}
