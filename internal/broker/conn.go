package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/internal/sasl"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponseSize bounds what a broker may announce as a response size, so
// a garbage length (for example a TLS alert read as plaintext) fails the
// connection instead of allocating gigabytes.
const maxResponseSize = 256 << 20

// readBufferSize is the read buffer of a connection: many produce
// responses fit, and larger responses are read past it directly.
const readBufferSize = 16 << 10

// Conn is one TCP connection to one broker, after the ApiVersions
// handshake. Requests are written by a writer goroutine and responses read
// by a reader goroutine, so that writes and reads proceed at the same time
// and no lock is held across I/O. Both goroutines end when the connection
// dies (error, request timeout, idle close or Close).
type Conn struct {
	cfg    *Config
	nodeID int32
	addr   string
	nc     net.Conn
	rd     *bufio.Reader // reads nc; made by the first readResponse
	vers   versions
	format *kmsg.RequestFormatter

	// slots is the in-flight semaphore: a request holds a slot from the
	// moment it is accepted until its done callback runs, so at most
	// MaxInFlight requests are queued or outstanding.
	slots   chan struct{}
	writeCh chan *pending

	mu       sync.Mutex
	inflight map[int32]*pending // by correlation id; guarded by mu
	dead     bool               // guarded by mu
	// quiet: closed on purpose by its Broker (Close, Retire), so its death
	// is not reported to Config.OnDisconnect.
	quiet  atomic.Bool
	err    error     // why the connection died; guarded by mu
	diedAt time.Time // when it died; guarded by mu

	corr     int32        // next correlation id; writer goroutine only
	refs     []Ref        // a VectoredRequest's byte fields by reference; writer goroutine only
	vecs     net.Buffers  // the slices of a vectored write; writer goroutine only
	wvecs    net.Buffers  // what net.Buffers.WriteTo consumes; writer goroutine only
	lastUsed atomic.Int64 // unix nanos of the last request or response
	done     chan struct{}
	// failed is closed once kill has failed the requests that were on
	// the wire: the writer fails those still waiting to be written (newer)
	// only after them, so that they fail in the order they were sent.
	failed chan struct{}
	// answering is held by the reader from taking a response's request
	// out of the in-flight map until it has completed it, and by kill
	// while it fails the requests on the wire: a response taken just
	// before the connection died completes before the older-first
	// failures of the requests sent after it.
	answering sync.Mutex
	wg        sync.WaitGroup // the writer and the reader
	// timers counts the request timers whose timeout is running: one is
	// added under mu while its request is in flight, so before kill
	// empties the map, and closeWith waits for them too.
	timers sync.WaitGroup

	tls    bool      // nc is TLS; set during setup
	reauth time.Time // when to re-authenticate (KIP-368), zero: never; writer goroutine only after setup
	// sessionEnd is when the broker's SASL session ends (start + the
	// lifetime it granted); like reauth, the writer's after setup.
	sessionEnd time.Time
	reauths    atomic.Int64 // re-authentications done, for tests
	answered   atomic.Bool  // a response came after setup, for the hint in lostErr
}

// pending is one request from acceptance to completion. Whoever removes it
// from the write queue or the in-flight map completes it, exactly once.
type pending struct {
	req    kmsg.Request
	noResp bool  // acks=0 produce: complete once written
	err    error // set at enqueue: fail instead of writing (no version in common)
	done   func(kmsg.Response, error)
	timer  *time.Timer
	// internal: sent by the writer itself (SASL re-authentication),
	// holding no in-flight slot.
	internal bool
}

