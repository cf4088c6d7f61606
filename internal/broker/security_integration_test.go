package broker

// Security against the real cluster's secured listeners
// (KPROD_KAFKA_SECURITY=1 bash scripts/kafka-cluster.sh up; scripts/test.sh
// does it): every listener and mechanism connects, and every way of
// getting security wrong fails within the setup timeout with a typed
// error that says which case it is.

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/sasl"
	"github.com/kprod/kprod/internal/testcluster"
	"github.com/kprod/kprod/internal/testpki"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// secConfig is a Config for listener l with mechanism mech (ignored
// without SASL) and the test user's credentials.
func secConfig(t *testing.T, l testcluster.Listener, mech string) *Config {
	t.Helper()
	cfg := testConfig()
	if l.TLS() {
		cfg.TLS = testcluster.ClientTLS(t, l.Protocol == "SSL")
	}
	if strings.HasPrefix(l.Protocol, "SASL") {
		cfg.SASL = mechanism(t, mech, testcluster.SecurityUser, testcluster.SecurityPassword)
	}
	return cfg
}

func mechanism(t *testing.T, mech, user, pass string) sasl.Mechanism {
	t.Helper()
	switch mech {
	case "PLAIN":
		return sasl.Plain{Username: user, Password: pass}
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		m, err := sasl.NewScram(mech, user, pass)
		if err != nil {
			t.Fatal(err)
		}
		return m
	case "OAUTHBEARER":
		return sasl.OAuthBearer{Source: func(context.Context) (sasl.Token, error) {
			exp := time.Now().Add(time.Hour)
			return sasl.Token{Value: testcluster.UnsecuredJWT(user, exp), Expiry: exp}, nil
		}}
	}
	t.Fatalf("unknown mechanism %q", mech)
	return nil
}

// dialSec is dialTest with a setup timeout for a loaded machine: the
// brokers' first TLS handshakes run in a JVM that is still warming up.
func dialSec(t *testing.T, addr string, cfg *Config) *Conn {
	t.Helper()
	c, err := dialConn(context.Background(), 1, addr, cfg, 30*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// setupTimeout bounds every failing dial below: each error must come
// within it, never as a hang.
const setupTimeout = 8 * time.Second

// dialFail dials addr expecting an error, and checks it came within the
// setup timeout.
func dialFail(t *testing.T, addr string, cfg *Config) error {
	t.Helper()
	start := time.Now()
	c, err := dialConn(context.Background(), 1, addr, cfg, setupTimeout)
	if err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded, want an error", addr)
	}
	if d := time.Since(start); d > setupTimeout+time.Second {
		t.Errorf("the error took %v, more than the setup timeout %v", d, setupTimeout)
	}
	t.Logf("error (after %v): %v", time.Since(start).Round(time.Millisecond), err)
	return err
}

// metadataOK sends Metadata on c and checks the brokers it lists are on
// the same listener (the advertised listener of the one we came in on).
func metadataOK(t *testing.T, c *Conn, l testcluster.Listener) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Do(ctx, metadataReq())
	if err != nil {
		t.Fatalf("Metadata over %s: %v", l.Protocol, err)
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Brokers) != testcluster.NumNodes {
		t.Fatalf("Metadata lists %d brokers, want %d", len(mr.Brokers), testcluster.NumNodes)
	}
	want := map[string]bool{}
	for _, a := range l.Addrs() {
		want[a] = true
	}
	for _, b := range mr.Brokers {
		if a := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); !want[a] {
			t.Errorf("broker %d advertised at %s, not on the %s listener %v", b.NodeID, a, l.Protocol, l.Addrs())
		}
	}
}

func TestIntegrationSecurityListeners(t *testing.T) {
	testcluster.Security(t)
	cases := []struct {
		l    testcluster.Listener
		mech string
	}{
		{testcluster.SSL, ""},
	}
	for _, l := range []testcluster.Listener{testcluster.SASLPlaintext, testcluster.SASLSSL} {
		for _, m := range l.Mechanisms {
			cases = append(cases, struct {
				l    testcluster.Listener
				mech string
			}{l, m})
		}
	}
	for _, tc := range cases {
		t.Run(tc.l.Protocol+"/"+tc.mech, func(t *testing.T) {
			cfg := secConfig(t, tc.l, tc.mech)
			c := dialSec(t, tc.l.Addr(1), cfg)
			if c.tls != tc.l.TLS() {
				t.Errorf("tls = %v, want %v", c.tls, tc.l.TLS())
			}
			if tc.mech != "" && c.reauth.IsZero() {
				t.Errorf("no re-authentication scheduled: the brokers grant %v sessions", testcluster.SecuritySessionLifetime)
			}
			metadataOK(t, c, tc.l)
		})
	}
}

