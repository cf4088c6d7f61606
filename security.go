package kprod

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kprod/kprod/internal/pemkey"
	"github.com/kprod/kprod/internal/sasl"
	"github.com/kprod/kprod/kerr"
)

// Security errors; test with errors.Is. Both are never retried where
// retrying cannot help, and their messages say which case it is and what
// to check.
var (
	// ErrAuthentication: a broker refused the SASL credentials (wrong
	// password, unknown user, a mechanism the listener does not enable,
	// a rejected or expired token, SASL to a listener without it). A
	// record's callback gets it within max.block.ms, at once rather than
	// after the wait. It also wraps the broker's error code
	// (kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism...).
	ErrAuthentication = kerr.ErrAuthentication
	// ErrTLS: TLS with a broker failed: an untrusted or mismatched
	// certificate, a client certificate the broker wants or refused, or
	// a security.protocol that does not match the listener (TLS to a
	// plaintext port or the reverse).
	ErrTLS = kerr.ErrTLS
)

// SASL mechanisms, the values of Config.SASLMechanism (sasl.mechanism).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	SASLOAuthBearer = "OAUTHBEARER"
	// SASLGSSAPI (Kerberos) is Java's default sasl.mechanism, and so
	// kprod's, but kprod does not implement it: Validate asks for one of
	// the others when security.protocol uses SASL.
	SASLGSSAPI = "GSSAPI"
)

// OAuthToken is a bearer token for SASL OAUTHBEARER.
type OAuthToken struct {
	// Value is the token as the broker validates it, usually a JWT.
	Value string
	// Expiry is when the token stops being valid; zero if unknown. kprod
	// refuses to send a token that has expired.
	Expiry time.Time
	// Extensions are SASL extensions sent with the token (KIP-342), e.g.
	// Confluent Cloud's logicalCluster and identityPoolId. Names are
	// letters only.
	Extensions map[string]string
}

// OAuthTokenSource supplies OAUTHBEARER tokens (Config.SASLOAuthTokenSource).
// Token is called for every connection and every re-authentication, from
// the connection's goroutines, possibly concurrently, before the SASL
// exchange starts (after TLS and ApiVersions on a new connection, before
// anything is sent on a re-authentication); ctx ends with what is left of the connection's
// setup time (socket.connection.setup.timeout.ms, which TLS and the
// ApiVersions exchange use too), or for a re-authentication after
// request.timeout.ms. It should return a cached token while that token is
// valid for a while yet, and fetch a new one before it expires: brokers
// end a session when its token expires, and kprod re-authenticates before
// that (KIP-368) with the token Token returns then. An error fails a new
// connection (tried again after reconnect.backoff.ms); on a
// re-authentication the current session goes on and Token is asked again
// shortly, while the session lasts. A panic in Token is recovered and
// fails the login as a refused one does (kerr.ErrAuthentication).
type OAuthTokenSource interface {
	Token(ctx context.Context) (OAuthToken, error)
}

// OAuthTokenSourceFunc adapts a function to OAuthTokenSource.
type OAuthTokenSourceFunc func(ctx context.Context) (OAuthToken, error)

// Token calls f.
func (f OAuthTokenSourceFunc) Token(ctx context.Context) (OAuthToken, error) { return f(ctx) }

// TLS versions ssl.enabled.protocols and ssl.protocol take.
var tlsVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// legacyTLS are the versions older configurations list in
// ssl.enabled.protocols, skipped when a version kprod speaks is listed too.
var legacyTLS = map[string]bool{"TLSv1": true, "TLSv1.1": true}

// Defaults of the security settings, as in the Kafka 4.x Java client
// except the store types (see SSLTruststoreType).
const (
	defaultSSLStoreType   = "PEM"
	defaultSSLProtocol    = "TLSv1.3"
	defaultEndpointIDAlgo = "https"
)

func defaultSSLEnabledProtocols() []string { return []string{"TLSv1.2", "TLSv1.3"} }

