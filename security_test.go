package kprod

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/sasl"
	"github.com/kprod/kprod/internal/testpki"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// securityProperty: the TLS and SASL properties, which Validate checks
// only when security.protocol uses them.
func securityProperty(name string) bool {
	return strings.HasPrefix(name, "ssl.") || strings.HasPrefix(name, "sasl.")
}

// testPKI writes a CA, and a client certificate and key signed by it, to
// a temporary directory as PEM files.
type testPKI struct {
	dir                       string
	caPEM, certPEM, keyPEM    string
	caFile, certFile, keyFile string
	bundleFile                string // key then certificate: Java's PEM key store
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca := testpki.NewCA(t, "kprod unit CA")
	der, key := ca.Issue(t, "client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth})
	caDER := ca.DER
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	p := &testPKI{dir: t.TempDir()}
	p.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	p.certPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	p.keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}))
	write := func(name, text string) string {
		f := filepath.Join(p.dir, name)
		if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	p.caFile = write("ca.pem", p.caPEM)
	p.certFile = write("client.pem", p.certPEM)
	p.keyFile = write("client-key.pem", p.keyPEM)
	p.bundleFile = write("client-keystore.pem", p.keyPEM+p.certPEM)
	return p
}

// encryptedKey encrypts the key with openssl (PBES2, AES-256-CBC); see
// testpki.NeedOpenSSL for a machine without openssl.
func (p *testPKI) encryptedKey(t *testing.T, password string) string {
	t.Helper()
	testpki.NeedOpenSSL(t)
	out := filepath.Join(p.dir, "client-key-encrypted.pem")
	if b, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", p.keyFile,
		"-out", out, "-passout", "pass:"+password).CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v: %s", err, b)
	}
	return out
}

func secProps(kv ...string) map[string]string {
	m := map[string]string{"bootstrap.servers": "localhost:9093"}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

const jaasPlain = `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-Pa55";`

func TestSecurityTLSFromProperties(t *testing.T) {
	p := newTestPKI(t)
	enc := p.encryptedKey(t, "key-Pa55")
	encPEM, _ := os.ReadFile(enc)
	for _, tc := range []struct {
		name     string
		props    map[string]string
		withCert bool
	}{
		{"system roots", secProps("security.protocol", "SSL"), false},
		{"truststore file", secProps("security.protocol", "SSL", "ssl.truststore.location", p.caFile, "ssl.truststore.type", "PEM"), false},
		{"truststore text", secProps("security.protocol", "ssl", "ssl.truststore.certificates", p.caPEM), false},
		{"keystore file", secProps("security.protocol", "SSL", "ssl.truststore.location", p.caFile,
			"ssl.keystore.location", p.bundleFile, "ssl.keystore.type", "pem"), true},
		{"keystore text", secProps("security.protocol", "SSL", "ssl.truststore.location", p.caFile,
			"ssl.keystore.certificate.chain", p.certPEM, "ssl.keystore.key", p.keyPEM), true},
		{"keystore text on one line", secProps("security.protocol", "SSL",
			"ssl.keystore.certificate.chain", strings.ReplaceAll(p.certPEM, "\n", " "),
			"ssl.keystore.key", strings.ReplaceAll(p.keyPEM, "\n", " ")), true},
		{"encrypted key", secProps("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN", "sasl.jaas.config", jaasPlain,
			"ssl.keystore.certificate.chain", p.certPEM, "ssl.keystore.key", string(encPEM), "ssl.key.password", "key-Pa55"), true},
		{"encrypted key, password with spaces around (trimmed, as in Java)", secProps("security.protocol", "SSL",
			"ssl.keystore.certificate.chain", p.certPEM, "ssl.keystore.key", string(encPEM), "ssl.key.password", " key-Pa55 \t"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFromProperties(tc.props)
			if err != nil {
				t.Fatal(err)
			}
			tc2, m, err := c.security()
			if err != nil {
				t.Fatal(err)
			}
			if tc2 == nil || tc2.MinVersion != tls.VersionTLS12 || tc2.MaxVersion != tls.VersionTLS13 || tc2.InsecureSkipVerify {
				t.Fatalf("tls config %+v", tc2)
			}
			if (len(tc2.Certificates) == 1) != tc.withCert {
				t.Errorf("%d client certificates, want one: %v", len(tc2.Certificates), tc.withCert)
			}
			if (tc2.RootCAs != nil) != (tc.props["ssl.truststore.location"] != "" || tc.props["ssl.truststore.certificates"] != "") {
				t.Errorf("RootCAs %v", tc2.RootCAs)
			}
			if (m != nil) != strings.HasPrefix(c.SecurityProtocol, "SASL") {
				t.Errorf("mechanism %v for %s", m, c.SecurityProtocol)
			}
		})
	}
}

// TestSecurityLegacyTLSVersionsSkipped: ssl.enabled.protocols as Kafka
// before 2.5 defaulted it (TLSv1.2,TLSv1.1,TLSv1), which Java accepts and
// then speaks only TLSv1.2 of, was refused; it now works, with a warning
// that names the versions left out.
func TestSecurityLegacyTLSVersionsSkipped(t *testing.T) {
	c, err := ConfigFromProperties(secProps("security.protocol", "SSL", "ssl.enabled.protocols", "TLSv1.2,TLSv1.1,TLSv1"))
	if err != nil {
		t.Fatal(err)
	}
	out := newProducerLog(t, c)
	lines := logLinesWith(out, "ssl.enabled.protocols=")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "TLSv1.1 and TLSv1 not enabled") {
		t.Errorf("want one warning that TLSv1.1 and TLSv1 are not enabled, got:\n%s", out)
	}
}

