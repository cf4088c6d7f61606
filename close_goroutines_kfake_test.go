package kprod

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/live"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerGoroutinesNow lists, without waiting, the goroutines running
// the producer's own loops: the sender, AddPartitionsToTxn, the metadata
// goroutine, connections and dials.
func producerGoroutinesNow() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range []string{
			"kprod.(*sender).run", "kprod.(*txnManager).addLoop",
			"internal/cluster.(*Client).loop",
			"internal/broker.(*Conn).", "internal/broker.(*Broker).", "internal/broker.dialConn.",
		} {
			if strings.Contains(g, fn) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// checkNoProducerGoroutines fails the test if one of the producer's
// goroutines is still counted (internal/live) when after returned. Each
// is uncounted as its last act before what Close waits for, so this is
// checked at once: a grace period would let a goroutine that Close did
// not wait for end by itself, unseen (goleak, at the end of the package,
// waits seconds). The stacks are only for the message.
func checkNoProducerGoroutines(t *testing.T, after string) {
	t.Helper()
	if n := live.Count(); n != 0 {
		t.Fatalf("%d of the producer's goroutines still counted when %s returned; running now:\n%s", n, after, strings.Join(producerGoroutinesNow(), "\n\n"))
	}
}

// Close returns only when every goroutine the producer started has ended,
// whatever was under way: records in flight, a transaction, a Close from
// a callback, a Close whose ctx ended first.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	if g := producerGoroutinesNow(); len(g) > 0 || live.Count() != 0 {
		t.Fatalf("another test left a producer running (%d goroutines counted):\n%s", live.Count(), strings.Join(g, "\n\n"))
	}
	t.Run("records in flight", func(t *testing.T) {
		c := newFake(t, 3)
		p, err := NewProducer(testConfig(c))
		if err != nil {
			t.Fatal(err)
		}
		o := newOutcomes(t)
		for i := range 3000 {
			p.Send(context.Background(), &Record{Topic: "t", Value: []byte{byte(i)}}, o.cb())
		}
		if err := p.Close(ctxT(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		checkNoProducerGoroutines(t, "Close")
		o.wait(t, time.Second)
	})
	t.Run("transaction v1", func(t *testing.T) {
		c := newFake(t, 3)
		p := beginTxn(t, c, testConfig(c), "close-leak", true)
		wait := sendTxn(t, p, "t", 3, 100, "x")
		if err := p.Close(ctxT(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
		checkNoProducerGoroutines(t, "Close")
		wait()
	})
	t.Run("Close from a callback", func(t *testing.T) {
		c := newFake(t, 3)
		p, err := NewProducer(testConfig(c))
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		p.Send(context.Background(), &Record{Topic: "t", Value: []byte("x")}, func(*Record, error) {
			p.Close(context.Background())
			close(closed)
		})
		<-closed
		p.Close(context.Background()) // waits for the sender to finish the close
		checkNoProducerGoroutines(t, "the second Close")
	})
	t.Run("forced by Close's ctx", func(t *testing.T) {
		c := newFake(t, 3)
		stop := stopAtCleanup(t)
		c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			c.SleepControl(func() { sleepOrStop(20*time.Second, stop) })
			return nil, nil, false
		})
		p, err := NewProducer(testConfig(c))
		if err != nil {
			t.Fatal(err)
		}
		o := newOutcomes(t)
		for i := range 100 {
			p.Send(context.Background(), &Record{Topic: "t", Value: []byte{byte(i)}}, o.cb())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := p.Close(ctx); err == nil {
			t.Fatal("Close with produce requests held returned nil")
		}
		checkNoProducerGoroutines(t, "the forced Close")
		o.wait(t, time.Second)
	})
}

// A Close with nothing to deliver does not wait for the producer id
// request that the idempotent producer's sender has out to a broker that
// accepts connections and never answers: it would wait up to
// request.timeout.ms (here minutes) or the connection setup timeout.
func TestCloseDoesNotWaitForProducerIDWithNothingBuffered(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	cfg := DefaultConfig()
	cfg.BootstrapServers = []string{l.Addr().String()}
	cfg.MaxBlock = 500 * time.Millisecond
	cfg.RequestTimeout = 5 * time.Minute
	cfg.SocketConnectionSetupTimeout, cfg.SocketConnectionSetupTimeoutMax = 5*time.Minute, 5*time.Minute
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SendSync(context.Background(), &Record{Topic: "t", Value: []byte("x")}); !errors.Is(err, ErrMetadataTimeout) {
		t.Fatalf("SendSync to a silent broker: %v, want ErrMetadataTimeout", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close with nothing buffered waited for the producer id request")
	}
	checkNoProducerGoroutines(t, "Close")
}