// dialConn connects to addr and sets the connection up: TLS handshake if
// configured, ApiVersions, SASL authentication if configured, all within
// setupTimeout (socket.connection.setup.timeout.ms).
func dialConn(ctx context.Context, nodeID int32, addr string, cfg *Config, setupTimeout time.Duration) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	nc, err := cfg.dial(ctx, addr)
	if err != nil {
		return nil, dialError(nodeID, addr, setupTimeout, err)
	}
	c := &Conn{
		cfg:      cfg,
		nodeID:   nodeID,
		addr:     addr,
		nc:       nc,
		format:   kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		slots:    make(chan struct{}, cfg.MaxInFlight),
		writeCh:  make(chan *pending, cfg.MaxInFlight),
		inflight: make(map[int32]*pending, cfg.MaxInFlight),
		done:     make(chan struct{}),
		failed:   make(chan struct{}),
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	phase, err := c.setup(ctx)
	if !stop() || err != nil {
		c.nc.Close()
		return nil, c.setupError(ctx, phase, setupTimeout, err)
	}
	_ = c.nc.SetDeadline(time.Time{})
	c.lastUsed.Store(time.Now().UnixNano())
	c.wg.Add(2)
	live.Go()
	go c.writeLoop()
	live.Go()
	go c.readLoop()
	return c, nil
}

func dialError(nodeID int32, addr string, timeout time.Duration, err error) error {
	return fmt.Errorf("%w %d at %s (setup timeout %v): %w; is the broker up and is this its advertised listener?",
		kerr.ErrDial, nodeID, addr, timeout.Round(time.Millisecond), err)
}

// setup runs the steps after dialing, on the raw connection, and returns
// the one under way when it failed, for the error.
func (c *Conn) setup(ctx context.Context) (phase string, err error) {
	if c.cfg.TLS != nil {
		if err := c.startTLS(ctx); err != nil {
			return "TLS handshake", err
		}
	}
	if err := c.handshake(); err != nil {
		return "ApiVersions handshake", err
	}
	if c.cfg.SASL != nil {
		start := time.Now()
		lifetime, err := c.authenticate(ctx, c.syncRoundTrip)
		if err != nil {
			return "SASL authentication", err
		}
		c.reauth, c.sessionEnd = reauthAt(start, lifetime), start.Add(lifetime)
		c.cfg.Logger.Debug("SASL authenticated", "broker", c.nodeID, "addr", c.addr,
			"mechanism", c.cfg.SASL.Name(), "session_lifetime", lifetime)
	}
	return "", nil
}

// setupError explains why setup failed. Authentication and TLS failures
// that trying again cannot fix are returned without ErrDial, so that they
// are not retried (kerr.IsRetriable); everything else is ErrDial.
func (c *Conn) setupError(ctx context.Context, phase string, timeout time.Duration, err error) error {
	// A token source that outlasted the setup timeout is named as such,
	// not as a broker that did not answer.
	var source *sasl.SourceError
	if (err == nil || ctx.Err() != nil) && !errors.As(err, &source) {
		switch {
		case phase == "TLS handshake":
			err = transient{fmt.Errorf("%w: no answer to the TLS handshake within the setup timeout: %s", kerr.ErrTLS, hintPlaintextListener)}
		case phase == "ApiVersions handshake" && !c.tls:
			err = fmt.Errorf("no answer to ApiVersions within the setup timeout (if this persists: %s) (%w)", hintTLSListener, ctx.Err())
		default:
			err = fmt.Errorf("no answer within the setup timeout (%w)", ctx.Err())
		}
	} else if c.tls && isRemoteAlert(err) {
		// TLS 1.3: the broker's verdict on our certificate comes after
		// the handshake, on the first read.
		err = alertError(err)
	} else if phase == "ApiVersions handshake" && !c.tls && isClosed(err) {
		err = fmt.Errorf("the broker closed the connection before answering ApiVersions (%w) (if this persists: %s)", err, hintTLSListener)
	} else if phase == "SASL authentication" && isClosed(err) {
		err = fmt.Errorf("the broker closed the connection during SASL authentication (%w); see the broker's log", err)
	}
	var tr transient
	switch {
	case errors.As(err, &tr):
		return fmt.Errorf("%w %d at %s (setup timeout %v): %s: %w", kerr.ErrDial, c.nodeID, c.addr, timeout.Round(time.Millisecond), phase, err)
	case errors.Is(err, kerr.ErrAuthentication), errors.Is(err, kerr.ErrTLS):
		return fmt.Errorf("broker %d at %s: %s: %w", c.nodeID, c.addr, phase, err)
	case phase != "ApiVersions handshake":
		err = fmt.Errorf("%s: %w", phase, err)
	}
	return dialError(c.nodeID, c.addr, timeout, err)
}