// TestIntegrationSecurityEncryptedKey: a client key encrypted with PBES2,
// as openssl pkcs8 -topk8 -v2 aes-256-cbc writes it, is read with
// ssl.key.password (the root package's loader) — here only that the
// files the script made are usable for mutual TLS with the plain key.
func TestIntegrationSecurityMutualTLSWithoutCert(t *testing.T) {
	testcluster.Security(t)
	cfg := testConfig()
	cfg.TLS = testcluster.ClientTLS(t, false)
	err := dialFail(t, testcluster.SSL.Addr(1), cfg)
	if !errors.Is(err, kerr.ErrTLS) || kerr.IsRetriable(err) {
		t.Fatalf("want a non-retriable ErrTLS, got %v", err)
	}
	if !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("the error does not say a client certificate is needed: %v", err)
	}
}

func TestIntegrationSecurityWrongPassword(t *testing.T) {
	testcluster.Security(t)
	const wrong = "not-the-Pa55word-8d1e"
	for _, tc := range []struct {
		l    testcluster.Listener
		mech string
	}{
		{testcluster.SASLPlaintext, "PLAIN"},
		{testcluster.SASLPlaintext, "SCRAM-SHA-256"},
		{testcluster.SASLSSL, "SCRAM-SHA-512"},
	} {
		t.Run(tc.l.Protocol+"/"+tc.mech, func(t *testing.T) {
			cfg := secConfig(t, tc.l, tc.mech)
			cfg.SASL = mechanism(t, tc.mech, testcluster.SecurityUser, wrong)
			err := dialFail(t, tc.l.Addr(1), cfg)
			if !errors.Is(err, kerr.ErrAuthentication) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("want ErrAuthentication with SASL_AUTHENTICATION_FAILED, got %v", err)
			}
			if kerr.IsRetriable(err) || errors.Is(err, kerr.ErrDial) {
				t.Errorf("an authentication failure must not be retriable: %v", err)
			}
			if strings.Contains(err.Error(), wrong) {
				t.Errorf("the error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), "password") {
				t.Errorf("the error does not say to check the password: %v", err)
			}
		})
	}
}

func TestIntegrationSecurityUnknownUser(t *testing.T) {
	testcluster.Security(t)
	cfg := secConfig(t, testcluster.SASLPlaintext, "SCRAM-SHA-512")
	cfg.SASL = mechanism(t, "SCRAM-SHA-512", "nobody-here", testcluster.SecurityPassword)
	err := dialFail(t, testcluster.SASLPlaintext.Addr(1), cfg)
	if !errors.Is(err, kerr.ErrAuthentication) || !strings.Contains(err.Error(), `"nobody-here"`) {
		t.Fatalf("want ErrAuthentication naming the user, got %v", err)
	}
}

func TestIntegrationSecurityMechanismNotEnabled(t *testing.T) {
	testcluster.Security(t)
	cfg := secConfig(t, testcluster.SASLSSL, "SCRAM-SHA-256")
	err := dialFail(t, testcluster.SASLSSL.Addr(1), cfg)
	if !errors.Is(err, kerr.ErrAuthentication) || !errors.Is(err, kerr.UnsupportedSaslMechanism) {
		t.Fatalf("want ErrAuthentication with UNSUPPORTED_SASL_MECHANISM, got %v", err)
	}
	for _, m := range testcluster.SASLSSL.Mechanisms {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("the error does not list the enabled mechanism %s: %v", m, err)
		}
	}
}

func TestIntegrationSecuritySASLToPlaintextListener(t *testing.T) {
	brokers := testcluster.Security(t)
	cfg := secConfig(t, testcluster.SASLPlaintext, "PLAIN")
	err := dialFail(t, brokers[0], cfg)
	if !errors.Is(err, kerr.ErrAuthentication) || !strings.Contains(err.Error(), "does not use SASL") {
		t.Fatalf("want ErrAuthentication saying the listener does not use SASL, got %v", err)
	}
}

