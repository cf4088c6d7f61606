// Package broker is kprod's network layer for one broker: a Conn is one
// TCP connection after its setup (TLS handshake if configured, tls.go;
// ApiVersions; SASL authentication if configured, sasl.go), with a writer
// and a reader goroutine and a table of requests in flight; a Broker owns the
// (re)connection to one node, with reconnect backoff and a connection setup
// timeout that grows on repeated failures, as the Java client's
// ClusterConnectionStates does.
//
// This package knows nothing of metadata or producing: it moves kmsg
// requests and responses.
package broker

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/kprod/kprod/internal/sasl"
)

// Version is what kprod reports as ClientSoftwareVersion in ApiVersions.
const Version = "0.1.0"

// codeUnsupportedVersion is Kafka's UNSUPPORTED_VERSION error code.
const codeUnsupportedVersion = 35

// Config holds what a connection needs; the producer fills it from its
// own Config. Zero durations are not defaults: fill every field.
type Config struct {
	ClientID string

	SetupTimeout    time.Duration // socket.connection.setup.timeout.ms
	SetupTimeoutMax time.Duration // socket.connection.setup.timeout.max.ms
	RequestTimeout  time.Duration // request.timeout.ms
	MaxInFlight     int           // max.in.flight.requests.per.connection
	IdleTimeout     time.Duration // connections.max.idle.ms; <= 0 disables

	ReconnectBackoff    time.Duration // reconnect.backoff.ms
	ReconnectBackoffMax time.Duration // reconnect.backoff.max.ms

	// MaxVersions caps the version kprod uses for an API key, below
	// what kmsg implements (e.g. a request kprod does not build for the
	// newest version yet). Keys not present are capped only by kmsg.
	MaxVersions map[int16]int16

	// Dial opens the TCP connection; nil uses net.Dialer. With TLS set,
	// the connection it returns is wrapped in TLS.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// SendBuffer and ReceiveBuffer size the socket's SO_SNDBUF and
	// SO_RCVBUF (send.buffer.bytes, receive.buffer.bytes) when > 0;
	// otherwise the OS default stays. Applied when the connection Dial
	// returns is a *net.TCPConn (always, without a custom Dial).
	SendBuffer, ReceiveBuffer int

	// TLS, when not nil, secures every connection (security.protocol SSL
	// or SASL_SSL). Each connection uses a clone whose ServerName, when
	// empty, is the host of the broker's address, for the certificate
	// check. See tls.go.
	TLS *tls.Config

	// SASL, when not nil, authenticates every connection right after
	// ApiVersions (security.protocol SASL_PLAINTEXT or SASL_SSL), and
	// again before the session the broker grants ends (KIP-368). See
	// sasl.go.
	SASL sasl.Mechanism

	// OnStateChange is called (without locks held) when a connection to
	// a broker is established or a dial fails, so that a waiting sender
	// can look again. It must not block.
	OnStateChange func(nodeID int32)

	// OnDisconnect is called (without locks held) when a connection to a
	// broker is lost or a dial to it fails: not when the connection is
	// closed on purpose (Close, idle) or its Broker is closed. The
	// cluster asks for new metadata then, as Java's
	// handleServerDisconnect does: the broker may have gone, and its
	// partitions' leadership with it. It must not block.
	OnDisconnect func(nodeID int32)

	Logger *slog.Logger
}

// Defaults fills zero fields with the Java client's defaults; meant for
// tests and tools that build a Config by hand.
func (c *Config) Defaults() *Config {
	d := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	d(&c.SetupTimeout, 10*time.Second)
	d(&c.SetupTimeoutMax, 30*time.Second)
	d(&c.RequestTimeout, 30*time.Second)
	d(&c.IdleTimeout, 540*time.Second)
	d(&c.ReconnectBackoff, 50*time.Millisecond)
	d(&c.ReconnectBackoffMax, time.Second)
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 5
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c *Config) dial(ctx context.Context, addr string) (net.Conn, error) {
	var nc net.Conn
	var err error
	if c.Dial != nil {
		nc, err = c.Dial(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		// As Java's Selector.configureSocketChannel; a size the OS
		// refuses is left to the OS, as a hint should be.
		if c.SendBuffer > 0 {
			_ = tc.SetWriteBuffer(c.SendBuffer)
		}
		if c.ReceiveBuffer > 0 {
			_ = tc.SetReadBuffer(c.ReceiveBuffer)
		}
	}
	return nc, nil
}
