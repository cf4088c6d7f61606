package broker

import (
	"context"
	"errors"
	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/internal/testcluster"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// within reports whether a duration known to lie in [lo, hi] can be
// Backoff's jitter of want: within [0.8, 1.2] × want and never above
// maxD.
func within(lo, hi, want, maxD time.Duration) bool {
	return hi >= want*8/10 && lo <= min(want*12/10, maxD)
}

// Consecutive failed dials back off exponentially from reconnect.backoff.ms
// to reconnect.backoff.max.ms with ±20% jitter, the setup timeout grows the
// same way (KIP-601), and no dial happens while backing off.
func TestReconnectBackoff(t *testing.T) {
	addr := testcluster.FreeAddr(t)
	cfg := testConfig()
	cfg.ReconnectBackoff = 20 * time.Millisecond
	cfg.ReconnectBackoffMax = 320 * time.Millisecond
	cfg.SetupTimeout = time.Second
	cfg.SetupTimeoutMax = 4 * time.Second

	var mu sync.Mutex
	var dials []time.Duration // setup timeout each dial was given
	cfg.Dial = func(ctx context.Context, network, a string) (net.Conn, error) {
		dl, _ := ctx.Deadline()
		mu.Lock()
		dials = append(dials, time.Until(dl))
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, a)
	}
	b := NewBroker(1, addr, cfg)
	defer b.Close()

	for i := range 6 {
		wantBackoff := min(cfg.ReconnectBackoff<<i, cfg.ReconnectBackoffMax)
		before := time.Now()
		_, err := b.Connect(context.Background())
		after := time.Now()
		if !errors.Is(err, kerr.ErrDial) || !kerr.IsRetriable(err) {
			t.Fatalf("dial %d: err = %v, want a retriable ErrDial", i, err)
		}
		until := b.BackoffUntil()
		// The failure happened between before and after, so the
		// backoff lies in [until-after, until-before].
		if lo, hi := until.Sub(after), until.Sub(before); !within(lo, hi, wantBackoff, cfg.ReconnectBackoffMax) {
			t.Errorf("failure %d: backoff in [%v, %v], want %v ±20%%, at most %v", i+1, lo, hi, wantBackoff, cfg.ReconnectBackoffMax)
		}
		if b.LastError() == nil {
			t.Errorf("failure %d: LastError() is nil", i+1)
		}

		// While backing off nothing is dialed: Connect fails at once
		// with the last error, Ready says no.
		mu.Lock()
		n := len(dials)
		mu.Unlock()
		if time.Now().Before(until) {
			if _, err := b.Connect(context.Background()); !errors.Is(err, kerr.ErrDial) {
				t.Errorf("Connect while backing off: err = %v", err)
			}
			if b.Ready() {
				t.Error("Ready() while backing off")
			}
			mu.Lock()
			if len(dials) != n {
				t.Errorf("dialed while backing off (%d dials, want %d)", len(dials), n)
			}
			mu.Unlock()
		}
		time.Sleep(time.Until(until) + time.Millisecond)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(dials) != 6 {
		t.Fatalf("%d dials, want 6", len(dials))
	}
	for i, got := range dials {
		want := min(cfg.SetupTimeout<<i, cfg.SetupTimeoutMax)
		if !within(got, got+50*time.Millisecond, want, cfg.SetupTimeoutMax) {
			t.Errorf("dial %d: setup timeout %v, want %v ±20%%, at most %v", i, got, want, cfg.SetupTimeoutMax)
		}
	}
}

// A successful dial resets the backoff and the setup timeout.
func TestBackoffResetsOnSuccess(t *testing.T) {
	kc := newCluster(t)
	good := kc.ListenAddrs()[0]
	cfg := testConfig()
	cfg.ReconnectBackoff = 10 * time.Millisecond
	cfg.ReconnectBackoffMax = time.Second
	var mu sync.Mutex
	target := testcluster.FreeAddr(t)
	cfg.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		mu.Lock()
		a := target
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, a)
	}
	b := NewBroker(1, "broker-1:9092", cfg)
	defer b.Close()
	for range 3 {
		if _, err := b.Connect(context.Background()); err == nil {
			t.Fatal("dial to a closed port succeeded")
		}
		time.Sleep(time.Until(b.BackoffUntil()) + time.Millisecond)
	}
	mu.Lock()
	target = good
	mu.Unlock()
	if _, err := b.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.LastError() != nil || !b.BackoffUntil().IsZero() {
		t.Errorf("after a successful dial: LastError=%v BackoffUntil=%v, want reset", b.LastError(), b.BackoffUntil())
	}
	if !b.Connected() || !b.Ready() {
		t.Error("not connected/ready after a successful dial")
	}
}

