package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is one node of the cluster as the client sees it: an address and
// at most one live connection, (re)dialed on demand. After a failed dial
// the node is not dialed again before reconnect.backoff.ms, growing
// exponentially to reconnect.backoff.max.ms with ±20% jitter; the setup
// timeout grows the same way from socket.connection.setup.timeout.ms to
// its max (KIP-601). A dial runs in a goroutine the Broker owns, so that
// the caller that asked for it (the sender) never blocks on the network.
type Broker struct {
	id   int32
	addr string
	cfg  *Config

	ctx    context.Context // ends dials when the Broker is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	conn     *Conn         // the live connection, or nil; guarded by mu
	prev     *Conn         // a dead connection not yet waited for, or nil; guarded by mu
	dialing  chan struct{} // closed when the dial under way ends; guarded by mu
	failures int           // consecutive dial failures (the setup timeout's count); guarded by mu
	// attempts counts the reconnect backoffs since the last successful
	// dial, as Java's failedAttempts: a lost connection counts too, so a
	// re-dial that fails after one waits twice reconnect.backoff.ms, while
	// the setup timeout (failures) starts from its base again. Guarded by
	// mu.
	attempts  int
	nextDial  time.Time // no dial before this; guarded by mu
	lastErr   error     // the last dial error; guarded by mu
	closed    bool      // guarded by mu
	closeErr  error     // what a request to the closed Broker fails with; guarded by mu
	connected int       // connections made so far, for tests; guarded by mu
}

// NewBroker returns a Broker for node id at addr. Nothing is dialed yet.
func NewBroker(id int32, addr string, cfg *Config) *Broker {
	ctx, cancel := context.WithCancel(context.Background())
	return &Broker{id: id, addr: addr, cfg: cfg, ctx: ctx, cancel: cancel}
}

// ID is the node id (negative for a bootstrap address).
func (b *Broker) ID() int32 { return b.id }

// Addr is the broker's host:port.
func (b *Broker) Addr() string { return b.addr }

// liveLocked returns the live connection, forgetting a dead one. After a
// connection dies, for whatever reason (error, request timeout, idle
// close), the node is not dialed again before reconnect.backoff.ms (with
// jitter) from its death, as the Java client's
// ClusterConnectionStates.disconnected does: a connection that died
// long ago (idle) is dialed again at once. The loss counts as an attempt
// (attempts), so a re-dial that fails then backs off twice as long.
//
// The dead connection's goroutines are ending on their own; it is kept in
// prev so that the next dial, or Close, waits for them: every goroutine
// the Broker started ends before Close returns.
func (b *Broker) liveLocked() *Conn {
	if b.conn != nil && b.conn.Dead() {
		b.prev = b.conn
		b.conn = nil
		b.nextDial = b.prev.DiedAt().Add(b.backoffLocked(b.attempts))
		b.attempts++
	}
	return b.conn
}

// Conn returns the live connection or nil.
func (b *Broker) Conn() *Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.liveLocked()
}

// InFlight is the number of requests in flight on the live connection.
func (b *Broker) InFlight() int {
	if c := b.Conn(); c != nil {
		return c.InFlight()
	}
	return 0
}

// MaxInFlight is how many requests a connection takes at once
// (max.in.flight.requests.per.connection).
func (b *Broker) MaxInFlight() int { return b.cfg.MaxInFlight }

// Connected reports whether there is a live connection.
func (b *Broker) Connected() bool { return b.Conn() != nil }

// Connections is how many connections this Broker has opened so far.
func (b *Broker) Connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.connected
}

// Ready reports whether a request could be sent right now: connected
// with a free in-flight slot. If not connected, it starts a dial unless
// one is under way or the node is backing off.
func (b *Broker) Ready() bool {
	b.mu.Lock()
	c := b.liveLocked()
	if c == nil {
		b.startDialLocked()
		b.mu.Unlock()
		return false
	}
	b.mu.Unlock()
	return c.InFlight() < cap(c.slots)
}

// BackoffUntil returns when the node may be dialed again (zero if now). A
// connection found dead here starts its backoff, as Connected does.
func (b *Broker) BackoffUntil() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.liveLocked()
	return b.nextDial
}

// LastError is the error of the last failed dial, if the node is backing
// off; nil otherwise.
func (b *Broker) LastError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == 0 {
		return nil
	}
	return b.lastErr
}

