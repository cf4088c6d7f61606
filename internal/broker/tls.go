package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/kprod/kprod/kerr"
)

// startTLS wraps the connection in TLS and completes the handshake within
// ctx (the setup timeout). The handshake happens before anything else, so
// that ApiVersions and SASL already travel encrypted.
func (c *Conn) startTLS(ctx context.Context) error {
	cfg := c.cfg.TLS.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(c.addr); err == nil {
			cfg.ServerName = host
		}
	}
	tc := tls.Client(c.nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return tlsError(ctx, cfg.ServerName, err)
	}
	c.nc = tc
	c.tls = true
	return nil
}

// Hints for a security.protocol that does not match the listener.
const (
	hintPlaintextListener = "is the listener plaintext? security.protocol SSL and SASL_SSL need a TLS listener; use PLAINTEXT or SASL_PLAINTEXT for this one, or the broker's TLS port"
	hintTLSListener       = "is the listener TLS? set security.protocol to SSL (or SASL_SSL if it also uses SASL), or use the broker's plaintext port"
	hintClientCert        = "the listener wants a client certificate it trusts (mutual TLS, ssl.client.auth=required): set ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key, to a certificate signed by a CA in the broker's truststore"
)

// tlsError turns a failed TLS handshake into an error that says which
// case it is. Certificate problems and alerts the broker sent are ErrTLS
// alone (not retriable: trying again gives the same answer). A closed
// connection or a timeout is transient, so ErrTLS and ErrDial once
// setupError wrapped it (retriable): that is how
// a plaintext listener answers a ClientHello (Kafka reads it as a huge
// request size and closes), but a broker that is shutting down does the
// same.
func tlsError(ctx context.Context, serverName string, err error) error {
	var (
		hostErr  x509.HostnameError
		authErr  x509.UnknownAuthorityError
		certErr  x509.CertificateInvalidError
		recErr   tls.RecordHeaderError
		cbErr    x509.ConstraintViolationError
		verifErr *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &hostErr):
		names := hostErr.Certificate.DNSNames
		for _, ip := range hostErr.Certificate.IPAddresses {
			names = append(names, ip.String())
		}
		if len(names) == 0 && hostErr.Certificate.Subject.CommonName == "" {
			return fmt.Errorf("%w: the broker's certificate names no host at all (no SAN, no CN): reissue it with %q as a DNS or IP subject alternative name (%v)",
				kerr.ErrTLS, serverName, err)
		}
		if len(names) == 0 {
			// The Java client (JSSE) would fall back to the subject's CN
			// here; Go, and so kprod, checks only subject alternative
			// names (RFC 6125), so the fix is the certificate.
			return fmt.Errorf("%w: the broker's certificate lists no subject alternative name (SAN), only CN %q, and kprod checks host names against SANs only (the Java client also accepts the CN): reissue the certificate with %q as a DNS or IP SAN (%v)",
				kerr.ErrTLS, hostErr.Certificate.Subject.CommonName, serverName, err)
		}
		return fmt.Errorf("%w: the broker's certificate is not for %q, it is for %s: connect to the broker by a name the certificate lists (check the broker's advertised.listeners), or reissue the certificate with %q as a SAN; an empty ssl.endpoint.identification.algorithm skips the check, but lets anyone with a certificate from the same CA pose as the broker: for tests only (%v)",
			kerr.ErrTLS, serverName, strings.Join(names, ", "), serverName, err)
	case errors.As(err, &authErr):
		issuer := "unknown"
		if authErr.Cert != nil {
			issuer = authErr.Cert.Issuer.String()
		}
		return fmt.Errorf("%w: the broker's certificate is signed by an authority we do not trust (issuer %q): add that CA to ssl.truststore.location or ssl.truststore.certificates (%v)",
			kerr.ErrTLS, issuer, err)
	case errors.As(err, &certErr):
		what := "is not valid"
		switch certErr.Reason {
		case x509.Expired:
			what = "has expired or is not valid yet (check the broker's certificate and this machine's clock)"
		case x509.IncompatibleUsage:
			what = "is not for TLS servers (extended key usage)"
		case x509.NotAuthorizedToSign:
			what = "chain has a certificate that is not a CA"
		}
		return fmt.Errorf("%w: the broker's certificate %s (%v)", kerr.ErrTLS, what, err)
	case errors.As(err, &cbErr), errors.As(err, &verifErr):
		return fmt.Errorf("%w: the broker's certificate was rejected: %v", kerr.ErrTLS, err)
	case errors.As(err, &recErr):
		return fmt.Errorf("%w: the broker did not answer in TLS (%v): %s", kerr.ErrTLS, err, hintPlaintextListener)
	case isRemoteAlert(err):
		return alertError(err)
	case ctx.Err() != nil || isTimeout(err):
		return transient{fmt.Errorf("%w: no TLS handshake answer within the setup timeout: %s", kerr.ErrTLS, hintPlaintextListener)}
	case isClosed(err):
		return transient{fmt.Errorf("%w: the broker closed the connection during the TLS handshake (%v): %s", kerr.ErrTLS, err, hintPlaintextListener)}
	case strings.HasPrefix(err.Error(), "tls: "):
		// Go's own refusals: no version or cipher suite in common, a
		// server that picked something we did not offer...
		return fmt.Errorf("%w: %v; check ssl.enabled.protocols, ssl.protocol and ssl.cipher.suites", kerr.ErrTLS, err)
	default:
		return transient{fmt.Errorf("%w: %v", kerr.ErrTLS, err)}
	}
}