// connections.max.idle.ms: a connection with nothing in flight is closed
// after the idle time, not before; the next request reconnects.
func TestIdleClose(t *testing.T) {
	kc := newCluster(t)
	cfg := testConfig()
	cfg.IdleTimeout = 600 * time.Millisecond
	// The backoff after a connection dies counts from its death: one
	// that died idle long ago is dialed again at once.
	cfg.ReconnectBackoff, cfg.ReconnectBackoffMax = 2*time.Second, 2*time.Second
	b := NewBroker(0, kc.ListenAddrs()[0], cfg)
	defer b.Close()

	if _, err := b.Do(context.Background(), metadataReq()); err != nil {
		t.Fatal(err)
	}
	c := b.Conn()
	if c == nil {
		t.Fatal("no connection after Do")
	}
	// The idle time counts from the connection's last use (the
	// response read), not from when this goroutine got here.
	start := time.Unix(0, c.lastUsed.Load())
	time.Sleep(100 * time.Millisecond)
	if c.Dead() && time.Since(start) < 550*time.Millisecond {
		t.Fatal("connection closed before the idle timeout")
	}
	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("idle connection not closed")
	}
	if idle := time.Since(start); idle < 550*time.Millisecond {
		t.Errorf("closed after %v idle, want >= 600ms since the last use", idle)
	}
	if !errors.Is(c.Err(), kerr.ErrConnectionLost) {
		t.Errorf("Err() = %v", c.Err())
	}
	time.Sleep(2600 * time.Millisecond) // longer than the backoff (2s, +20% at most)
	if b.Connected() {
		t.Error("Broker still reports the idle-closed connection as connected")
	}

	start = time.Now()
	if _, err := b.Do(context.Background(), metadataReq()); err != nil {
		t.Fatalf("Do after idle close: %v", err)
	}
	if el := time.Since(start); el > time.Second { // a backoff counted from now: 1.6s at least
		t.Errorf("Do a second after the idle close took %v: it waited out a reconnect backoff counted from now", el)
	}
	if n := b.Connections(); n != 2 {
		t.Errorf("Connections() = %d, want 2 (one reconnect)", n)
	}
}