func TestSecurityTLSVersionsAndSuites(t *testing.T) {
	for _, tc := range []struct {
		enabled, proto string
		lo, hi         uint16
	}{
		{"TLSv1.2,TLSv1.3", "TLSv1.3", tls.VersionTLS12, tls.VersionTLS13},
		{"TLSv1.2", "TLSv1.3", tls.VersionTLS12, tls.VersionTLS12},
		{"TLSv1.3", "TLS", tls.VersionTLS13, tls.VersionTLS13},
		{"TLSv1.2,TLSv1.3", "TLSv1.2", tls.VersionTLS12, tls.VersionTLS12},
		// Kafka's default before 2.5: the old versions are skipped, as
		// the JDK under Java's client skips them.
		{"TLSv1.2,TLSv1.1,TLSv1", "TLSv1.2", tls.VersionTLS12, tls.VersionTLS12},
	} {
		c, err := ConfigFromProperties(secProps("security.protocol", "SSL", "ssl.enabled.protocols", tc.enabled, "ssl.protocol", tc.proto))
		if err != nil {
			t.Fatalf("%s / %s: %v", tc.enabled, tc.proto, err)
		}
		cfg, _ := c.buildTLS()
		if cfg.MinVersion != tc.lo || cfg.MaxVersion != tc.hi {
			t.Errorf("%s / %s: versions %x..%x, want %x..%x", tc.enabled, tc.proto, cfg.MinVersion, cfg.MaxVersion, tc.lo, tc.hi)
		}
	}
	c, err := ConfigFromProperties(secProps("security.protocol", "SSL",
		"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := c.buildTLS()
	if want := []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}; !slices.Equal(cfg.CipherSuites, want) {
		t.Errorf("cipher suites %x, want %x", cfg.CipherSuites, want)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.MaxVersion != tls.VersionTLS13 {
		t.Errorf("suites of both versions: versions %x..%x, want both", cfg.MinVersion, cfg.MaxVersion)
	}
	// As JSSE: a version with none of its suites listed is off.
	for _, tc := range []struct {
		suites string
		lo, hi uint16
	}{
		{"TLS_AES_256_GCM_SHA384", tls.VersionTLS13, tls.VersionTLS13},
		{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", tls.VersionTLS12, tls.VersionTLS12},
	} {
		c, err := ConfigFromProperties(secProps("security.protocol", "SSL", "ssl.cipher.suites", tc.suites))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := c.buildTLS()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MinVersion != tc.lo || cfg.MaxVersion != tc.hi {
			t.Errorf("ssl.cipher.suites=%s: versions %x..%x, want %x..%x", tc.suites, cfg.MinVersion, cfg.MaxVersion, tc.lo, tc.hi)
		}
	}
}

// TestSecurityNoHostnameCheck: with ssl.endpoint.identification.algorithm
// empty, the chain is still verified against the truststore.
func TestSecurityNoHostnameCheck(t *testing.T) {
	p := newTestPKI(t)
	c, err := ConfigFromProperties(secProps("security.protocol", "SSL", "ssl.truststore.location", p.caFile,
		"ssl.endpoint.identification.algorithm", ""))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := c.buildTLS()
	if !cfg.InsecureSkipVerify || cfg.VerifyConnection == nil {
		t.Fatal("no custom verification")
	}
	good, _ := x509.ParseCertificate(mustDER(t, p.certPEM))
	if err := cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{good}}); err != nil {
		t.Errorf("a certificate from the trusted CA, for another host: %v", err)
	}
	other := newTestPKI(t)
	bad, _ := x509.ParseCertificate(mustDER(t, other.certPEM))
	if err := cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{bad}}); err == nil {
		t.Error("a certificate from another CA was accepted")
	}

	// The producer says once that host names are not checked (a Config
	// built in Go without DefaultConfig gets this silently otherwise).
	if out := newProducerLog(t, c); strings.Count(out, "TLS without hostname verification") != 1 || !strings.Contains(out, "level=WARN") {
		t.Errorf("no single warning about hostname verification:\n%s", out)
	}
}