// handshake sends ApiVersions before anything else, synchronously. A broker
// that does not know our ApiVersions version answers UNSUPPORTED_VERSION in
// the v0 layout and lists the versions it does know; we retry with its max.
func (c *Conn) handshake() error {
	version := (&kmsg.ApiVersionsRequest{}).MaxVersion()
	for attempt := 0; attempt < 3; attempt++ {
		// NewPtr, not a literal: Default sets NodeID to -1. v5 (KIP-1242)
		// names the cluster and node the client expects; a zero NodeID
		// without a ClusterID is INVALID_REQUEST, and -1 means "not known
		// yet", which is what we send.
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = version
		req.ClientSoftwareName = "kprod"
		req.ClientSoftwareVersion = Version
		body, err := c.roundTripSync(req)
		if err != nil {
			return err
		}
		resp := &kmsg.ApiVersionsResponse{Version: version}
		decodeErr := resp.ReadFrom(body)
		if decodeErr != nil || resp.ErrorCode == codeUnsupportedVersion {
			// The broker answers an unknown version in the v0 layout.
			v0 := &kmsg.ApiVersionsResponse{Version: 0}
			if err := v0.ReadFrom(body); err != nil {
				return fmt.Errorf("cannot decode ApiVersions response: %w", errors.Join(decodeErr, err))
			}
			if v0.ErrorCode != codeUnsupportedVersion {
				return fmt.Errorf("cannot decode ApiVersions v%d response: %w", version, decodeErr)
			}
			next := int16(-1)
			for _, k := range v0.ApiKeys {
				if k.ApiKey == req.Key() {
					next = min(k.MaxVersion, version-1)
				}
			}
			if next < 0 {
				next = 0
			}
			c.cfg.Logger.Debug("broker rejected our ApiVersions version; retrying",
				"broker", c.nodeID, "addr", c.addr, "version", version, "retry_version", next)
			version = next
			continue
		}
		if err := kerr.ForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("ApiVersions failed: %w", err)
		}
		c.vers = negotiate(resp, c.cfg.MaxVersions)
		return nil
	}
	return fmt.Errorf("%w: ApiVersions kept failing with UNSUPPORTED_VERSION", kerr.ErrUnsupportedVersion)
}

// roundTripSync writes one request and reads its response on the raw
// connection; only used before the reader and writer goroutines start.
func (c *Conn) roundTripSync(req kmsg.Request) ([]byte, error) {
	c.corr++
	buf := c.format.AppendRequest(nil, req, c.corr)
	if _, err := c.nc.Write(buf); err != nil {
		return nil, err
	}
	corr, body, err := c.readResponse()
	if err != nil {
		return nil, err
	}
	if corr != c.corr {
		return nil, fmt.Errorf("response correlation id %d does not match request %d", corr, c.corr)
	}
	return body, nil
}

