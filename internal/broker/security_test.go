package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/sasl"
	"github.com/kprod/kprod/internal/testpki"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scramCluster is a kfake cluster with SASL/SCRAM-SHA-256 sessions of
// reauthMs, a test connection config, and the mechanism to log in with.
func scramCluster(t *testing.T, reauthMs string) (*kfake.Cluster, *Config, sasl.Mechanism) {
	t.Helper()
	c := newCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "pw"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": reauthMs}))
	m, err := sasl.NewScram("SCRAM-SHA-256", "admin", "pw")
	if err != nil {
		t.Fatal(err)
	}
	return c, testConfig(), m
}

// TestReauthenticationInBand: kfake grants 1s sessions; a connection
// kept busy for 3.5s, with requests in flight whenever the writer stops
// to re-authenticate, re-authenticates in band and loses nothing.
func TestReauthenticationInBand(t *testing.T) {
	c, cfg, m := scramCluster(t, "1000")
	cfg.SASL = m
	conn := dialTest(t, c.ListenAddrs()[0], cfg)
	if conn.reauth.IsZero() {
		t.Fatal("no re-authentication scheduled for a 1s session")
	}
	deadline := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(deadline) {
		var wg sync.WaitGroup
		for range cfg.MaxInFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := conn.Do(ctx, metadataReq()); err != nil {
					t.Errorf("Metadata: %v", err)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := conn.Reauthentications(); n < 2 {
		t.Errorf("%d re-authentications in 3.5s of 1s sessions", n)
	}
	if conn.Dead() {
		t.Errorf("connection died: %v", conn.Err())
	}
}

// selfSigned returns a server certificate for names, signed by a fresh CA,
// and that CA's pool.
func selfSigned(t *testing.T, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	ca := testpki.NewCA(t, "test CA")
	der, key := ca.Issue(t, "broker", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, names...)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, ca.Pool()
}

// serve accepts connections on a loopback port and hands each to handle,
// until the test ends.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return l.Addr().String()
}

// TestTLSErrors: each way TLS goes wrong, against local servers, is a
// typed error within the setup timeout that says which case it is.
func TestTLSErrors(t *testing.T) {
	cert, pool := selfSigned(t, "127.0.0.1", "localhost")
	tlsServer := func(c net.Conn) {
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		_ = tc.Handshake()
		io.Copy(io.Discard, tc)
	}
	// Kafka's plaintext listener reads a ClientHello as a request size
	// over socket.request.max.bytes and closes the connection.
	plaintextServer := func(c net.Conn) {
		var b [4]byte
		_, _ = io.ReadFull(c, b[:])
	}
	// Kafka's TLS listener answers plaintext bytes with an alert
	// (unexpected_message) and closes.
	alertServer := func(c net.Conn) {
		var b [4]byte
		_, _ = io.ReadFull(c, b[:])
		_, _ = c.Write([]byte{21, 3, 3, 0, 2, 2, 10})
	}
	silentServer := func(c net.Conn) { io.Copy(io.Discard, c) }

	trusted := &tls.Config{RootCAs: pool}
	_, otherPool := selfSigned(t, "127.0.0.1")
	for _, tc := range []struct {
		name      string
		server    func(net.Conn)
		tls       *tls.Config
		dialAs    string // host to dial instead of 127.0.0.1
		retriable bool
		want      []string
	}{
		{"untrusted", tlsServer, &tls.Config{RootCAs: otherPool}, "", false, []string{"do not trust", `"CN=test CA"`, "ssl.truststore.location"}},
		{"hostname mismatch", tlsServer, trusted, "wrong.invalid", false, []string{`not for "wrong.invalid"`, "localhost, 127.0.0.1", "ssl.endpoint.identification.algorithm"}},
		{"tls to plaintext", plaintextServer, trusted, "", true, []string{"closed the connection during the TLS handshake", "is the listener plaintext?"}},
		{"tls to silent", silentServer, trusted, "", true, []string{"is the listener plaintext?"}},
		{"plaintext to tls", alertServer, nil, "", false, []string{"answered with a TLS record", "is the listener TLS?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, tc.server)
			cfg := testConfig()
			cfg.TLS = tc.tls
			if tc.dialAs != "" {
				real := addr
				cfg.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
					var d net.Dialer
					return d.DialContext(ctx, network, real)
				}
				_, port, _ := net.SplitHostPort(addr)
				addr = net.JoinHostPort(tc.dialAs, port)
			}
			const timeout = 500 * time.Millisecond
			start := time.Now()
			c, err := dialConn(context.Background(), 1, addr, cfg, timeout)
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			t.Logf("%v", err)
			if time.Since(start) > timeout+time.Second {
				t.Errorf("took %v with a setup timeout of %v", time.Since(start), timeout)
			}
			if !errors.Is(err, kerr.ErrTLS) {
				t.Errorf("not ErrTLS: %v", err)
			}
			if got := kerr.IsRetriable(err); got != tc.retriable {
				t.Errorf("IsRetriable = %v, want %v", got, tc.retriable)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
}

// flakyStart is a mechanism whose Start fails, as an unreachable token
// source does, on the calls listed in fail (1 is the first).
type flakyStart struct {
	sasl.Mechanism
	n    atomic.Int32
	fail map[int32]bool
}

func (f *flakyStart) Start(ctx context.Context) (sasl.Session, []byte, error) {
	if f.fail[f.n.Add(1)] {
		return nil, nil, &sasl.SourceError{Err: errors.New("identity provider unreachable")}
	}
	return f.Mechanism.Start(ctx)
}

// TestReauthenticationTokenSourceFails: a re-authentication whose token
// source fails keeps the connection and its session, and is tried again
// before the session ends (Java keeps its credential when a refresh
// fails); before, the connection was closed and what was queued failed.
func TestReauthenticationTokenSourceFails(t *testing.T) {
	c, cfg, m := scramCluster(t, "2000")
	flaky := &flakyStart{Mechanism: m, fail: map[int32]bool{2: true}} // the first re-authentication
	cfg.SASL = flaky
	conn := dialTest(t, c.ListenAddrs()[0], cfg)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := conn.Do(ctx, metadataReq())
		cancel()
		if err != nil {
			t.Fatalf("Metadata after %d Starts: %v", flaky.n.Load(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := conn.Reauthentications(); n < 1 || flaky.n.Load() < 3 {
		t.Errorf("%d re-authentications, %d Starts: the failed one was not tried again", n, flaky.n.Load())
	}
}

// slowStart is a mechanism whose token source answers only when its ctx
// ends, with the source's error, as a hung identity provider does.
type slowStart struct{ sasl.Mechanism }

func (slowStart) Start(ctx context.Context) (sasl.Session, []byte, error) {
	<-ctx.Done()
	return nil, nil, &sasl.SourceError{Err: ctx.Err()}
}

// A token source slower than the setup timeout is named in the error, not
// taken for a broker that did not answer.
func TestSetupTimeoutNamesTokenSource(t *testing.T) {
	c, cfg, m := scramCluster(t, "0")
	cfg.SASL = slowStart{m}
	_, err := dialConn(context.Background(), 0, c.ListenAddrs()[0], cfg, 300*time.Millisecond)
	var se *sasl.SourceError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "token source") {
		t.Fatalf("dial with a token source slower than the setup timeout: %v; want it to wrap *sasl.SourceError and name the token source", err)
	}
	if !errors.Is(err, kerr.ErrDial) || strings.Contains(err.Error(), "is the broker up") {
		t.Errorf("want ErrDial (tried again later), without blaming the broker: %v", err)
	}
}

// hangingReauth is a mechanism whose token source hangs, until its ctx
// ends, from its second call on: the first re-authentication.
type hangingReauth struct {
	sasl.Mechanism
	n       atomic.Int32
	hanging chan struct{}
}

func (h *hangingReauth) Start(ctx context.Context) (sasl.Session, []byte, error) {
	if h.n.Add(1) == 1 {
		return h.Mechanism.Start(ctx)
	}
	close(h.hanging)
	<-ctx.Done()
	return nil, nil, &sasl.SourceError{Err: ctx.Err()}
}

// Close does not wait request.timeout.ms for a token source that hangs in
// a re-authentication: the source's ctx ends with the connection.
func TestCloseStopsHangingReauthentication(t *testing.T) {
	c, cfg, m := scramCluster(t, "1000")
	h := &hangingReauth{Mechanism: m, hanging: make(chan struct{})}
	cfg.SASL = h
	cfg.RequestTimeout = 20 * time.Second
	conn := dialTest(t, c.ListenAddrs()[0], cfg)
	time.Sleep(time.Until(conn.reauth))
	go func() { _, _ = conn.Do(context.Background(), metadataReq()) }() // the write re-authenticates first
	select {
	case <-h.hanging:
	case <-time.After(10 * time.Second):
		t.Fatal("no re-authentication started")
	}
	start := time.Now()
	conn.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v behind a hanging token source (request.timeout.ms %v)", d, cfg.RequestTimeout)
	}
}

// A dial the broker refuses for its credentials counts twice toward the
// reconnect backoff, as in Java, where NetworkClient.processDisconnection
// calls both disconnected and authenticationFailed, each of which backs
// off once more: reconnect.backoff.ms × 2, then × 8.
func TestAuthenticationFailureBacksOffTwice(t *testing.T) {
	c, cfg, m := scramCluster(t, "0")
	// A broker answers a wrong password with SASL_AUTHENTICATION_FAILED
	// (kfake would just close the connection).
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		return resp, nil, true
	})
	cfg.SASL = m
	cfg.ReconnectBackoff, cfg.ReconnectBackoffMax = 25*time.Millisecond, 10*time.Second
	b := NewBroker(1, c.ListenAddrs()[0], cfg)
	defer b.Close()
	for i, n := range []int{1, 3, 5} {
		before := time.Now()
		_, err := b.Connect(context.Background())
		after := time.Now()
		if !errors.Is(err, kerr.ErrAuthentication) {
			t.Fatalf("dial %d: err = %v, want ErrAuthentication", i, err)
		}
		until := b.BackoffUntil()
		want := cfg.ReconnectBackoff << n
		if lo, hi := until.Sub(after), until.Sub(before); !within(lo, hi, want, cfg.ReconnectBackoffMax) {
			t.Errorf("authentication failure %d: backoff in [%v, %v], want %v ±20%%", i+1, lo, hi, want)
		}
		time.Sleep(time.Until(until) + time.Millisecond)
	}
}
