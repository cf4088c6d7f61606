package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/kprod/kprod/internal/sasl"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASL on a connection (KIP-152): after ApiVersions, SaslHandshake v1
// names the mechanism, then SaslAuthenticate requests carry the
// mechanism's messages until it is done. Both are ordinary Kafka requests
// with headers and correlation ids.
//
// Re-authentication (KIP-368): the last SaslAuthenticate response gives
// the session's lifetime (the broker's connections.max.reauth.ms, or less
// for a token that expires sooner); a broker closes a connection whose
// session ended at the next request it receives on it. kprod
// re-authenticates in band, on the same connection, as the Java client
// does: once 85-95% of the lifetime has passed (jittered so that the
// connections of many producers spread out), the writer goroutine, before
// it writes its next request, sends SaslHandshake and SaslAuthenticate
// and waits for their answers. Nothing else is written meanwhile: other
// requests wait in the write queue (within max.in.flight), and responses
// to requests written before keep arriving on the reader and complete as
// usual, since the broker answers in order. An idle connection is not
// re-authenticated until it has something to send, which a broker allows
// (it checks the session only when a request arrives, and accepts
// SaslHandshake after expiry).
//
// If re-authentication fails the connection is closed and what was in
// flight fails with ErrConnectionLost (retriable): the next connection
// attempt authenticates from scratch and reports a typed
// ErrAuthentication if the credentials are what failed.

// roundTrip sends one request and returns its response.
type roundTrip func(kmsg.Request) (kmsg.Response, error)

// authenticate runs one SASL exchange through rt and returns the session
// lifetime the broker granted (0: the session does not expire). I/O errors
// from rt are returned as they are; everything the broker or the
// mechanism refused wraps ErrAuthentication.
func (c *Conn) authenticate(ctx context.Context, rt roundTrip) (time.Duration, error) {
	m := c.cfg.SASL
	if v, ok := c.vers.get(kmsg.SASLHandshake.Int16()); !ok || v < 1 {
		return 0, fmt.Errorf("%w: the broker does not support SaslHandshake v1 (KIP-152, Kafka 1.0)", kerr.ErrUnsupportedVersion)
	}
	if _, ok := c.vers.get(kmsg.SASLAuthenticate.Int16()); !ok {
		return 0, fmt.Errorf("%w: the broker does not support SaslAuthenticate", kerr.ErrUnsupportedVersion)
	}
	who := "SASL " + m.Name()
	if p, ok := m.(sasl.Principal); ok {
		who += fmt.Sprintf(" as user %q", p.User())
	}

	// The first message (for OAUTHBEARER: a token from the user's source)
	// comes before the handshake, so that a token source that fails
	// leaves the connection as it was: on a re-authentication the
	// current session goes on, and the broker is not left waiting in the
	// middle of an exchange.
	sess, msg, err := m.Start(ctx)
	if err != nil {
		if se := (*sasl.SourceError)(nil); errors.As(err, &se) {
			return 0, transient{fmt.Errorf("%s: %w (tried again after reconnect.backoff.ms)", who, err)}
		}
		return 0, fmt.Errorf("%w: %s: %w", kerr.ErrAuthentication, who, err)
	}

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = m.Name()
	raw, err := rt(hs)
	if err != nil {
		return 0, err
	}
	hsResp := raw.(*kmsg.SASLHandshakeResponse)
	switch hsResp.ErrorCode {
	case 0:
	case kerr.UnsupportedSaslMechanism.Code:
		return 0, fmt.Errorf("%w: %w: the listener does not enable %s; it enables %s: set sasl.mechanism to one of those (or enable %s in the broker's sasl.enabled.mechanisms)",
			kerr.ErrAuthentication, kerr.UnsupportedSaslMechanism, m.Name(), strings.Join(hsResp.SupportedMechanisms, ", "), m.Name())
	case kerr.IllegalSaslState.Code:
		// Kafka answers SaslHandshake this way once the connection is
		// authenticated, which on a listener without SASL it is from the
		// start; on a re-authentication, when the broker does not allow
		// one yet (or at all).
		if c.reauth.IsZero() {
			return 0, fmt.Errorf("%w: %w: the listener does not use SASL (it is PLAINTEXT or SSL): set security.protocol to PLAINTEXT or SSL for it, or use the broker's SASL port",
				kerr.ErrAuthentication, kerr.IllegalSaslState)
		}
		return 0, fmt.Errorf("%w: %w: the broker refused to re-authenticate the connection (connections.max.reauth.ms is not set on its listener, or the last authentication was too recent); it is opened again",
			kerr.ErrAuthentication, kerr.IllegalSaslState)
	default:
		return 0, fmt.Errorf("%w: SaslHandshake for %s: %w", kerr.ErrAuthentication, m.Name(), kerr.ForCode(hsResp.ErrorCode))
	}

	for round := 0; ; round++ {
		if round > 16 {
			return 0, fmt.Errorf("%w: %s: the exchange did not end after %d rounds", kerr.ErrAuthentication, who, round)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = msg
		raw, err := rt(req)
		if err != nil {
			return 0, err
		}
		resp := raw.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return 0, authFailed(who, m, sess, resp)
		}
		done, next, err := sess.Next(resp.SASLAuthBytes)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %w", kerr.ErrAuthentication, who, err)
		}
		if done {
			return time.Duration(resp.SessionLifetimeMillis) * time.Millisecond, nil
		}
		msg = next
	}
}