func (c *Conn) readResponse() (int32, []byte, error) {
	if c.rd == nil {
		// Made at the first read, after a TLS handshake replaced nc.
		// Buffered: a response's size and body, and often the next
		// responses too, come in one read call instead of two each.
		c.rd = bufio.NewReaderSize(c.nc, readBufferSize)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c.rd, hdr[:4]); err != nil {
		return 0, nil, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > maxResponseSize {
		if !c.tls && looksLikeTLS(hdr[:4]) {
			return 0, nil, fmt.Errorf("%w: the broker answered with a TLS record (% x...): %s", kerr.ErrTLS, hdr[:4], hintTLSListener)
		}
		return 0, nil, fmt.Errorf("broker sent a response size of %d bytes, which is not a Kafka response (is the listener TLS or SASL?)", size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(c.rd, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf[:4])), buf[4:], nil
}

// NodeID is the broker's node id (negative for a bootstrap address).
func (c *Conn) NodeID() int32 { return c.nodeID }

// Addr is the host:port this connection was dialed to.
func (c *Conn) Addr() string { return c.addr }

// Version returns the version negotiated for an API key: the highest both
// the broker and kprod support. ok is false if there is none.
func (c *Conn) Version(key int16) (v int16, ok bool) { return c.vers.get(key) }

// InFlight is the number of requests accepted and not yet completed.
func (c *Conn) InFlight() int { return len(c.slots) }

// Done is closed when the connection is dead.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection died, or nil while it is alive.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// DiedAt is when the connection died (zero while it lives).
func (c *Conn) DiedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.diedAt
}

// Dead reports whether the connection is closed.
func (c *Conn) Dead() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Do sends req and waits for its response, for an in-flight slot, or for
// ctx. A ctx that ends after the request was written does not cancel it on
// the wire (Kafka has no cancel); the response is then discarded.
func (c *Conn) Do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	resp, _, err := c.DoTracked(ctx, req)
	return resp, err
}

// Late is the outcome of a request that DoTracked gave up on: its
// response, or the error that ended it.
type Late struct {
	Resp kmsg.Response
	Err  error
}

// DoTracked is Do that also says how a request it gave up on ended: if
// ctx ended after req was handed to the connection, it returns ctx's
// error and a channel that yields, once, the request's response or the
// error that ended it (a timeout, its connection failing; within
// request.timeout.ms). A caller whose next request must not overtake this
// one waits for it first; one that retries the request may take its
// answer instead (as Java's retried commit awaits the first one's).
func (c *Conn) DoTracked(ctx context.Context, req kmsg.Request) (resp kmsg.Response, late <-chan Late, err error) {
	select {
	case c.slots <- struct{}{}:
	case <-c.done:
		return nil, nil, c.deadErr()
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	ch := make(chan Late, 1)
	if err := c.enqueue(req, false, func(r kmsg.Response, err error) { ch <- Late{r, err} }); err != nil {
		return nil, nil, err
	}
	select {
	case r := <-ch:
		return r.Resp, nil, r.Err
	case <-ctx.Done():
		return nil, ch, ctx.Err()
	}
}

// TrySend queues req without blocking. It returns false, and never calls
// done, when the in-flight cap is reached or the connection is dead.
// Otherwise done is called exactly once, from one of the connection's
// goroutines, never from TrySend itself (so the caller may hold a lock
// that done takes; done must not block): with the response, or with the
// error that ended the request (ErrUnsupportedVersion if the broker
// supports no version of it that kprod implements). With noResponse (a
// produce with acks=0) done is called with a nil response once the
// request is written.
func (c *Conn) TrySend(req kmsg.Request, noResponse bool, done func(kmsg.Response, error)) bool {
	if c.Dead() {
		return false
	}
	select {
	case c.slots <- struct{}{}:
	default:
		return false
	}
	return c.enqueue(req, noResponse, done) == nil
}

// enqueue hands a request that holds a slot to the writer, or releases the
// slot and returns why not if the connection is dead; done is then not
// called. The push is under mu so that it cannot race past close: the
// writer drains the queue after close marked the connection dead, and
// every push happened before. A request the broker has no version for is
// handed over too, already failed, so that its done runs on the writer
// like every other completion.
func (c *Conn) enqueue(req kmsg.Request, noResp bool, done func(kmsg.Response, error)) error {
	p := &pending{req: req, noResp: noResp, done: done}
	if v, ok := c.vers.get(req.Key()); ok {
		req.SetVersion(v)
		if mv, ok := req.(MinVersioned); ok {
			if least, why := mv.MinVersion(); req.GetVersion() < least {
				p.err = fmt.Errorf("%w: broker %d (%s) supports %s (key %d) up to v%d, and %s",
					kerr.ErrUnsupportedVersion, c.nodeID, c.addr, kmsg.NameForKey(req.Key()), req.Key(), req.GetVersion(), why)
			}
		}
	} else {
		p.err = fmt.Errorf("%w: broker %d (%s) supports no version of %s (key %d) that kprod implements",
			kerr.ErrUnsupportedVersion, c.nodeID, c.addr, kmsg.NameForKey(req.Key()), req.Key())
	}
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		<-c.slots
		return c.deadErr()
	}
	c.writeCh <- p // never blocks: capacity equals the slot count
	c.mu.Unlock()
	return nil
}