func (c *Config) usesTLS() bool {
	return c.SecurityProtocol == SecuritySSL || c.SecurityProtocol == SecuritySASLSSL
}

func (c *Config) usesSASL() bool {
	return c.SecurityProtocol == SecuritySASLPlaintext || c.SecurityProtocol == SecuritySASLSSL
}

// validateTLSAndSASL checks the settings the security protocol uses,
// including that the PEM files load and the JAAS configuration parses, so
// that NewProducer fails on them rather than every connection. Settings
// the protocol does not use are not checked, as in Java (one properties
// file often serves several listeners), except Go-only fields set for a
// protocol that ignores them, which are surely a mistake.
func (c *Config) validateTLSAndSASL() error {
	if !c.usesTLS() && c.TLSConfig != nil {
		return invalid("security.protocol", c.SecurityProtocol,
			"Config.TLSConfig is set but this protocol does not use TLS: set security.protocol to SSL or SASL_SSL")
	}
	if !c.usesSASL() && (c.SASLUsername != "" || c.SASLPassword != "" || c.SASLOAuthTokenSource != nil) {
		return invalid("security.protocol", c.SecurityProtocol,
			"Config.SASLUsername, SASLPassword or SASLOAuthTokenSource is set but this protocol does not use SASL: set security.protocol to SASL_PLAINTEXT or SASL_SSL")
	}
	if c.usesTLS() {
		if _, err := c.buildTLS(); err != nil {
			return err
		}
	}
	if c.usesSASL() {
		if _, err := c.buildSASL(); err != nil {
			return err
		}
	}
	return nil
}

// security returns what the broker connections need: a TLS configuration
// (nil without TLS) and a SASL mechanism (nil without SASL).
func (c *Config) security() (*tls.Config, sasl.Mechanism, error) {
	var (
		tc  *tls.Config
		m   sasl.Mechanism
		err error
	)
	if c.usesTLS() {
		if tc, err = c.buildTLS(); err != nil {
			return nil, nil, err
		}
	}
	if c.usesSASL() {
		if m, err = c.buildSASL(); err != nil {
			return nil, nil, err
		}
	}
	return tc, m, nil
}

// buildTLS makes the TLS configuration from TLSConfig or the ssl.* fields.
func (c *Config) buildTLS() (*tls.Config, error) {
	if c.TLSConfig != nil {
		for _, f := range []struct{ prop, v string }{
			{"ssl.truststore.location", c.SSLTruststoreLocation},
			{"ssl.truststore.certificates", c.SSLTruststoreCertificates},
			{"ssl.keystore.location", c.SSLKeystoreLocation},
			{"ssl.keystore.certificate.chain", c.SSLKeystoreCertificateChain},
			{"ssl.keystore.key", c.SSLKeystoreKey},
			{"ssl.key.password", c.SSLKeyPassword},
		} {
			if f.v != "" {
				return nil, invalid(f.prop, f.v, "Config.TLSConfig is set too: give the certificates in one place, TLSConfig or the ssl.* properties")
			}
		}
		return c.TLSConfig.Clone(), nil
	}

	cfg := &tls.Config{}
	var err error
	if cfg.MinVersion, cfg.MaxVersion, err = c.tlsVersionRange(); err != nil {
		return nil, err
	}
	var has12, has13 bool
	if cfg.CipherSuites, has12, has13, err = cipherSuites(c.SSLCipherSuites); err != nil {
		return nil, err
	}
	if len(c.SSLCipherSuites) > 0 {
		// As JSSE: a version none of whose suites is enabled is off.
		if !has12 {
			cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS13)
		}
		if !has13 {
			cfg.MaxVersion = min(cfg.MaxVersion, tls.VersionTLS12)
		}
		if cfg.MinVersion > cfg.MaxVersion {
			return nil, invalid("ssl.cipher.suites", strings.Join(c.SSLCipherSuites, ","),
				"none of these suites is for a TLS version that ssl.enabled.protocols and ssl.protocol allow; add suites for those versions")
		}
	}
	if cfg.RootCAs, err = c.trustPool(); err != nil {
		return nil, err
	}
	cert, err := c.clientCertificate()
	if err != nil {
		return nil, err
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	switch strings.ToLower(c.SSLEndpointIdentificationAlgorithm) {
	case "https":
	case "":
		// Java: the chain is still verified against the truststore, only
		// the host name check is off.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		return nil, invalid("ssl.endpoint.identification.algorithm", c.SSLEndpointIdentificationAlgorithm,
			`must be "https" (check that the broker's certificate is for the host dialed; the default) or empty (do not check)`)
	}
	return cfg, nil
}