// A connection in use is not idle: requests at intervals shorter than the
// idle timeout keep it open.
func TestIdleNotWhileUsed(t *testing.T) {
	kc := newCluster(t)
	cfg := testConfig()
	cfg.IdleTimeout = 400 * time.Millisecond
	b := NewBroker(0, kc.ListenAddrs()[0], cfg)
	defer b.Close()
	// 12 × 50ms outlasts the idle timeout; the gaps stay well below it
	// even on a loaded machine with -race.
	for range 12 {
		if _, err := b.Do(context.Background(), metadataReq()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := b.Connections(); n != 1 {
		t.Errorf("Connections() = %d, want 1: a used connection was closed as idle", n)
	}
}

// Close stops a dial under way (here one that would hang until its setup
// timeout) and returns only when the dial goroutine is gone.
func TestBrokerCloseStopsDial(t *testing.T) {
	before := live.Count()
	cfg := testConfig()
	cfg.SetupTimeout = time.Minute
	cfg.SetupTimeoutMax = time.Minute
	started := make(chan struct{})
	cfg.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b := NewBroker(3, "127.0.0.1:1", cfg)
	if b.Ready() {
		t.Fatal("Ready() before any dial")
	}
	<-started
	begin := time.Now()
	b.Close()
	if d := time.Since(begin); d > time.Second {
		t.Errorf("Close took %v with a dial under way", d)
	}
	checkEnded(t, before, "Close")
	if _, err := b.Connect(context.Background()); !errors.Is(err, kerr.ErrClosed) {
		t.Errorf("Connect after Close: err = %v, want ErrClosed", err)
	}
	if b.TrySend(metadataReq(), false, func(kmsg.Response, error) { t.Error("done called") }) {
		t.Error("TrySend after Close accepted a request")
	}
}

// Close with a live connection fails what is in flight and waits for the
// connection's goroutines.
func TestBrokerCloseWithConnection(t *testing.T) {
	before := live.Count()
	kc := newCluster(t)
	rel := release(t)
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		hold(rel)
		return nil, nil, false
	})
	b := NewBroker(0, kc.ListenAddrs()[0], testConfig())
	if _, err := b.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := b.Do(context.Background(), metadataReq())
		errc <- err
	}()
	eventually(t, time.Second, "request in flight", func() bool { return b.InFlight() == 1 })
	b.Close()
	// The request failed by the time Close returned (its caller, a
	// goroutine of this test, may take a moment more to wake up).
	select {
	case err := <-errc:
		if !errors.Is(err, kerr.ErrClosed) {
			t.Errorf("in-flight request: err = %v, want ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatal("in-flight request not failed by Close")
	}
	checkEnded(t, before, "Close")
}

// Concurrent callers share one dial.
func TestConcurrentConnectSharesDial(t *testing.T) {
	kc := newCluster(t)
	b := NewBroker(0, kc.ListenAddrs()[0], testConfig())
	defer b.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Do(context.Background(), metadataReq()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := b.Connections(); n != 1 {
		t.Errorf("Connections() = %d, want 1", n)
	}
}

func TestExponential(t *testing.T) {
	for _, tc := range []struct {
		base, maxD time.Duration
		n          int
		want       time.Duration
	}{
		{100, 1000, 0, 100},
		{100, 1000, 1, 200},
		{100, 1000, 3, 800},
		{100, 1000, 4, 1000},
		{100, 1000, 60, 1000}, // no overflow
		{100, 50, 3, 100},     // max below base: base
		{0, 1000, 3, 0},
		// A Long.MAX_VALUE max (properties saturate to it): the doubling
		// must reach it, never wrap negative.
		{100 * time.Millisecond, math.MaxInt64, 37, math.MaxInt64},
		{100 * time.Millisecond, math.MaxInt64, 1000, math.MaxInt64},
	} {
		if got := Exponential(tc.base, tc.maxD, tc.n); got != tc.want {
			t.Errorf("Exponential(%v, %v, %d) = %v, want %v", tc.base, tc.maxD, tc.n, got, tc.want)
		}
	}
	// Backoff: the max is a hard limit (Java's ExponentialBackoff clips
	// after the jitter), and a max below the base disables growth.
	for range 200 {
		if d := Backoff(100, 1000, 10); d < 800 || d > 1000 {
			t.Fatalf("Backoff at the cap = %v, want in [800, 1000]", d)
		}
		if d := Backoff(100, 1000, 1); d < 160 || d > 240 {
			t.Fatalf("Backoff(100, 1000, 1) = %v, want 200 ±20%%", d)
		}
	}
	for n := range 80 {
		if d := Backoff(100*time.Millisecond, math.MaxInt64, n); d <= 0 {
			t.Fatalf("Backoff(100ms, MaxInt64, %d) = %v: wrapped negative", n, d)
		}
	}
	if d := Backoff(100, 50, 3); d != 100 {
		t.Errorf("Backoff(100, 50, 3) = %v, want 100", d)
	}
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 1000 {
		d := Jitter(time.Second)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 800*time.Millisecond || hi > 1200*time.Millisecond || hi-lo < 200*time.Millisecond {
		t.Errorf("Jitter(1s) over 1000 draws in [%v, %v], want spread within [0.8s, 1.2s]", lo, hi)
	}
}

// The idle close and a request accepted at the same moment: the request is
// either refused (TrySend false, nothing sent) or written, never accepted
// and then failed unwritten as idle, which would cost a record with
// retries=0 and a retry backoff otherwise.
func TestIdleCloseNeverFailsAcceptedRequest(t *testing.T) {
	kc := newCluster(t)
	cfg := testConfig()
	cfg.IdleTimeout = 3 * time.Millisecond
	cfg.ReconnectBackoff, cfg.ReconnectBackoffMax = time.Millisecond, time.Millisecond
	b := NewBroker(0, kc.ListenAddrs()[0], cfg)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted, idleFailed := 0, 0
	for i := 0; i < 600 && ctx.Err() == nil; i++ {
		c, err := b.Connect(ctx)
		if err != nil {
			break // out of time on a slow machine: judge what was done
		}
		// Around the idle deadline: 2 to 4 ms after the last use.
		time.Sleep(2*time.Millisecond + time.Duration(i%9)*250*time.Microsecond)
		done := make(chan error, 1)
		if !c.TrySend(metadataReq(), false, func(_ kmsg.Response, err error) { done <- err }) {
			continue
		}
		accepted++
		if err := <-done; err != nil && strings.Contains(err.Error(), "idle") {
			idleFailed++
		}
	}
	if idleFailed > 0 {
		t.Errorf("%d of %d accepted requests failed unwritten because the connection was closed as idle", idleFailed, accepted)
	}
	if accepted == 0 {
		t.Error("no request accepted: the test did not test anything")
	}
}

// lossyDialer dials for real and keeps what it dialed, so that a test can
// cut the first connection and have the dials after it refused.
type lossyDialer struct {
	mu       sync.Mutex
	conns    []net.Conn
	timeouts []time.Duration // per dial, what its ctx had left: the setup timeout
	refuse   bool
}

func (d *lossyDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	dl, _ := ctx.Deadline()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timeouts = append(d.timeouts, time.Until(dl))
	if d.refuse {
		return nil, errors.New("connection refused (the test's)")
	}
	var nd net.Dialer
	nc, err := nd.DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, nc)
	}
	return nc, err
}

// lose closes the first connection dialed and refuses every dial from now
// on, as one step: no dial falls between the two.
func (d *lossyDialer) lose() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refuse = true
	d.conns[0].Close()
}