// complete releases p's slot and calls its callback.
func (c *Conn) complete(p *pending, resp kmsg.Response, err error) {
	if p.timer != nil {
		p.timer.Stop()
	}
	if !p.internal {
		<-c.slots
	}
	c.lastUsed.Store(time.Now().UnixNano())
	p.done(resp, err)
}

func (c *Conn) deadErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: connection to broker %d (%s) is closed", kerr.ErrConnectionLost, c.nodeID, c.addr)
}

// Close closes the connection, fails every request in flight on it with
// ErrConnectionLost (wrapping ErrClosed), and waits for its goroutines.
func (c *Conn) Close() {
	c.closeWith(fmt.Errorf("%w to broker %d (%s): %w", kerr.ErrConnectionLost, c.nodeID, c.addr, kerr.ErrClosed))
}

// closeWith is Close with the error the requests in flight fail with.
func (c *Conn) closeWith(err error) {
	c.fail(err)
	c.wg.Wait()
	c.timers.Wait()
}

// fail kills the connection once: every request in flight fails with err
// (exactly once, because it is taken out of the map here under mu).
func (c *Conn) fail(err error) { c.failWith(err, -1, nil) }

// failWith is fail, with the request of correlation id corr (if still in
// flight) failing with its own error, cause, in its place in the order.
func (c *Conn) failWith(err error, corr int32, cause error) { c.kill(err, corr, cause, false) }

// kill is failWith; with onlyIdle it kills the connection only if no
// request holds a slot, and reports whether it did. The check is under
// mu, which enqueue takes: a request accepted (its slot taken) before it
// is not failed unwritten, and one accepted after finds the connection
// dead and is refused, so that the sender keeps its batches unsent.
func (c *Conn) kill(err error, corr int32, cause error, onlyIdle bool) bool {
	c.mu.Lock()
	if c.dead || (onlyIdle && len(c.slots) > 0) {
		c.mu.Unlock()
		return false
	}
	c.dead = true
	c.err = err
	c.diedAt = time.Now()
	taken := c.inflight
	c.inflight = nil
	close(c.done)
	c.mu.Unlock()
	c.nc.Close()
	// Oldest first (the map has no order), so that what the requests
	// carry fails in the order it was sent, and after a response being
	// completed.
	c.answering.Lock()
	for _, id := range slices.Sorted(maps.Keys(taken)) {
		e := err
		if id == corr && cause != nil {
			e = cause
		}
		c.complete(taken[id], nil, e)
	}
	c.answering.Unlock()
	close(c.failed)
	if !onlyIdle && !c.quiet.Load() && c.cfg.OnDisconnect != nil && !errors.Is(err, kerr.ErrClosed) {
		c.cfg.OnDisconnect(c.nodeID)
	}
	return true
}

func (c *Conn) lostErr(op string, err error) error {
	return fmt.Errorf("%w: broker %d (%s): %s: %w", kerr.ErrConnectionLost, c.nodeID, c.addr, op, err)
}