func TestIntegrationSecurityPlaintextToSASLListener(t *testing.T) {
	testcluster.Security(t)
	c := dialSec(t, testcluster.SASLPlaintext.Addr(1), testConfig())
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	_, err := c.Do(ctx, metadataReq())
	t.Logf("error: %v", err)
	if err == nil || !strings.Contains(err.Error(), "SASL_PLAINTEXT or SASL_SSL") {
		t.Fatalf("want the connection closed with a hint to use SASL, got %v", err)
	}
}

func TestIntegrationSecurityTLSToPlaintextListener(t *testing.T) {
	brokers := testcluster.Security(t)
	for _, l := range []testcluster.Listener{{Protocol: "PLAINTEXT"}, testcluster.SASLPlaintext} {
		t.Run(l.Protocol, func(t *testing.T) {
			addr := brokers[0]
			if l.Protocol != "PLAINTEXT" {
				addr = l.Addr(1)
			}
			cfg := testConfig()
			cfg.TLS = testcluster.ClientTLS(t, true)
			err := dialFail(t, addr, cfg)
			if !errors.Is(err, kerr.ErrTLS) || !strings.Contains(err.Error(), "is the listener plaintext?") {
				t.Fatalf("want ErrTLS asking whether the listener is plaintext, got %v", err)
			}
		})
	}
}

func TestIntegrationSecurityPlaintextToTLSListener(t *testing.T) {
	testcluster.Security(t)
	for _, l := range []testcluster.Listener{testcluster.SSL, testcluster.SASLSSL} {
		t.Run(l.Protocol, func(t *testing.T) {
			err := dialFail(t, l.Addr(1), testConfig())
			if !strings.Contains(err.Error(), "is the listener TLS?") {
				t.Fatalf("want an error asking whether the listener is TLS, got %v", err)
			}
			if !errors.Is(err, kerr.ErrTLS) || kerr.IsRetriable(err) {
				t.Errorf("want a non-retriable ErrTLS (the broker answered with a TLS alert), got %v", err)
			}
		})
	}
}

// otherCA is a CA that signed nothing the brokers have.
func otherCA(t *testing.T) *x509.CertPool {
	t.Helper()
	return testpki.NewCA(t, "not the kprod test CA").Pool()
}

func TestIntegrationSecurityUntrustedCertificate(t *testing.T) {
	testcluster.Security(t)
	cfg := secConfig(t, testcluster.SASLSSL, "PLAIN")
	cfg.TLS.RootCAs = otherCA(t)
	err := dialFail(t, testcluster.SASLSSL.Addr(1), cfg)
	if !errors.Is(err, kerr.ErrTLS) || kerr.IsRetriable(err) || !strings.Contains(err.Error(), "ssl.truststore") {
		t.Fatalf("want a non-retriable ErrTLS pointing at the truststore, got %v", err)
	}
	if !strings.Contains(err.Error(), "kprod test CA") {
		t.Errorf("the error does not name the certificate's issuer: %v", err)
	}
}

func TestIntegrationSecurityHostnameMismatch(t *testing.T) {
	testcluster.Security(t)
	cfg := secConfig(t, testcluster.SSL, "")
	// Dial the right port under a name the certificate does not list.
	real := testcluster.SSL.Addr(1)
	cfg.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, real)
	}
	_, port, _ := net.SplitHostPort(real)
	err := dialFail(t, net.JoinHostPort("kafka.example.invalid", port), cfg)
	if !errors.Is(err, kerr.ErrTLS) || kerr.IsRetriable(err) {
		t.Fatalf("want a non-retriable ErrTLS, got %v", err)
	}
	for _, want := range []string{`"kafka.example.invalid"`, "localhost", "127.0.0.1", "ssl.endpoint.identification.algorithm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %s: %v", want, err)
		}
	}
}

