package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The secured listeners' test credentials, as scripts/kafka-cluster.sh
// sets them up with KPROD_KAFKA_SECURITY=1 (SEC_USER, SEC_PASSWORD,
// SEC_KEY_PASSWORD there): change both together. The user has PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512 credentials; OAUTHBEARER takes any
// unsecured token (the broker runs the unsecured validator).
const (
	SecurityUser        = "kprod"
	SecurityPassword    = "kprod-Pa55-3f9c"
	SecurityKeyPassword = "kprod-keypass-71d2" // of tls/client-key-encrypted.pem
)

// SecuritySessionLifetime is the brokers' connections.max.reauth.ms: SASL
// sessions end after it unless re-authenticated (KIP-368).
const SecuritySessionLifetime = 15 * time.Second

// Listener is one of the secured listeners every node has with
// KPROD_KAFKA_SECURITY=1.
type Listener struct {
	Protocol string // the security.protocol it speaks
	offset   int    // its port is the node's broker port + offset
	// Mechanisms are the SASL mechanisms it enables.
	Mechanisms []string
}

var (
	// SASLPlaintext: SASL without TLS; PLAIN, both SCRAMs and OAUTHBEARER.
	SASLPlaintext = Listener{"SASL_PLAINTEXT", 10, []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}}
	// SSL: TLS with a client certificate required (mutual TLS).
	SSL = Listener{"SSL", 20, nil}
	// SASLSSL: SASL over TLS without client certificates; PLAIN,
	// SCRAM-SHA-512 and OAUTHBEARER (not SCRAM-SHA-256).
	SASLSSL = Listener{"SASL_SSL", 30, []string{"PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"}}
)

// Addr is the listener's address on node (1..3).
func (l Listener) Addr(node int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(PortBase()+l.offset+node-1))
}

// Addrs are the listener's addresses on every node.
func (l Listener) Addrs() []string {
	out := make([]string, NumNodes)
	for i := range out {
		out[i] = l.Addr(i + 1)
	}
	return out
}

// TLS reports whether the listener speaks TLS.
func (l Listener) TLS() bool { return strings.HasSuffix(l.Protocol, "SSL") }

// TLSFile is the path of a file the script made in $KPROD_STATE/tls:
// ca.pem, client.pem, client-key.pem, client-keystore.pem (key and
// certificate, Java's PEM key store), client-key-encrypted.pem.
func TLSFile(name string) string { return filepath.Join(stateDir(), "tls", name) }

// securityWanted: KPROD_KAFKA_SECURITY=1 (scripts/test.sh sets it), or a
// cluster in the state directory that was started with it.
func securityWanted() (wanted, must bool) {
	if os.Getenv("KPROD_KAFKA_SECURITY") == "1" {
		return true, true
	}
	b, err := os.ReadFile(filepath.Join(stateDir(), "security"))
	return err == nil && strings.TrimSpace(string(b)) == "1", false
}

// Security checks that the secured listeners are up and returns the
// plaintext bootstrap addresses (for admin clients). It skips the test
// unless the cluster was started with KPROD_KAFKA_SECURITY=1, or fails it
// under CI=true; with that variable set (as in CI), missing listeners fail
// the test instead.
//
// Security tests dial particular nodes, so the test holds the fault lock
// (see Kill) until it ends: no fault test in another test binary breaks
// the cluster under it, and a node an earlier test left dead is brought
// back first.
func Security(t testing.TB) []string {
	t.Helper()
	brokers := Brokers(t)
	wanted, must := securityWanted()
	if !wanted {
		msg := "the secured listeners are off: start the cluster with KPROD_KAFKA_SECURITY=1 bash scripts/kafka-cluster.sh up"
		if _, inCI := integrationWanted(); inCI {
			t.Fatal(msg + " (CI runs every test)")
		}
		t.Skip(msg)
	}
	faultsFor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := WaitFor(ctx, 250*time.Millisecond, func(context.Context) error {
		for _, l := range []Listener{SASLPlaintext, SSL, SASLSSL} {
			for _, a := range l.Addrs() {
				c, err := net.DialTimeout("tcp", a, 5*time.Second)
				if err != nil {
					return fmt.Errorf("the %s listener %s is not reachable: %w", l.Protocol, a, err)
				}
				c.Close()
			}
		}
		return nil
	})
	if err != nil {
		msg := fmt.Sprintf("%v (start the cluster with KPROD_KAFKA_SECURITY=1)", err)
		if _, inCI := integrationWanted(); must || inCI {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return brokers
}

// ClientTLS is a TLS configuration trusting the test CA, with the client
// certificate when withCert (the SSL listener requires one).
func ClientTLS(t testing.TB, withCert bool) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(TLSFile("ca.pem"))
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("testcluster: no certificate in %s", TLSFile("ca.pem"))
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(TLSFile("client.pem"), TLSFile("client-key.pem"))
		if err != nil {
			t.Fatalf("testcluster: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// UnsecuredJWT is an unsecured OAUTHBEARER token (alg none) for subject
// sub that expires at exp, which the brokers' unsecured validator takes.
func UnsecuredJWT(sub string, exp time.Time) string {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	now := time.Now()
	claims := fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, now.Unix(), exp.Unix())
	return enc(`{"alg":"none"}`) + "." + enc(claims) + "."
}

// SecureClient returns a franz-go client for the listener, authenticated
// with mechanism (ignored for SSL), closed when the test ends: an
// independent client to read back what kprod wrote.
func SecureClient(t testing.TB, l Listener, mechanism string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	o := []kgo.Opt{kgo.SeedBrokers(l.Addrs()...)}
	if l.TLS() {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: ClientTLS(t, l.Protocol == SSL.Protocol)}
		o = append(o, kgo.Dialer(d.DialContext))
	}
	if l.Protocol != SSL.Protocol {
		var m sasl.Mechanism
		switch mechanism {
		case "PLAIN":
			m = plain.Auth{User: SecurityUser, Pass: SecurityPassword}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: SecurityUser, Pass: SecurityPassword}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: SecurityUser, Pass: SecurityPassword}.AsSha512Mechanism()
		case "OAUTHBEARER":
			m = oauth.Oauth(func(context.Context) (oauth.Auth, error) {
				return oauth.Auth{Token: UnsecuredJWT("kprod-reader", time.Now().Add(time.Hour))}, nil
			})
		default:
			t.Fatalf("testcluster: unknown SASL mechanism %q", mechanism)
		}
		o = append(o, kgo.SASL(m))
	}
	return Client(t, l.Addrs(), append(o, opts...)...)
}