func (c *Conn) writeLoop() {
	defer c.wg.Done()
	defer live.Done()
	var idle *time.Timer
	var idleC <-chan time.Time
	if c.cfg.IdleTimeout > 0 {
		idle = time.NewTimer(c.cfg.IdleTimeout)
		defer idle.Stop()
		idleC = idle.C
	}
	var buf []byte
	for {
		select {
		case p := <-c.writeCh:
			if c.cfg.SASL != nil && p.err == nil {
				c.maybeReauthenticate() // on failure the connection is dead: write fails p
			}
			buf = c.write(p, buf[:0])
		case <-idleC:
			since := time.Since(time.Unix(0, c.lastUsed.Load()))
			if c.InFlight() == 0 && since >= c.cfg.IdleTimeout &&
				c.kill(fmt.Errorf("%w: connection to broker %d (%s) closed after %v idle (connections.max.idle.ms)",
					kerr.ErrConnectionLost, c.nodeID, c.addr, c.cfg.IdleTimeout), -1, nil, true) {
				c.cfg.Logger.Debug("closed idle connection", "broker", c.nodeID, "addr", c.addr, "idle", since)
				continue
			}
			// Not idle: look again when it could be. With requests in
			// flight that is a full IdleTimeout away at the earliest
			// (their completion counts as use); rearming for the
			// remainder, which is <= 0 for a request outstanding longer
			// than the idle time, would spin every millisecond.
			next := c.cfg.IdleTimeout - since
			if c.InFlight() > 0 || next <= 0 {
				next = c.cfg.IdleTimeout
			}
			idle.Reset(next)
		case <-c.done:
			<-c.failed // after the requests that were on the wire
			for {
				select {
				case p := <-c.writeCh:
					err := p.err
					if err == nil {
						err = c.deadErr()
					}
					c.complete(p, nil, err)
				default:
					return
				}
			}
		}
	}
}

// write encodes and writes one request. It is registered as in flight
// before the write so that a fast response always finds it. A
// VectoredRequest on a plain TCP connection goes out with one writev, its
// large byte fields from their own memory (vectored.go); anything else is
// encoded whole into buf.
func (c *Conn) write(p *pending, buf []byte) []byte {
	if p.err != nil {
		c.complete(p, nil, p.err)
		return buf
	}
	c.corr++
	corr := c.corr
	tc, _ := c.nc.(*net.TCPConn) // not TLS, not a custom Dial's wrapper
	vr, vectored := p.req.(VectoredRequest)
	vectored = vectored && tc != nil
	if vectored {
		buf, c.refs = c.appendVectored(buf, vr, corr, c.refs[:0])
	} else {
		buf = c.format.AppendRequest(buf, p.req, corr)
	}
	c.lastUsed.Store(time.Now().UnixNano())

	c.mu.Lock()
	if c.dead {
		err := c.err
		c.mu.Unlock()
		clear(c.refs)
		<-c.failed // after the requests that were on the wire
		c.complete(p, nil, err)
		return buf
	}
	if !p.noResp {
		c.inflight[corr] = p
		p.timer = time.AfterFunc(c.cfg.RequestTimeout, func() { c.timeout(corr) })
	}
	c.mu.Unlock()

	_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.RequestTimeout))
	var err error
	if vectored {
		err = c.writeVectored(tc, buf, c.refs)
		clear(c.refs) // do not keep the batches' memory alive
	} else {
		_, err = c.nc.Write(buf)
	}
	if err != nil {
		err = c.lostErr("write", err)
		if p.noResp {
			c.complete(p, nil, err)
		}
		c.fail(err)
		return buf
	}
	if p.noResp {
		c.complete(p, nil, nil)
	}
	return buf
}

// testHookTimerFired, if set (by tests only), runs in timeout once a
// timer has found its request still in flight.
var testHookTimerFired func()