// tlsVersionRange maps ssl.enabled.protocols and ssl.protocol onto a Go
// version range: the enabled versions, at most ssl.protocol (Java's
// SSLContext protocol caps what the context speaks).
func (c *Config) tlsVersionRange() (lo, hi uint16, err error) {
	if len(c.SSLEnabledProtocols) == 0 {
		reason := "must list TLSv1.2 and/or TLSv1.3"
		if c.SSLProtocol == "" {
			reason += zeroHint
		}
		return 0, 0, invalid("ssl.enabled.protocols", "", reason)
	}
	var legacy []string
	for _, p := range c.SSLEnabledProtocols {
		v, ok := tlsVersions[p]
		if !ok && legacyTLS[p] {
			legacy = append(legacy, p)
			continue
		}
		if !ok {
			return 0, 0, invalid("ssl.enabled.protocols", strings.Join(c.SSLEnabledProtocols, ","),
				fmt.Sprintf("%q is not supported: kprod speaks TLSv1.2 and TLSv1.3 (older versions are insecure)", p))
		}
		if lo == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	if len(legacy) > 0 {
		// Kafka before 2.5 listed TLSv1.2,TLSv1.1,TLSv1 by default, and
		// configurations still carry it. Java accepts the list and speaks
		// only what the JDK allows, which has not been TLSv1 or TLSv1.1
		// since JDK 16 (and 11.0.11): skip them, as it does.
		if lo == 0 {
			return 0, 0, invalid("ssl.enabled.protocols", strings.Join(c.SSLEnabledProtocols, ","),
				fmt.Sprintf("%s: not supported, kprod speaks TLSv1.2 and TLSv1.3 (older versions are insecure); list TLSv1.2 and/or TLSv1.3",
					strings.Join(legacy, " and ")))
		}
		c.warn(fmt.Sprintf("ssl.enabled.protocols=%s: %s not enabled (insecure, and disabled by current JDKs too); remove them from the list",
			strings.Join(c.SSLEnabledProtocols, ","), strings.Join(legacy, " and ")))
	}
	proto := c.SSLProtocol
	if proto == "TLS" {
		proto = "TLSv1.3"
	}
	cap, ok := tlsVersions[proto]
	if !ok {
		reason := "must be TLSv1.3 (the default), TLSv1.2 or TLS"
		if proto == "" {
			reason += zeroHint
		}
		return 0, 0, invalid("ssl.protocol", c.SSLProtocol, reason)
	}
	hi = min(hi, cap)
	if lo > hi {
		return 0, 0, invalid("ssl.enabled.protocols", strings.Join(c.SSLEnabledProtocols, ","),
			fmt.Sprintf("no enabled version is allowed by ssl.protocol=%s", c.SSLProtocol))
	}
	return lo, hi, nil
}

// cipherSuites maps Java (IANA) cipher suite names onto Go's TLS 1.2
// suites, and says whether names holds TLS 1.2 and TLS 1.3 suites. TLS 1.3
// suites are accepted but Go does not let them be chosen: it uses all
// three.
func cipherSuites(names []string) (ids []uint16, has12, has13 bool, err error) {
	if len(names) == 0 {
		return nil, false, false, nil
	}
	byName := map[string]uint16{}
	for _, s := range tls.CipherSuites() {
		byName[s.Name] = s.ID
	}
	insecure := map[string]bool{}
	for _, s := range tls.InsecureCipherSuites() {
		insecure[s.Name] = true
	}
	for _, n := range names {
		id, ok := byName[n]
		switch {
		case insecure[n]:
			return nil, false, false, invalid("ssl.cipher.suites", strings.Join(names, ","), fmt.Sprintf("%s is insecure and not supported", n))
		case !ok:
			return nil, false, false, invalid("ssl.cipher.suites", strings.Join(names, ","), fmt.Sprintf("%s is not a cipher suite kprod (Go) implements", n))
		}
		if strings.HasPrefix(n, "TLS_AES_") || strings.HasPrefix(n, "TLS_CHACHA20_") {
			has13 = true
		} else {
			has12 = true
			ids = append(ids, id)
		}
	}
	return ids, has12, has13, nil
}

func checkStoreType(prop, v string) error {
	if strings.EqualFold(v, defaultSSLStoreType) {
		return nil
	}
	var how string
	switch strings.ToUpper(v) {
	case "JKS", "PKCS12":
		how = convertStore(prop)
	}
	reason := "kprod reads PEM only"
	if v == "" {
		reason += zeroHint
	} else if how != "" {
		reason += ": " + how
	}
	return invalid(prop, v, reason)
}

// convertStore says how to turn a Java JKS or PKCS12 store into the PEM
// that kprod reads, for prop's store (ssl.truststore.* or ssl.keystore.*).
func convertStore(prop string) string {
	if strings.HasPrefix(prop, "ssl.truststore") {
		return "export the CA certificates: keytool -exportcert -rfc -alias ALIAS -keystore STORE > ca.pem (or for PKCS12: openssl pkcs12 -in STORE -nokeys -out ca.pem), then set ssl.truststore.type=PEM and ssl.truststore.location=ca.pem"
	}
	return "convert the key store: keytool -importkeystore -srckeystore STORE -destkeystore store.p12 -deststoretype PKCS12, then openssl pkcs12 -in store.p12 -out keystore.pem (add -nodes for an unencrypted key, or keep it encrypted and give ssl.key.password), and set ssl.keystore.type=PEM and ssl.keystore.location=keystore.pem"
}

// notPEM explains a store file (ssl.truststore.location or
// ssl.keystore.location) that holds no PEM: a Java JKS store (Java's
// default store type, so a Java config may not name it) or a binary
// (DER) PKCS12 store, with how to convert it; "" for anything else.
func notPEM(prop string, b []byte) string {
	var kind string
	switch {
	case len(b) >= 4 && b[0] == 0xFE && b[1] == 0xED && b[2] == 0xFE && b[3] == 0xED:
		kind = "a JKS store (Java's default ssl.*.type)"
	case len(b) >= 2 && b[0] == 0x30 && b[1] >= 0x81 && b[1] <= 0x84:
		// An ASN.1 SEQUENCE with a long length: no text starts so.
		kind = "binary (DER): a PKCS12 store, or a certificate not in PEM form"
	default:
		return ""
	}
	return "kprod reads PEM only, and this file is " + kind + ": " + convertStore(prop)
}

// trustPool is the CA pool of ssl.truststore.*, or nil for the system's.
func (c *Config) trustPool() (*x509.CertPool, error) {
	if c.SSLTruststoreLocation == "" && c.SSLTruststoreCertificates == "" {
		return nil, nil
	}
	if err := checkStoreType("ssl.truststore.type", c.SSLTruststoreType); err != nil {
		return nil, err
	}
	prop, text := "ssl.truststore.certificates", c.SSLTruststoreCertificates
	if c.SSLTruststoreLocation != "" {
		if c.SSLTruststoreCertificates != "" {
			return nil, invalid("ssl.truststore.certificates", "", "ssl.truststore.location is set too: give one of them")
		}
		prop = "ssl.truststore.location"
		b, err := os.ReadFile(c.SSLTruststoreLocation)
		if err != nil {
			return nil, invalid(prop, c.SSLTruststoreLocation, fmt.Sprintf("cannot read it: %v", err))
		}
		if hint := notPEM(prop, b); hint != "" {
			return nil, invalid(prop, c.SSLTruststoreLocation, hint)
		}
		text = string(b)
	}
	blocks, err := pemkey.Parse(text)
	var certs []*x509.Certificate
	if err == nil {
		certs, err = pemkey.Certificates(blocks)
	}
	if err != nil {
		return nil, invalid(prop, c.shownLocation(prop), err.Error())
	}
	if len(certs) == 0 {
		return nil, invalid(prop, c.shownLocation(prop), "holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	pool := x509.NewCertPool()
	for _, ct := range certs {
		pool.AddCert(ct)
	}
	return pool, nil
}

// shownLocation is the value an error shows for prop: the file name, or
// nothing for PEM text (long, and for keys secret).
func (c *Config) shownLocation(prop string) string {
	switch prop {
	case "ssl.truststore.location":
		return c.SSLTruststoreLocation
	case "ssl.keystore.location":
		return c.SSLKeystoreLocation
	}
	return ""
}

// clientCertificate is the client's certificate and key for mutual TLS
// from ssl.keystore.*, or nil.
func (c *Config) clientCertificate() (*tls.Certificate, error) {
	inline := c.SSLKeystoreCertificateChain != "" || c.SSLKeystoreKey != ""
	if c.SSLKeystoreLocation == "" && !inline {
		return nil, nil // a key password without a key is ignored, as in Java
	}
	if err := checkStoreType("ssl.keystore.type", c.SSLKeystoreType); err != nil {
		return nil, err
	}
	var (
		prop                  = "ssl.keystore.location"
		certBlocks, keyBlocks []pemkey.Block
		err                   error
	)
	if c.SSLKeystoreLocation != "" {
		if inline {
			return nil, invalid("ssl.keystore.location", c.SSLKeystoreLocation,
				"ssl.keystore.certificate.chain or ssl.keystore.key is set too: give the key store either as a file or as PEM text")
		}
		b, rerr := os.ReadFile(c.SSLKeystoreLocation)
		if rerr != nil {
			return nil, invalid(prop, c.SSLKeystoreLocation, fmt.Sprintf("cannot read it: %v", rerr))
		}
		if hint := notPEM(prop, b); hint != "" {
			return nil, invalid(prop, c.SSLKeystoreLocation, hint)
		}
		// Java's PEM key store file: the private key and its
		// certificate chain in one file.
		certBlocks, err = pemkey.Parse(string(b))
		keyBlocks = certBlocks
	} else {
		if c.SSLKeystoreCertificateChain == "" || c.SSLKeystoreKey == "" {
			return nil, invalid("ssl.keystore.key", "", "ssl.keystore.certificate.chain and ssl.keystore.key go together: give both")
		}
		prop = "ssl.keystore.certificate.chain"
		if certBlocks, err = pemkey.Parse(c.SSLKeystoreCertificateChain); err == nil {
			prop = "ssl.keystore.key"
			keyBlocks, err = pemkey.Parse(c.SSLKeystoreKey)
		}
	}
	if err != nil {
		return nil, invalid(prop, c.shownLocation(prop), err.Error())
	}
	chain, err := pemkey.Certificates(certBlocks)
	if err != nil || len(chain) == 0 {
		if c.SSLKeystoreLocation == "" {
			prop = "ssl.keystore.certificate.chain"
		}
		reason := "holds no PEM certificate (-----BEGIN CERTIFICATE-----) for the key"
		if err != nil {
			reason = err.Error()
		}
		return nil, invalid(prop, c.shownLocation(prop), reason)
	}
	key, err := pemkey.PrivateKey(keyBlocks, c.SSLKeyPassword)
	if errors.Is(err, pemkey.ErrWrongPassword) {
		return nil, invalid("ssl.key.password", c.SSLKeyPassword, err.Error())
	}
	if err != nil {
		if c.SSLKeystoreLocation == "" {
			prop = "ssl.keystore.key"
		}
		return nil, invalid(prop, c.shownLocation(prop), err.Error())
	}
	cert := &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, ct := range chain {
		cert.Certificate = append(cert.Certificate, ct.Raw)
	}
	if !publicKeyMatches(chain[0], key) {
		return nil, invalid(prop, c.shownLocation(prop), "the private key does not belong to the first certificate of the chain")
	}
	return cert, nil
}

func publicKeyMatches(cert *x509.Certificate, key crypto.PrivateKey) bool {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return false
	}
	eq, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(signer.Public())
}

// buildSASL makes the SASL mechanism of sasl.mechanism with its
// credentials.
func (c *Config) buildSASL() (sasl.Mechanism, error) {
	const prop = "sasl.mechanism"
	var jaas *sasl.JAAS
	if c.SASLJAASConfig != "" {
		var err error
		if jaas, err = sasl.ParseJAAS(c.SASLJAASConfig); err != nil {
			return nil, invalid("sasl.jaas.config", c.SASLJAASConfig, err.Error())
		}
		if sasl.IsKerberos(jaas.Module) {
			return nil, invalid("sasl.jaas.config", c.SASLJAASConfig, "Kerberos (Krb5LoginModule, GSSAPI) is not supported by kprod")
		}
	}
	switch c.SASLMechanism {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASLOAuthTokenSource != nil {
			return nil, invalid(prop, c.SASLMechanism,
				"Config.SASLOAuthTokenSource is set but only OAUTHBEARER uses it: set sasl.mechanism=OAUTHBEARER, or leave the token source out")
		}
		user, pass, err := c.saslCredentials(jaas)
		if err != nil {
			return nil, err
		}
		if c.SASLMechanism == SASLPlain {
			return sasl.Plain{Username: user, Password: pass}, nil
		}
		m, err := sasl.NewScram(c.SASLMechanism, user, pass)
		if err != nil {
			return nil, invalid(prop, c.SASLMechanism, err.Error())
		}
		return m, nil
	case SASLOAuthBearer:
		if c.SASLUsername != "" || c.SASLPassword != "" {
			return nil, invalid(prop, c.SASLMechanism,
				"Config.SASLUsername or SASLPassword is set but OAUTHBEARER does not use them: give the token through Config.SASLOAuthTokenSource, or use PLAIN or SCRAM")
		}
		return c.oauthMechanism(jaas)
	case SASLGSSAPI:
		return nil, invalid(prop, c.SASLMechanism,
			"GSSAPI (Kerberos), Java's default, is not supported by kprod: set sasl.mechanism to PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	case "":
		return nil, invalid(prop, "", "must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"+zeroHint)
	default:
		return nil, invalid(prop, c.SASLMechanism, "must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (kprod does not implement others, such as AWS_MSK_IAM)")
	}
}

// saslCredentials is the user and password for PLAIN and SCRAM: from
// sasl.jaas.config (PlainLoginModule or ScramLoginModule, either works
// with either mechanism, as in Java) or from SASLUsername and
// SASLPassword, not both.
func (c *Config) saslCredentials(jaas *sasl.JAAS) (user, pass string, err error) {
	if jaas != nil {
		if c.SASLUsername != "" || c.SASLPassword != "" {
			return "", "", invalid("sasl.jaas.config", c.SASLJAASConfig,
				"Config.SASLUsername or SASLPassword is set too: give the credentials in one place")
		}
		if jaas.Module != sasl.PlainLoginModule && jaas.Module != sasl.ScramLoginModule {
			return "", "", invalid("sasl.jaas.config", c.SASLJAASConfig, fmt.Sprintf(
				"sasl.mechanism=%s needs %s or %s, not %s", c.SASLMechanism, sasl.PlainLoginModule, sasl.ScramLoginModule, sasl.ModuleName(jaas.Module)))
		}
		if v, ok := jaas.Options["tokenauth"]; ok && strings.EqualFold(strings.TrimSpace(v), "true") {
			// Java's ScramLoginModule then authenticates with a delegation
			// token (the tokenauth SCRAM extension); sent as a user, the
			// token id would only be refused.
			return "", "", invalid("sasl.jaas.config", c.SASLJAASConfig,
				`has tokenauth="true": kprod does not support delegation tokens; authenticate as a SCRAM user or with OAUTHBEARER`)
		}
		user, pass = jaas.Options["username"], jaas.Options["password"]
		if user == "" {
			return "", "", invalid("sasl.jaas.config", c.SASLJAASConfig, `has no username="..." option`)
		}
		if pass == "" {
			return "", "", invalid("sasl.jaas.config", c.SASLJAASConfig, `has no password="..." option`)
		}
		return user, pass, nil
	}
	if c.SASLUsername == "" {
		return "", "", invalid("sasl.jaas.config", "", fmt.Sprintf(
			`sasl.mechanism=%s needs a user and password: set sasl.jaas.config (%s required username="..." password="...";) or Config.SASLUsername and SASLPassword`,
			c.SASLMechanism, sasl.PlainLoginModule))
	}
	if c.SASLPassword == "" {
		return "", "", invalid("sasl.jaas.config", "", "Config.SASLUsername is set but SASLPassword is empty")
	}
	return c.SASLUsername, c.SASLPassword, nil
}

// oauthMechanism is OAUTHBEARER with SASLOAuthTokenSource, or with the
// unsecured token that Java's default login callback handler makes from
// OAuthBearerLoginModule's unsecuredLoginStringClaim_sub (development
// only).
func (c *Config) oauthMechanism(jaas *sasl.JAAS) (sasl.Mechanism, error) {
	if src := c.SASLOAuthTokenSource; src != nil {
		return sasl.OAuthBearer{Source: func(ctx context.Context) (sasl.Token, error) {
			t, err := src.Token(ctx)
			return sasl.Token{Value: t.Value, Expiry: t.Expiry, Extensions: t.Extensions}, err
		}}, nil
	}
	const need = "sasl.mechanism=OAUTHBEARER needs Config.SASLOAuthTokenSource (kprod does not fetch tokens from sasl.oauthbearer.token.endpoint.url itself)"
	if jaas == nil {
		return nil, invalid("sasl.jaas.config", "", need)
	}
	if jaas.Module != sasl.OAuthBearerLoginModule {
		return nil, invalid("sasl.jaas.config", c.SASLJAASConfig, fmt.Sprintf("sasl.mechanism=OAUTHBEARER needs %s, not %s",
			sasl.OAuthBearerLoginModule, sasl.ModuleName(jaas.Module)))
	}
	unsecured := false
	for k := range jaas.Options {
		unsecured = unsecured || strings.HasPrefix(k, "unsecuredLogin")
	}
	if !unsecured {
		return nil, invalid("sasl.jaas.config", c.SASLJAASConfig, need+", or, for development, OAuthBearerLoginModule's unsecuredLoginStringClaim_sub")
	}
	opts := jaas.Options
	if _, err := sasl.UnsecuredToken(opts, time.Now()); err != nil {
		return nil, invalid("sasl.jaas.config", c.SASLJAASConfig, err.Error())
	}
	return sasl.OAuthBearer{Source: func(context.Context) (sasl.Token, error) {
		return sasl.UnsecuredToken(opts, time.Now())
	}}, nil
}

// secretProperties hold passwords or keys: errors never show their values.
var secretProperties = []string{
	"sasl.jaas.config", "ssl.key.password", "ssl.keystore.key",
	"ssl.keystore.password", "ssl.truststore.password",
}

func isSecret(prop string) bool { return slices.Contains(secretProperties, prop) }