// accept lets dials through again.
func (d *lossyDialer) accept() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.refuse = false
}

// OnDisconnect reports a connection lost and a dial that failed (the
// cluster then asks for new metadata, as Java's handleServerDisconnect
// does), but not a Broker closed or retired on purpose.
func TestOnDisconnect(t *testing.T) {
	kc := newCluster(t)
	addr := kc.ListenAddrs()[0]
	var dialer lossyDialer
	cfg := testConfig()
	cfg.ReconnectBackoff, cfg.ReconnectBackoffMax = time.Millisecond, time.Millisecond
	cfg.Dial = dialer.dial
	calls := make(chan int32, 16)
	cfg.OnDisconnect = func(id int32) { calls <- id }
	// expect waits up to 10 s for want calls, then 200 ms for any more.
	expect := func(what string, want int) {
		t.Helper()
		got := 0
		for deadline := time.After(10 * time.Second); got < want; got++ {
			select {
			case <-calls:
			case <-deadline:
				t.Fatalf("%s: OnDisconnect called %d times in 10s, want %d", what, got, want)
			}
		}
		for quiet := time.After(200 * time.Millisecond); ; got++ {
			select {
			case <-calls:
				continue
			case <-quiet:
			}
			break
		}
		if got != want {
			t.Errorf("%s: OnDisconnect called %d times, want %d", what, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	b := NewBroker(7, addr, cfg)
	if _, err := b.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	expect("connected", 0)
	dialer.lose() // the connection is lost, and the broker is gone
	expect("connection lost", 1)
	if _, err := b.Connect(ctx); err == nil {
		t.Fatal("Connect to a refusing broker succeeded")
	}
	expect("dial failed", 1)
	b.Close()
	expect("closed", 0)

	dialer.accept()
	for _, end := range []func(*Broker){(*Broker).Close, (*Broker).Retire} {
		b := NewBroker(8, addr, cfg)
		if _, err := b.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		end(b)
		expect("closed or retired with a live connection", 0)
	}
}

// After a connection that was up dies, the reconnect backoff goes on
// doubling from there, as Java's ClusterConnectionStates.disconnected
// counts the loss as a failed attempt: reconnect.backoff.ms after the
// loss, twice that after the first failed re-dial, and so on. The setup
// timeout, whose count a loss resets, stays at its base for that dial.
func TestReconnectBackoffAfterLostConnection(t *testing.T) {
	kc := newCluster(t)
	addr := kc.ListenAddrs()[0]
	cfg := testConfig()
	cfg.ReconnectBackoff = 40 * time.Millisecond
	cfg.ReconnectBackoffMax = 10 * time.Second
	cfg.SetupTimeout, cfg.SetupTimeoutMax = time.Second, 8*time.Second
	var dialer lossyDialer
	cfg.Dial = dialer.dial
	b := NewBroker(1, addr, cfg)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := b.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dialer.lose()
	<-c.Done()
	until := b.BackoffUntil()
	if d := until.Sub(c.DiedAt()); !within(d, d, cfg.ReconnectBackoff, cfg.ReconnectBackoffMax) {
		t.Errorf("backoff after the loss: %v, want %v ±20%%", d, cfg.ReconnectBackoff)
	}
	for i := 1; i <= 3; i++ {
		time.Sleep(time.Until(until) + time.Millisecond)
		before := time.Now()
		if _, err := b.Connect(ctx); !errors.Is(err, kerr.ErrDial) {
			t.Fatalf("re-dial %d: err = %v, want ErrDial", i, err)
		}
		after := time.Now()
		until = b.BackoffUntil()
		want := cfg.ReconnectBackoff << i
		if lo, hi := until.Sub(after), until.Sub(before); !within(lo, hi, want, cfg.ReconnectBackoffMax) {
			t.Errorf("failed re-dial %d: backoff in [%v, %v], want %v ±20%% (Java: reconnect.backoff.ms × 2^%d)", i, lo, hi, want, i)
		}
	}
	dialer.mu.Lock()
	defer dialer.mu.Unlock()
	// Dial 0 connected; dial 1 is the first after the loss.
	for i, want := range []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second} {
		if got := dialer.timeouts[i]; !within(got, got+50*time.Millisecond, want, cfg.SetupTimeoutMax) {
			t.Errorf("dial %d: setup timeout %v, want %v ±20%%", i, got, want)
		}
	}
}