// timeout fails the request with ErrRequestTimeout and closes the
// connection, failing the others in flight on it, as the Java client does:
// a broker that does not answer one request within request.timeout.ms is
// not trusted with the rest.
func (c *Conn) timeout(corr int32) {
	c.mu.Lock()
	p, ok := c.inflight[corr]
	if ok {
		c.timers.Add(1) // the map is not empty: kill, and so Close's wait, come after
		live.Go()
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	defer c.timers.Done()
	defer live.Done()
	if testHookTimerFired != nil {
		testHookTimerFired()
	}
	err := fmt.Errorf("%w: %s (key %d) to broker %d (%s) got no response within %v; the connection was closed",
		kerr.ErrRequestTimeout, kmsg.NameForKey(p.req.Key()), p.req.Key(), c.nodeID, c.addr, c.cfg.RequestTimeout)
	c.cfg.Logger.Debug("request timed out", "broker", c.nodeID, "addr", c.addr, "key", p.req.Key())
	// The timed-out request fails in its place among the others, oldest
	// first, so that what they carry fails in the order it was sent (two
	// timers firing together: the first fails them all). failWith closes
	// before it answers: closing waits for a write in progress, so once
	// done runs nothing still reads a request's memory (a produce
	// request's batches, which the sender may then reuse).
	c.failWith(fmt.Errorf("%w: another request on the connection timed out: %w", kerr.ErrConnectionLost, err), corr, err)
}

func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer live.Done()
	for {
		corr, body, err := c.readResponse()
		if err != nil {
			if !c.answered.Load() && c.cfg.SASL == nil && isClosed(err) {
				// A SASL listener takes ApiVersions from anyone, then
				// closes the connection at the first other request.
				err = fmt.Errorf("%w (the broker closed the connection at the first request after ApiVersions; if the listener uses SASL, set security.protocol to SASL_PLAINTEXT or SASL_SSL and sasl.mechanism)", err)
			}
			c.fail(c.lostErr("read", err))
			return
		}
		c.answered.Store(true)
		c.mu.Lock()
		p, ok := c.inflight[corr]
		c.mu.Unlock()
		if !ok {
			// Either the request already timed out (then the connection
			// is being closed) or the broker answered something we did
			// not ask: either way this connection cannot be trusted.
			c.fail(c.lostErr("read", fmt.Errorf("response with unknown correlation id %d", corr)))
			return
		}
		resp, err := decodeResponse(p.req, body)
		if err != nil {
			// The broker answered something kprod cannot read: the
			// connection cannot be trusted any more. As for a lost
			// connection, the request fails retriably (the broker may
			// have acted on it), and so does everything else in flight,
			// oldest first as always. Failed before it completes, as a
			// request timeout does: a request sent once this one
			// completes must not go out on it.
			what := fmt.Sprintf("cannot decode its %s v%d response (%v)", kmsg.NameForKey(p.req.Key()), p.req.GetVersion(), err)
			c.cfg.Logger.Warn("closing a connection: the broker's response could not be decoded", "broker", c.nodeID, "addr", c.addr, "err", what)
			c.failWith(c.lostErr("read", errors.New(what)), corr, c.lostErr("read", fmt.Errorf("%s; the request may have been acted on", what)))
			return
		}
		c.answering.Lock()
		c.mu.Lock()
		_, ok = c.inflight[corr]
		delete(c.inflight, corr)
		c.mu.Unlock()
		if !ok {
			c.answering.Unlock()
			return // failed meanwhile (its timeout) with the connection
		}
		c.complete(p, resp, nil)
		c.answering.Unlock()
	}
}

func decodeResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	// Flexible responses carry tagged fields in their header, except
	// ApiVersions, whose response header is never flexible (KIP-511).
	if req.IsFlexible() && req.Key() != 18 {
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, err
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, errors.New("bad tagged field count in response header")
	}
	b = b[l:]
	for i := uint64(0); i < n; i++ {
		if _, l = binary.Uvarint(b); l <= 0 {
			return nil, errors.New("bad tag in response header")
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || uint64(len(b)-l) < size {
			return nil, errors.New("bad tag size in response header")
		}
		b = b[l+int(size):]
	}
	return b, nil
}