// TrySend sends req on the live connection without blocking; see
// Conn.TrySend. It returns false when not connected (starting a dial) or
// when the in-flight cap is reached.
func (b *Broker) TrySend(req kmsg.Request, noResponse bool, done func(kmsg.Response, error)) bool {
	b.mu.Lock()
	c := b.liveLocked()
	if c == nil {
		b.startDialLocked()
		b.mu.Unlock()
		return false
	}
	b.mu.Unlock()
	return c.TrySend(req, noResponse, done)
}

// Version is the negotiated version of key on the live connection.
func (b *Broker) Version(key int16) (int16, bool) {
	if c := b.Conn(); c != nil {
		return c.Version(key)
	}
	return 0, false
}

// Do sends req and waits for the response, connecting first if needed.
// A node that is backing off after failed dials fails at once with the
// last dial error, so that callers (metadata) move on to another broker.
func (b *Broker) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c, err := b.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return c.Do(ctx, req)
}

// DoNow is Do for a caller that has other brokers to ask (the metadata
// refresh, as Java's leastLoadedNode skips a node in reconnect backoff):
// a node backing off after a lost connection fails at once too, with
// ErrConnectionLost, instead of waiting out its backoff.
func (b *Broker) DoNow(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	c, err := b.connect(ctx, false)
	if err != nil {
		return nil, err
	}
	return c.Do(ctx, req)
}

// DoTracked is Do with Conn.DoTracked's channel for a request given up on.
func (b *Broker) DoTracked(ctx context.Context, req kmsg.Request) (kmsg.Response, <-chan Late, error) {
	c, err := b.Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c.DoTracked(ctx, req)
}

// Connect returns the live connection, dialing (or waiting for the dial
// under way) if there is none.
func (b *Broker) Connect(ctx context.Context) (*Conn, error) {
	return b.connect(ctx, true)
}