func mustDER(t *testing.T, s string) []byte {
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		t.Fatal("no PEM")
	}
	return b.Bytes
}

func TestSecuritySASLFromProperties(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		mech  string
		user  string
	}{
		{"plain jaas", secProps("security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN", "sasl.jaas.config", jaasPlain), "PLAIN", "alice"},
		{"scram jaas", secProps("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "scram-sha-512",
			"sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="x";`), "SCRAM-SHA-512", "bob"},
		// Java takes either module with either mechanism.
		{"scram with plain module", secProps("security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-256", "sasl.jaas.config", jaasPlain), "SCRAM-SHA-256", "alice"},
		{"unsecured oauth", secProps("security.protocol", "SASL_SSL", "sasl.mechanism", "OAUTHBEARER",
			"sasl.jaas.config", `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="svc";`), "OAUTHBEARER", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFromProperties(tc.props)
			if err != nil {
				t.Fatal(err)
			}
			_, m, err := c.security()
			if err != nil {
				t.Fatal(err)
			}
			if m.Name() != tc.mech {
				t.Errorf("mechanism %s, want %s", m.Name(), tc.mech)
			}
			if pr, ok := m.(sasl.Principal); ok && pr.User() != tc.user {
				t.Errorf("user %q, want %q", pr.User(), tc.user)
			}
			if _, _, err := m.Start(context.Background()); err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}

	// Go fields instead of JAAS, and a token source.
	c := validConfig()
	c.SecurityProtocol, c.SASLMechanism, c.SASLUsername, c.SASLPassword = SecuritySASLSSL, SASLScramSHA256, "u", "p"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c = validConfig()
	c.SecurityProtocol, c.SASLMechanism = SecuritySASLSSL, SASLOAuthBearer
	calls := 0
	c.SASLOAuthTokenSource = OAuthTokenSourceFunc(func(context.Context) (OAuthToken, error) {
		calls++
		return OAuthToken{Value: "t", Extensions: map[string]string{"logicalCluster": "lkc"}}, nil
	})
	_, m, err := c.security()
	if err != nil {
		t.Fatal(err)
	}
	if _, msg, err := m.Start(context.Background()); err != nil || calls != 1 || !strings.Contains(string(msg), "logicalCluster=lkc") {
		t.Errorf("Start: %q %v, %d calls", msg, err, calls)
	}
}

// TestSecurityPropertiesBadValues: every TLS and SASL property has a case
// that Validate rejects, naming it and saying what to do, without
// showing a secret value.
func TestSecurityPropertiesBadValues(t *testing.T) {
	p := newTestPKI(t)
	const secret = "s3cret-Pa55-9f2"
	jaasSecret := `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + secret + `";`
	ssl := func(kv ...string) map[string]string {
		return secProps(append([]string{"security.protocol", "SSL"}, kv...)...)
	}
	sasl := func(kv ...string) map[string]string {
		return secProps(append([]string{"security.protocol", "SASL_PLAINTEXT"}, kv...)...)
	}
	encPEM, err := os.ReadFile(p.encryptedKey(t, "key-Pa55"))
	if err != nil {
		t.Fatal(err)
	}
	// Java stores: a JKS file starts with its magic number; PKCS12 is DER.
	jks, der := filepath.Join(t.TempDir(), "store.jks"), filepath.Join(t.TempDir(), "store.p12")
	if err := os.WriteFile(jks, []byte{0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2}, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(der, []byte{0x30, 0x82, 0x0a, 0x0b, 2, 1, 3}, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prop  string // the property the error must name
		props map[string]string
		want  string
	}{
		{"ssl.truststore.location", ssl("ssl.truststore.location", "/no/such/ca.pem"), "cannot read it"},
		{"ssl.truststore.location", ssl("ssl.truststore.location", p.keyFile), "no PEM certificate"},
		{"ssl.truststore.certificates", ssl("ssl.truststore.certificates", "not pem"), "no PEM certificate"},
		{"ssl.truststore.certificates", ssl("ssl.truststore.certificates", p.caPEM, "ssl.truststore.location", p.caFile), "give one of them"},
		{"ssl.truststore.type", ssl("ssl.truststore.location", p.caFile, "ssl.truststore.type", "JKS"), "keytool -exportcert -rfc"},
		{"ssl.keystore.type", ssl("ssl.keystore.location", p.bundleFile, "ssl.keystore.type", "PKCS12"), "openssl pkcs12"},
		{"ssl.keystore.location", ssl("ssl.keystore.location", p.certFile), "no private key"},
		{"ssl.keystore.location", ssl("ssl.keystore.location", p.keyFile), "no PEM certificate"},
		{"ssl.keystore.location", ssl("ssl.keystore.location", p.bundleFile, "ssl.keystore.key", p.keyPEM), "either as a file or as PEM text"},
		{"ssl.keystore.key", ssl("ssl.keystore.certificate.chain", p.certPEM), "give both"},
		{"ssl.keystore.certificate.chain", ssl("ssl.keystore.certificate.chain", "x", "ssl.keystore.key", p.keyPEM), "no PEM certificate"},
		{"ssl.keystore.key", ssl("ssl.keystore.certificate.chain", p.certPEM, "ssl.keystore.key", newTestPKI(t).keyPEM), "does not belong"},
		{"ssl.keystore.location", ssl("ssl.keystore.location", p.bundleFile, "ssl.key.password", secret), "not encrypted"},
		{"ssl.key.password", ssl("ssl.keystore.certificate.chain", p.certPEM, "ssl.keystore.key", string(encPEM), "ssl.key.password", secret), "cannot decrypt"},
		{"ssl.truststore.location", ssl("ssl.truststore.location", jks), "a JKS store (Java's default"},
		{"ssl.keystore.location", ssl("ssl.keystore.location", der), "binary (DER)"},
		{"ssl.endpoint.identification.algorithm", ssl("ssl.endpoint.identification.algorithm", "ldaps"), `"https"`},
		{"ssl.enabled.protocols", ssl("ssl.enabled.protocols", "TLSv1.1,TLSv1"), "list TLSv1.2 and/or TLSv1.3"},
		{"ssl.enabled.protocols", ssl("ssl.enabled.protocols", "TLSv1.2,SSLv3"), "TLSv1.2 and TLSv1.3"},
		{"ssl.enabled.protocols", ssl("ssl.enabled.protocols", "TLSv1.3", "ssl.protocol", "TLSv1.2"), "no enabled version"},
		{"ssl.protocol", ssl("ssl.protocol", "SSLv3"), "TLSv1.3"},
		{"ssl.cipher.suites", ssl("ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA"), "insecure"},
		{"ssl.cipher.suites", ssl("ssl.cipher.suites", "TLS_FOO"), "not a cipher suite"},
		{"ssl.cipher.suites", ssl("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256", "ssl.enabled.protocols", "TLSv1.2"), "none of these suites"},
		{"sasl.mechanism", sasl(), "GSSAPI"},
		{"sasl.mechanism", sasl("sasl.mechanism", "AWS_MSK_IAM", "sasl.jaas.config", jaasSecret), "AWS_MSK_IAM"},
		{"sasl.jaas.config", sasl("sasl.mechanism", "PLAIN"), "needs a user and password"},
		{"sasl.jaas.config", sasl("sasl.mechanism", "PLAIN", "sasl.jaas.config", strings.TrimSuffix(jaasSecret, ";")), "missing ';'"},
		{"sasl.jaas.config", sasl("sasl.mechanism", "PLAIN", "sasl.jaas.config",
			`org.apache.kafka.common.security.plain.PlainLoginModule required password="`+secret+`";`), "no username"},
		{"sasl.jaas.config", sasl("sasl.mechanism", "SCRAM-SHA-512", "sasl.jaas.config",
			`com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;`), "Kerberos"},
		{"sasl.jaas.config", sasl("sasl.mechanism", "OAUTHBEARER", "sasl.jaas.config",
			`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="c" clientSecret="`+secret+`";`), "SASLOAuthTokenSource"},
		{"sasl.jaas.config", sasl("sasl.mechanism", "OAUTHBEARER", "sasl.jaas.config", jaasSecret), "OAuthBearerLoginModule"},
		// An extension Java's login handler refuses, refused by Validate
		// rather than by the broker as invalid credentials.
		{"sasl.jaas.config", sasl("sasl.mechanism", "OAUTHBEARER", "sasl.jaas.config",
			`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="`+secret+`" unsecuredLoginExtension_trace_id="x";`), "letters only"},
		{"sasl.jaas.config", sasl("sasl.mechanism", "SCRAM-SHA-256", "sasl.jaas.config",
			`org.apache.kafka.common.security.scram.ScramLoginModule required username="tok" password="`+secret+`" tokenauth="true";`), "delegation tokens"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.prop] = true
		t.Run(tt.prop, func(t *testing.T) {
			_, err := ConfigFromProperties(tt.props)
			ce := wantConfigError(t, err, tt.prop, tt.want)
			if strings.Contains(err.Error(), secret) || strings.Contains(ce.Value, secret) {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
	for name := range properties {
		if securityProperty(name) && !covered[name] {
			t.Errorf("security property %s has no bad-value test case", name)
		}
	}

	// A misspelt secret property: the value is not shown either.
	c := validConfig()
	err = c.Set("sasl.jaas.confg", jaasSecret)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "did you mean sasl.jaas.config?") {
		t.Errorf("misspelt sasl.jaas.config: %v", err)
	}
}

func TestSecurityGoFieldRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Config)
		prop   string
		want   string
	}{
		{"TLSConfig without TLS", func(c *Config) { c.TLSConfig = &tls.Config{} }, "security.protocol", "does not use TLS"},
		{"token source without SASL", func(c *Config) {
			c.SASLOAuthTokenSource = OAuthTokenSourceFunc(func(context.Context) (OAuthToken, error) { return OAuthToken{}, nil })
		}, "security.protocol", "does not use SASL"},
		{"TLSConfig and files", func(c *Config) {
			c.SecurityProtocol, c.TLSConfig, c.SSLTruststoreLocation = SecuritySSL, &tls.Config{}, "/ca.pem"
		}, "ssl.truststore.location", "TLSConfig"},
		{"JAAS and fields", func(c *Config) {
			c.SecurityProtocol, c.SASLMechanism, c.SASLJAASConfig, c.SASLUsername = SecuritySASLSSL, SASLPlain, jaasPlain, "u"
		}, "sasl.jaas.config", "one place"},
		{"no password", func(c *Config) {
			c.SecurityProtocol, c.SASLMechanism, c.SASLUsername = SecuritySASLSSL, SASLPlain, "u"
		}, "sasl.jaas.config", "SASLPassword is empty"},
		{"oauth without source", func(c *Config) {
			c.SecurityProtocol, c.SASLMechanism = SecuritySASLSSL, SASLOAuthBearer
		}, "sasl.jaas.config", "SASLOAuthTokenSource"},
		{"token source with PLAIN", func(c *Config) {
			c.SecurityProtocol, c.SASLMechanism, c.SASLUsername, c.SASLPassword = SecuritySASLSSL, SASLPlain, "u", "p"
			c.SASLOAuthTokenSource = OAuthTokenSourceFunc(func(context.Context) (OAuthToken, error) { return OAuthToken{}, nil })
		}, "sasl.mechanism", "only OAUTHBEARER uses it"},
		{"password with OAUTHBEARER", func(c *Config) {
			c.SecurityProtocol, c.SASLMechanism, c.SASLUsername, c.SASLPassword = SecuritySASLSSL, SASLOAuthBearer, "u", "p"
			c.SASLOAuthTokenSource = OAuthTokenSourceFunc(func(context.Context) (OAuthToken, error) { return OAuthToken{}, nil })
		}, "sasl.mechanism", "does not use them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.modify(&c)
			wantConfigError(t, c.Validate(), tc.prop, tc.want)
		})
	}

	// A caller's TLSConfig is used as given (cloned).
	c := validConfig()
	mine := &tls.Config{ServerName: "kafka.internal", MinVersion: tls.VersionTLS13}
	c.SecurityProtocol, c.TLSConfig = SecuritySSL, mine
	got, _, err := c.security()
	if err != nil || got == mine || got.ServerName != "kafka.internal" || got.MinVersion != tls.VersionTLS13 {
		t.Errorf("TLSConfig not used as given: %+v %v", got, err)
	}
	if errors.Is(c.Validate(), ErrInvalidConfig) {
		t.Error("Validate rejects a TLSConfig")
	}
}

// TestSecurityJAASErrorsHideBareSecret: sasl.jaas.config=hunter2 (a bare
// password where the JAAS entry belongs) made its first word the login
// module class, which the errors quoted; so did a word of an unquoted
// password with a space, as an option name.
func TestSecurityJAASErrorsHideBareSecret(t *testing.T) {
	sasl := func(mech, jaas string) map[string]string {
		return secProps("security.protocol", "SASL_SSL", "sasl.mechanism", mech, "sasl.jaas.config", jaas)
	}
	for _, tc := range []struct {
		name   string
		props  map[string]string
		secret string
		want   []string
	}{
		{"bare password", sasl("PLAIN", "hunter2-bare"), "hunter2-bare", []string{"no control flag", "unknown login module class"}},
		{"unknown module for PLAIN", sasl("SCRAM-SHA-256", "hunter3 required;"), "hunter3",
			[]string{"needs org.apache.kafka.common.security.plain.PlainLoginModule", "not an unknown login module class"}},
		{"unknown module for OAUTHBEARER", sasl("OAUTHBEARER", "hunter3 required;"), "hunter3",
			[]string{"needs org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule", "not an unknown login module class"}},
		{"unquoted password with a space", sasl("PLAIN",
			`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password=hunter 2xq;`), "2xq",
			[]string{"option 3", "has no '=value'", "quoted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConfigFromProperties(tc.props)
			ce := wantConfigError(t, err, "sasl.jaas.config", tc.want...)
			if strings.Contains(err.Error(), tc.secret) || strings.Contains(ce.Value, tc.secret) || strings.Contains(ce.Reason, tc.secret) {
				t.Errorf("the error shows %q: %v", tc.secret, err)
			}
		})
	}

	// A known module that is wrong for the mechanism is still named.
	_, err := ConfigFromProperties(sasl("OAUTHBEARER", jaasPlain))
	wantConfigError(t, err, "sasl.jaas.config", "not org.apache.kafka.common.security.plain.PlainLoginModule")
}

// Once the brokers refuse the producer's credentials, a Send for a
// partition the topic does not have yet fails at once with
// ErrAuthentication, as one for a topic not yet known does, rather than
// wait max.block.ms and report ErrUnknownPartition (Java's
// waitOnMetadata rethrows the AuthenticationException either way).
func TestSecurityRefusedCredentialsEndPartitionWait(t *testing.T) {
	c := newFake(t, 3, kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "pw"))
	var mu sync.Mutex
	var conns []net.Conn
	cfg := testConfig(c)
	cfg.SecurityProtocol = SecuritySASLPlaintext
	cfg.SASLMechanism = SASLPlain
	cfg.SASLUsername, cfg.SASLPassword = "admin", "pw"
	cfg.MaxBlock = 20 * time.Second
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
		return conn, err
	}
	p := newTestProducer(t, cfg)
	ctx := ctxT(t, 30*time.Second)
	if err := p.SendSync(ctx, &Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	// The credentials are revoked, and every connection drops.
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
		return resp, nil, true
	})
	mu.Lock()
	for _, conn := range conns {
		conn.Close()
	}
	mu.Unlock()

	for _, r := range []*Record{
		{Topic: "other", Value: []byte("v")},
		(&Record{Topic: "t", Value: []byte("v")}).ToPartition(7),
	} {
		start := time.Now()
		err := p.SendSync(ctx, r)
		if !errors.Is(err, ErrAuthentication) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s[%d] after the credentials were refused: %v, want ErrAuthentication", r.Topic, r.Partition, err)
		}
		if took := time.Since(start); took >= cfg.MaxBlock {
			t.Errorf("%s[%d]: failed after %v, max.block.ms; want at once", r.Topic, r.Partition, took)
		}
	}
}