// transient marks a setup error that says what is likely wrong but that
// a retry may not meet again (a closed connection, a timeout): setupError
// wraps it in ErrDial, which is retriable, without the generic hint.
type transient struct{ error }

func (t transient) Unwrap() error { return t.error }

// isRemoteAlert reports whether err is a TLS alert the broker sent: Go
// reports those as a *net.OpError with Op "remote error".
func isRemoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// alertError explains an alert from the broker. With TLS 1.3 the broker
// checks our certificate after our side of the handshake is done, so its
// "certificate required" arrives on the first read, during ApiVersions:
// that path comes here too.
func alertError(err error) error {
	msg := err.Error()
	var hint string
	switch {
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"),
		strings.Contains(msg, "unknown certificate authority"), strings.Contains(msg, "certificate unknown"),
		strings.Contains(msg, "unsupported certificate"), strings.Contains(msg, "certificate expired"),
		strings.Contains(msg, "certificate revoked"), strings.Contains(msg, "access denied"):
		hint = hintClientCert
	case strings.Contains(msg, "protocol version"):
		hint = "no TLS version in common with the broker: check ssl.enabled.protocols and ssl.protocol (kprod speaks TLSv1.2 and TLSv1.3) against the broker's ssl.enabled.protocols"
	case strings.Contains(msg, "handshake failure"), strings.Contains(msg, "insufficient security"):
		hint = "no cipher suite or signature algorithm in common with the broker: check ssl.cipher.suites and ssl.enabled.protocols"
	default:
		hint = "see the broker's log for why"
	}
	return fmt.Errorf("%w: the broker refused the TLS handshake (%v): %s", kerr.ErrTLS, err, hint)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isClosed reports an end of stream or a reset from the peer.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// looksLikeTLS reports whether the first bytes read as a Kafka response
// size are a TLS record header instead: content type 20..24 and major
// version 3. As a size that would be over 335 MB, which no Kafka response
// is, so a plaintext connection to a TLS listener shows here (Kafka's TLS
// engine answers the bytes of ApiVersions with an alert).
func looksLikeTLS(hdr []byte) bool {
	return len(hdr) >= 2 && hdr[0] >= 20 && hdr[0] <= 24 && hdr[1] == 3
}