// connect is Connect; backoff says whether to wait out the backoff after
// a lost connection rather than fail.
func (b *Broker) connect(ctx context.Context, backoff bool) (*Conn, error) {
	for {
		b.mu.Lock()
		if b.closed {
			err := b.closeErr
			b.mu.Unlock()
			return nil, err
		}
		if c := b.liveLocked(); c != nil {
			b.mu.Unlock()
			return c, nil
		}
		if b.dialing == nil && time.Now().Before(b.nextDial) && b.lastErr != nil {
			err := fmt.Errorf("%w (backing off until %s)", b.lastErr, b.nextDial.Format(time.StampMilli))
			b.mu.Unlock()
			return nil, err
		}
		b.startDialLocked()
		wait := b.dialing
		b.mu.Unlock()
		if wait == nil {
			// Backing off after a lost connection: wait it out.
			until := b.BackoffUntil()
			if !backoff {
				return nil, fmt.Errorf("%w to broker %d (%s); reconnecting after %s (reconnect.backoff.ms)", kerr.ErrConnectionLost, b.id, b.addr, until.Format(time.StampMilli))
			}
			t := time.NewTimer(time.Until(until))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
			continue
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		b.mu.Lock()
		c, err := b.liveLocked(), b.lastErr
		b.mu.Unlock()
		if c != nil {
			return c, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// startDialLocked starts a dial in the background unless one is under
// way, the node is backing off, or the Broker is closed.
func (b *Broker) startDialLocked() {
	if b.dialing != nil || b.closed || time.Now().Before(b.nextDial) {
		return
	}
	done := make(chan struct{})
	b.dialing = done
	timeout := b.setupTimeoutLocked()
	prev := b.prev
	b.prev = nil
	b.wg.Add(1)
	live.Go()
	go func() {
		defer b.wg.Done()
		defer live.Done()
		if prev != nil {
			prev.Close() // dead already: only waits for its goroutines
		}
		c, err := dialConn(b.ctx, b.id, b.addr, b.cfg, timeout)
		b.mu.Lock()
		b.dialing = nil
		closed := b.closed
		var orphan *Conn
		if closed {
			// Closed or retired while dialing: say so, not what the
			// cancelled dial ran into. The new connection is closed
			// below, without b.mu: closing takes its locks and waits
			// for its goroutines.
			if err == nil {
				orphan = c
			}
			c, err = nil, b.closeErr
		}
		if err != nil {
			b.failures++
			b.lastErr = err
			if refused(err) {
				// Java's NetworkClient counts such a failure twice
				// (disconnected, then authenticationFailed): a broker
				// that refuses our credentials is asked again later.
				b.attempts++
			}
			b.nextDial = time.Now().Add(b.backoffLocked(b.attempts))
			b.attempts++
		} else {
			b.conn = c
			b.failures = 0
			b.attempts = 0
			b.lastErr = nil
			b.nextDial = time.Time{}
			b.connected++
		}
		closeErr := b.closeErr
		close(done)
		b.mu.Unlock()
		if orphan != nil {
			orphan.quiet.Store(true) // as in close: no OnDisconnect
			orphan.closeWith(closeErr)
		}
		if err != nil {
			b.cfg.Logger.Debug("dial failed", "broker", b.id, "addr", b.addr, "err", err)
			if b.cfg.OnDisconnect != nil && !closed && !errors.Is(err, kerr.ErrClosed) {
				b.cfg.OnDisconnect(b.id)
			}
		} else {
			b.cfg.Logger.Debug("connected", "broker", b.id, "addr", b.addr)
		}
		if b.cfg.OnStateChange != nil {
			b.cfg.OnStateChange(b.id)
		}
	}()
}

// refused reports a dial that reached the broker and was refused for our
// credentials or our TLS (Java's AUTHENTICATION_FAILED state, which TLS
// handshake failures reach too), as opposed to one that did not reach it
// (ErrDial).
func refused(err error) bool {
	return (errors.Is(err, kerr.ErrAuthentication) || errors.Is(err, kerr.ErrTLS)) && !errors.Is(err, kerr.ErrDial)
}

// backoffLocked is reconnect.backoff.ms × 2^n, ±20%, at most the max.
func (b *Broker) backoffLocked(n int) time.Duration {
	return Backoff(b.cfg.ReconnectBackoff, b.cfg.ReconnectBackoffMax, n)
}

func (b *Broker) setupTimeoutLocked() time.Duration {
	return Backoff(b.cfg.SetupTimeout, b.cfg.SetupTimeoutMax, b.failures)
}

// Close closes the connection (failing what is in flight on it with
// ErrConnectionLost wrapping ErrClosed), stops a dial under way, and waits
// for every goroutine the Broker started.
func (b *Broker) Close() {
	b.close(fmt.Errorf("%w to broker %d (%s): %w", kerr.ErrConnectionLost, b.id, b.addr, kerr.ErrClosed))
}

// Retire closes the Broker as Close does, for a node that left the
// cluster metadata while the producer goes on: a request that still
// reaches it fails with a retriable ErrConnectionLost that says so, not
// with ErrClosed ("producer is closed").
func (b *Broker) Retire() {
	b.close(fmt.Errorf("%w to broker %d (%s): the producer stopped using it (the broker left the cluster metadata or moved, or it was a bootstrap address)", kerr.ErrConnectionLost, b.id, b.addr))
}

func (b *Broker) close(err error) {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.closeErr = err
	}
	err = b.closeErr
	c, prev := b.conn, b.prev
	b.conn, b.prev = nil, nil
	b.mu.Unlock()
	b.cancel()
	if c != nil {
		c.quiet.Store(true) // closed on purpose: no OnDisconnect
		c.closeWith(err)
	}
	if prev != nil {
		prev.Close() // dead already: only waits for its goroutines
	}
	b.wg.Wait()
}

// Exponential returns base × 2^n, capped at maxD.
func Exponential(base, maxD time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 0; i < n && d < maxD; i++ {
		if d > maxD/2 {
			d = maxD // doubling would pass the max, or overflow near MaxInt64
			break
		}
		d *= 2
	}
	return min(d, max(maxD, base))
}

// Backoff is the Java client's ExponentialBackoff with multiplier 2 and
// jitter 0.2 (reconnect.backoff, retry.backoff, connection setup timeout):
// base × 2^n, spread by ±20%, and never above maxD, which is a hard limit
// as the property names promise (the jitter applies below it). A maxD
// not above base disables growth and jitter, as in Java.
func Backoff(base, maxD time.Duration, n int) time.Duration {
	if maxD <= base {
		return base
	}
	return min(Jitter(Exponential(base, maxD, n)), maxD)
}

// Jitter spreads d by ±20%, as the Java client's ExponentialBackoff does,
// so that many clients do not retry in lockstep.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	f := 0.8 + 0.4*rand.Float64()
	if j := float64(d) * f; j < math.MaxInt64 {
		return time.Duration(j)
	}
	return math.MaxInt64 // a Long.MAX_VALUE max: forever, not a negative wait
}