// authFailed builds the error for a SaslAuthenticate error code, with the
// broker's message and what to check.
func authFailed(who string, m sasl.Mechanism, sess sasl.Session, resp *kmsg.SASLAuthenticateResponse) error {
	be, _ := kerr.ForCode(resp.ErrorCode).(*kerr.BrokerError)
	re := &kerr.ResponseError{Err: be, Broker: -1}
	if resp.ErrorMessage != nil {
		re.Message = *resp.ErrorMessage
	}
	var hint string
	switch m.Name() {
	case "OAUTHBEARER":
		hint = "check the token that Config.SASLOAuthTokenSource returns (expiry, audience, signature) against the broker's OAUTHBEARER validation"
	default:
		hint = "check the user name and password (sasl.jaas.config, or Config.SASLUsername and SASLPassword)"
		if strings.HasPrefix(m.Name(), "SCRAM-") {
			hint += ", and that the broker has " + m.Name() + " credentials for the user (kafka-configs --alter --add-config '" + m.Name() + "=[password=...]')"
		}
	}
	if d, ok := sess.(sasl.Describer); ok && d.Describe() != "" {
		hint = d.Describe() + "; " + hint
	}
	return fmt.Errorf("%w: %s: %w; %s", kerr.ErrAuthentication, who, re, hint)
}

// reauthAt is when to re-authenticate a session of the given lifetime
// that was granted at start: at 85-95% of it, as the Java client does
// (SaslClientAuthenticator). Zero if the session does not expire.
func reauthAt(start time.Time, lifetime time.Duration) time.Time {
	if lifetime <= 0 {
		return time.Time{}
	}
	return start.Add(time.Duration(float64(lifetime) * (0.85 + 0.1*rand.Float64())))
}

// reauthRetry is how soon a re-authentication whose token source failed
// is tried again (sooner when a quarter of what is left of the broker's
// session is less; not at all when that is under minReauthRetry).
const (
	reauthRetry    = time.Second
	minReauthRetry = 10 * time.Millisecond
)