func TestIntegrationSecurityExpiredToken(t *testing.T) {
	testcluster.Security(t)
	cfg := secConfig(t, testcluster.SASLPlaintext, "OAUTHBEARER")
	// The token source does not say when the token expires: the broker
	// finds out.
	cfg.SASL = sasl.OAuthBearer{Source: func(context.Context) (sasl.Token, error) {
		return sasl.Token{Value: testcluster.UnsecuredJWT("kprod", time.Now().Add(-time.Minute))}, nil
	}}
	err := dialFail(t, testcluster.SASLPlaintext.Addr(1), cfg)
	if !errors.Is(err, kerr.ErrAuthentication) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("want ErrAuthentication with SASL_AUTHENTICATION_FAILED, got %v", err)
	}
	if !strings.Contains(err.Error(), "invalid_token") {
		t.Errorf("the error does not carry the broker's OAUTHBEARER status: %v", err)
	}

	// A token source that says its token expired: not even sent.
	cfg.SASL = sasl.OAuthBearer{Source: func(context.Context) (sasl.Token, error) {
		exp := time.Now().Add(-time.Minute)
		return sasl.Token{Value: testcluster.UnsecuredJWT("kprod", exp), Expiry: exp}, nil
	}}
	err = dialFail(t, testcluster.SASLPlaintext.Addr(1), cfg)
	if !errors.Is(err, kerr.ErrAuthentication) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("want ErrAuthentication saying the token expired, got %v", err)
	}

	// A token source that fails (its identity provider is down): tried
	// again later, as Java retries a token refresh, not taken for
	// rejected credentials; its error stays visible to errors.Is.
	errIdP := errors.New("identity provider: 503")
	cfg.SASL = sasl.OAuthBearer{Source: func(context.Context) (sasl.Token, error) { return sasl.Token{}, errIdP }}
	err = dialFail(t, testcluster.SASLPlaintext.Addr(1), cfg)
	if !errors.Is(err, errIdP) || !errors.Is(err, kerr.ErrDial) || errors.Is(err, kerr.ErrAuthentication) || !kerr.IsRetriable(err) {
		t.Fatalf("want a retriable ErrDial wrapping the token source's error, got %v", err)
	}
}

// TestIntegrationSecurityReauthentication keeps one connection busy for
// longer than the brokers' session lifetime, with requests in flight
// while the writer re-authenticates: the connection must survive (the
// broker closes one whose session ended) and re-authenticate in band.
func TestIntegrationSecurityReauthentication(t *testing.T) {
	testcluster.Security(t)
	testcluster.SkipIfShort(t, "runs for 1.5 session lifetimes")
	for _, tc := range []struct {
		l    testcluster.Listener
		mech string
	}{
		{testcluster.SASLPlaintext, "SCRAM-SHA-256"},
		{testcluster.SASLSSL, "OAUTHBEARER"},
	} {
		t.Run(tc.l.Protocol+"/"+tc.mech, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			var logMu sync.Mutex
			cfg := secConfig(t, tc.l, tc.mech)
			cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var tokens atomic.Int32
			if tc.mech == "OAUTHBEARER" {
				cfg.SASL = sasl.OAuthBearer{Source: func(context.Context) (sasl.Token, error) {
					tokens.Add(1)
					exp := time.Now().Add(time.Hour)
					return sasl.Token{Value: testcluster.UnsecuredJWT("kprod", exp), Expiry: exp}, nil
				}}
			}
			c := dialSec(t, tc.l.Addr(1), cfg)
			deadline := time.Now().Add(testcluster.SecuritySessionLifetime * 3 / 2)
			var sent, answered atomic.Int64
			for time.Now().Before(deadline) {
				// A few at once, so that some are in flight when the
				// writer stops to re-authenticate.
				var wg sync.WaitGroup
				for range 3 {
					wg.Add(1)
					sent.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						defer cancel()
						if _, err := c.Do(ctx, metadataReq()); err != nil {
							t.Errorf("Metadata: %v", err)
							return
						}
						answered.Add(1)
					}()
				}
				wg.Wait()
				if t.Failed() {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if c.Dead() {
				t.Fatalf("the connection died: %v", c.Err())
			}
			if n := c.Reauthentications(); n < 1 {
				t.Fatalf("%d re-authentications in %v with sessions of %v", n, testcluster.SecuritySessionLifetime*3/2, testcluster.SecuritySessionLifetime)
			}
			if tc.mech == "OAUTHBEARER" && tokens.Load() < 2 {
				t.Errorf("the token source was asked %d times; re-authentication must ask it again", tokens.Load())
			}
			logMu.Lock()
			defer logMu.Unlock()
			if !strings.Contains(logs.String(), "SASL re-authenticated") {
				t.Errorf("no debug log of the re-authentication:\n%s", logs.String())
			}
			t.Logf("%d requests answered, %d re-authentications", answered.Load(), c.Reauthentications())
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
