package kprod

// The producer against the real cluster's secured listeners
// (KPROD_KAFKA_SECURITY=1; scripts/test.sh sets it): configured from Java
// properties as a Java user would, it produces through every listener
// and mechanism what an independent client (franz-go) reads back through
// the same listener; every refusal reaches the record's callback as its
// typed error well within max.block.ms; and no secret reaches a log line
// or an error.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func jaas(module, user, pass string) string {
	return "org.apache.kafka.common.security." + module + " required username=\"" + user + "\" password=\"" + pass + "\";"
}

// secureProps are Java producer properties for listener l with SASL
// mechanism mech, the test users' credentials and the test CA.
func secureProps(l testcluster.Listener, mech string) map[string]string {
	p := map[string]string{
		"bootstrap.servers":                  strings.Join(l.Addrs(), ","),
		"security.protocol":                  l.Protocol,
		"socket.connection.setup.timeout.ms": "20000", // a loaded machine's first TLS handshakes
		"max.block.ms":                       "30000",
	}
	if l.TLS() {
		p["ssl.truststore.type"] = "PEM"
		p["ssl.truststore.location"] = testcluster.TLSFile("ca.pem")
	}
	if l.Protocol == "SSL" {
		p["ssl.keystore.type"] = "PEM"
		p["ssl.keystore.location"] = testcluster.TLSFile("client-keystore.pem")
	}
	switch mech {
	case "PLAIN":
		p["sasl.mechanism"] = mech
		p["sasl.jaas.config"] = jaas("plain.PlainLoginModule", testcluster.SecurityUser, testcluster.SecurityPassword)
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		p["sasl.mechanism"] = mech
		p["sasl.jaas.config"] = jaas("scram.ScramLoginModule", testcluster.SecurityUser, testcluster.SecurityPassword)
	case "OAUTHBEARER":
		p["sasl.mechanism"] = mech
		p["sasl.jaas.config"] = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="kprod";`
	}
	return p
}

func secureConfig(t *testing.T, props map[string]string) Config {
	t.Helper()
	cfg, err := ConfigFromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// produceAndReadBack sends n records to a new topic and reads them back
// with franz-go through listener l and mechanism mech.
func produceAndReadBack(t *testing.T, brokers []string, cfg Config, l testcluster.Listener, mech string) {
	t.Helper()
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 3, 3, nil)
	p := newTestProducer(t, cfg)
	const n = 50
	ctx := context.Background()
	if err := p.SendSync(ctx, &Record{Topic: topic, Key: []byte("k0"), Value: []byte("v0")}); err != nil {
		t.Fatalf("first record: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := 1; i < n; i++ {
		wg.Add(1)
		p.Send(ctx, &Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}, func(_ *Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d records failed, first: %v", len(errs), errs[0])
	}

	cl := testcluster.SecureClient(t, l, mech, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read back %d of %d records through %s", len(seen), n, l.Protocol)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		for _, r := range fs.Records() {
			if want := "v" + strings.TrimPrefix(string(r.Key), "k"); string(r.Value) != want {
				t.Fatalf("record %s has value %s", r.Key, r.Value)
			}
			seen[string(r.Key)] = true
		}
	}
}

func TestIntegrationSecurityProduce(t *testing.T) {
	brokers := testcluster.Security(t)
	keyPEM, err := os.ReadFile(testcluster.TLSFile("client-key-encrypted.pem"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := os.ReadFile(testcluster.TLSFile("client.pem"))
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name   string
		l      testcluster.Listener
		mech   string
		modify func(map[string]string, *Config)
	}
	cases := []tc{
		{"SSL/keystore file", testcluster.SSL, "", nil},
		{"SSL/inline PEM, encrypted key", testcluster.SSL, "", func(p map[string]string, _ *Config) {
			delete(p, "ssl.keystore.location")
			p["ssl.keystore.certificate.chain"] = string(certPEM)
			p["ssl.keystore.key"] = string(keyPEM)
			p["ssl.key.password"] = testcluster.SecurityKeyPassword
		}},
	}
	for _, l := range []testcluster.Listener{testcluster.SASLPlaintext, testcluster.SASLSSL} {
		for _, m := range l.Mechanisms {
			cases = append(cases, tc{l.Protocol + "/" + m, l, m, nil})
		}
	}
	cases = append(cases,
		tc{"SASL_PLAINTEXT/SCRAM-SHA-512, Go fields", testcluster.SASLPlaintext, "SCRAM-SHA-512", func(p map[string]string, c *Config) {
			delete(p, "sasl.jaas.config")
			c.SASLUsername, c.SASLPassword = testcluster.SecurityUser, testcluster.SecurityPassword
		}},
		tc{"SASL_SSL/OAUTHBEARER, token source", testcluster.SASLSSL, "OAUTHBEARER", func(p map[string]string, c *Config) {
			delete(p, "sasl.jaas.config")
			c.SASLOAuthTokenSource = OAuthTokenSourceFunc(func(context.Context) (OAuthToken, error) {
				exp := time.Now().Add(time.Hour)
				return OAuthToken{Value: testcluster.UnsecuredJWT("kprod", exp), Expiry: exp}, nil
			})
		}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			props := secureProps(c.l, c.mech)
			var cfg Config
			if c.modify != nil {
				c.modify(props, &cfg)
			}
			base := secureConfigNoValidate(t, props)
			base.SASLUsername, base.SASLPassword, base.SASLOAuthTokenSource = cfg.SASLUsername, cfg.SASLPassword, cfg.SASLOAuthTokenSource
			produceAndReadBack(t, brokers, base, c.l, c.mech)
		})
	}
}

// secureConfigNoValidate builds a Config from properties without
// validating it, for Go fields to be added (NewProducer validates).
func secureConfigNoValidate(t *testing.T, props map[string]string) Config {
	t.Helper()
	c := DefaultConfig()
	for k, v := range props {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestIntegrationSecurityProducerErrors: each refusal reaches the
// record's callback as its typed error, and soon: the metadata wait does
// not retry what cannot succeed.
func TestIntegrationSecurityProducerErrors(t *testing.T) {
	brokers := testcluster.Security(t)
	otherCA := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(otherCA, []byte(newTestPKI(t).caPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		l      testcluster.Listener
		mech   string
		modify func(map[string]string, *Config)
		want   []error
		within time.Duration
		says   string
	}{
		{"wrong password", testcluster.SASLSSL, "PLAIN", func(p map[string]string, _ *Config) {
			p["sasl.jaas.config"] = jaas("plain.PlainLoginModule", testcluster.SecurityUser, "wrong-Pa55")
		}, []error{ErrAuthentication, kerr.SaslAuthenticationFailed}, 15 * time.Second, "password"},
		{"mechanism not enabled", testcluster.SASLSSL, "SCRAM-SHA-256", nil,
			[]error{ErrAuthentication, kerr.UnsupportedSaslMechanism}, 15 * time.Second, "PLAIN, SCRAM-SHA-512, OAUTHBEARER"},
		{"expired token", testcluster.SASLPlaintext, "OAUTHBEARER", func(p map[string]string, c *Config) {
			delete(p, "sasl.jaas.config")
			c.SASLOAuthTokenSource = OAuthTokenSourceFunc(func(context.Context) (OAuthToken, error) {
				return OAuthToken{Value: testcluster.UnsecuredJWT("kprod", time.Now().Add(-time.Minute))}, nil
			})
		}, []error{ErrAuthentication, kerr.SaslAuthenticationFailed}, 15 * time.Second, "invalid_token"},
		{"untrusted certificate", testcluster.SASLSSL, "PLAIN", func(p map[string]string, _ *Config) {
			p["ssl.truststore.location"] = otherCA
		}, []error{ErrTLS}, 15 * time.Second, "ssl.truststore"},
		{"certificate for another host", testcluster.SSL, "", func(p map[string]string, c *Config) {
			// Bootstrap by a name the broker certificate does not list.
			p["bootstrap.servers"] = "kafka.example.invalid:" + port(testcluster.SSL.Addr(1))
			c.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, testcluster.SSL.Addr(1))
			}
		}, []error{ErrTLS}, 15 * time.Second, "ssl.endpoint.identification.algorithm"},
		{"no client certificate", testcluster.SSL, "", func(p map[string]string, _ *Config) {
			delete(p, "ssl.keystore.location")
		}, []error{ErrTLS}, 15 * time.Second, "client certificate"},
		{"plaintext to a TLS listener", testcluster.SSL, "", func(p map[string]string, _ *Config) {
			for k := range p {
				if strings.HasPrefix(k, "ssl.") {
					delete(p, k)
				}
			}
			p["security.protocol"] = "PLAINTEXT"
		}, []error{ErrTLS}, 15 * time.Second, "is the listener TLS?"},
		// The broker closes the connection at the ClientHello: retried,
		// as a restarting broker does the same, so this one takes
		// max.block.ms; the error still says what is likely wrong.
		{"TLS to a plaintext listener", testcluster.Listener{Protocol: "SSL"}, "", func(p map[string]string, _ *Config) {
			p["bootstrap.servers"] = strings.Join(brokers, ",")
			p["max.block.ms"] = "5000"
		}, []error{ErrTLS}, 25 * time.Second, "is the listener plaintext?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := secureProps(tc.l, tc.mech)
			var extra Config
			if tc.modify != nil {
				tc.modify(props, &extra)
			}
			cfg := secureConfigNoValidate(t, props)
			cfg.SASLOAuthTokenSource, cfg.Dial = extra.SASLOAuthTokenSource, extra.Dial
			p := newTestProducer(t, cfg)
			start := time.Now()
			err := p.SendSync(context.Background(), &Record{Topic: testcluster.UniqueTopic(t), Value: []byte("x")})
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("the error is not %v", w)
				}
			}
			if d := time.Since(start); d > tc.within {
				t.Errorf("took %v, want at most %v", d, tc.within)
			}
			if err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Errorf("the error does not say %q", tc.says)
			}
		})
	}
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestIntegrationSecurityNoSecretsLogged runs producers with a debug
// logger through failures and successes, for longer than a SASL session
// (so re-authentication is logged too), and checks that no password, key
// password, key or JAAS text appears in a log line or an error.
func TestIntegrationSecurityNoSecretsLogged(t *testing.T) {
	brokers := testcluster.Security(t)
	testcluster.SkipIfShort(t, "runs for 1.3 SASL session lifetimes")
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(syncWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const wrongPassword = "wr0ng-Pa55-e71c"
	keyPEM, _ := os.ReadFile(testcluster.TLSFile("client-key-encrypted.pem"))
	secrets := []string{testcluster.SecurityPassword, wrongPassword, testcluster.SecurityKeyPassword,
		string(keyPEM[40:80]), "PlainLoginModule", "ScramLoginModule"}
	var errs []string

	// Failures first: wrong password (SCRAM and PLAIN), wrong key password.
	for _, props := range []map[string]string{
		func() map[string]string {
			p := secureProps(testcluster.SASLPlaintext, "SCRAM-SHA-512")
			p["sasl.jaas.config"] = jaas("scram.ScramLoginModule", testcluster.SecurityUser, wrongPassword)
			return p
		}(),
		func() map[string]string {
			p := secureProps(testcluster.SASLSSL, "PLAIN")
			p["sasl.jaas.config"] = jaas("plain.PlainLoginModule", testcluster.SecurityUser, wrongPassword)
			return p
		}(),
	} {
		cfg := secureConfigNoValidate(t, props)
		cfg.Logger = logger
		p := newTestProducer(t, cfg)
		err := p.SendSync(context.Background(), &Record{Topic: testcluster.UniqueTopic(t), Value: []byte("x")})
		if !errors.Is(err, ErrAuthentication) {
			t.Errorf("wrong password: %v", err)
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	badKey := secureProps(testcluster.SSL, "")
	delete(badKey, "ssl.keystore.location")
	certPEM, _ := os.ReadFile(testcluster.TLSFile("client.pem"))
	badKey["ssl.keystore.certificate.chain"] = string(certPEM)
	badKey["ssl.keystore.key"] = string(keyPEM)
	badKey["ssl.key.password"] = wrongPassword
	if _, err := ConfigFromProperties(badKey); err == nil {
		t.Error("a wrong ssl.key.password was accepted")
	} else {
		errs = append(errs, err.Error())
	}

	// Then success, produced for longer than a session: the producer
	// re-authenticates and keeps going.
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 3, 3, nil)
	cfg := secureConfig(t, secureProps(testcluster.SASLSSL, "SCRAM-SHA-512"))
	cfg.Logger = logger
	p := newTestProducer(t, cfg)
	deadline := time.Now().Add(testcluster.SecuritySessionLifetime * 13 / 10)
	for i := 0; time.Now().Before(deadline); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := p.SendSync(ctx, &Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
		cancel()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "SASL re-authenticated") {
		t.Errorf("no re-authentication in %v of producing with %v sessions", testcluster.SecuritySessionLifetime*13/10, testcluster.SecuritySessionLifetime)
	}
	if !strings.Contains(out, "SASL_AUTHENTICATION_FAILED") {
		t.Errorf("the debug log does not show the authentication failures")
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the log shows the secret %q", s)
		}
		for _, e := range errs {
			if strings.Contains(e, s) {
				t.Errorf("an error shows the secret %q: %s", s, e)
			}
		}
	}
	t.Logf("%d bytes of debug log checked, %d errors", len(out), len(errs))
}

type syncWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