// maybeReauthenticate runs on the writer goroutine before each write: if
// the session is due for re-authentication, it re-authenticates in band.
// It returns false if that failed; the connection is then closed.
func (c *Conn) maybeReauthenticate() bool {
	if c.reauth.IsZero() || time.Now().Before(c.reauth) {
		return true
	}
	start := time.Now()
	// The token source is the only thing here that does not time out by
	// itself (each request has request.timeout.ms). It is stopped too when
	// the connection is closed, which waits for this goroutine.
	ctx, cancel := context.WithTimeout(lifeCtx{c}, c.cfg.RequestTimeout)
	defer cancel()
	lifetime, err := c.authenticate(ctx, c.roundTripInline)
	if err != nil {
		if c.Dead() {
			return false // the connection died under us; its error says why
		}
		// (Not when the source did not answer in time: waiting for it
		// again would stall this connection's writes as long again.)
		if left := time.Until(c.sessionEnd); errors.As(err, new(transient)) && !errors.Is(err, context.DeadlineExceeded) && left > 4*minReauthRetry {
			// The token source failed before anything was sent (Java
			// keeps its current credential when a refresh fails): the
			// session goes on, and re-authentication is tried again
			// shortly, while the broker's session lasts.
			c.reauth = time.Now().Add(min(reauthRetry, left/4))
			c.cfg.Logger.Warn("SASL re-authentication postponed: the token source failed; the session goes on",
				"broker", c.nodeID, "addr", c.addr, "err", err, "session_ends", c.sessionEnd)
			return true
		}
		// %v, not %w: what was in flight is retried on a new connection,
		// whose own authentication reports a lasting failure typed.
		c.fail(fmt.Errorf("%w: broker %d (%s): SASL re-authentication (KIP-368) failed, closing the connection: %v",
			kerr.ErrConnectionLost, c.nodeID, c.addr, err))
		return false
	}
	c.reauth, c.sessionEnd = reauthAt(start, lifetime), start.Add(lifetime)
	c.reauths.Add(1)
	c.cfg.Logger.Debug("SASL re-authenticated", "broker", c.nodeID, "addr", c.addr,
		"mechanism", c.cfg.SASL.Name(), "session_lifetime", lifetime, "took", time.Since(start))
	return true
}

// lifeCtx is a context that ends when its connection dies.
type lifeCtx struct{ c *Conn }

func (lifeCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (l lifeCtx) Done() <-chan struct{}     { return l.c.done }
func (lifeCtx) Value(any) any               { return nil }
func (l lifeCtx) Err() error {
	select {
	case <-l.c.done:
		return context.Canceled
	default:
		return nil
	}
}

// roundTripInline sends one request from the writer goroutine through
// the in-flight table and waits for its response, while the reader keeps
// completing what was written before. It holds no in-flight slot: the
// writer is paused, so it cannot take more than the one it adds.
func (c *Conn) roundTripInline(req kmsg.Request) (kmsg.Response, error) {
	v, ok := c.vers.get(req.Key())
	if !ok {
		return nil, fmt.Errorf("%w: broker %d (%s) supports no version of %s", kerr.ErrUnsupportedVersion, c.nodeID, c.addr, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(v)
	type result struct {
		resp kmsg.Response
		err  error
	}
	ch := make(chan result, 1)
	p := &pending{req: req, internal: true, done: func(r kmsg.Response, err error) { ch <- result{r, err} }}
	// write completes p on every path: the response, its timeout, a
	// write error or the connection's death.
	c.write(p, nil)
	r := <-ch
	return r.resp, r.err
}

// syncRoundTrip sends one request on the raw connection during setup,
// before the reader and writer goroutines start.
func (c *Conn) syncRoundTrip(req kmsg.Request) (kmsg.Response, error) {
	v, ok := c.vers.get(req.Key())
	if !ok {
		return nil, fmt.Errorf("%w: broker %d (%s) supports no version of %s", kerr.ErrUnsupportedVersion, c.nodeID, c.addr, kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(v)
	body, err := c.roundTripSync(req)
	if err != nil {
		return nil, err
	}
	return decodeResponse(req, body)
}

// Reauthentications is how many times this connection re-authenticated
// (KIP-368), for tests.
func (c *Conn) Reauthentications() int64 { return c.reauths.Load() }
