// Package sasl holds the SASL mechanisms kprod speaks to Kafka brokers:
// PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, with
// github.com/xdg-go/scram) and OAUTHBEARER (RFC 7628, KIP-255), and a
// parser for the JAAS configuration that Java clients give in
// sasl.jaas.config.
//
// The exchange itself (SaslHandshake v1 and SaslAuthenticate, KIP-152, and
// re-authentication, KIP-368) is internal/broker's: a Mechanism only turns
// server messages into client messages.
//
// Secrets: no error or String of this package contains a password, a
// token or a private key; errors may name the user.
package sasl

import "context"

// Mechanism is one SASL mechanism with its credentials. It is safe for
// concurrent use: every connection (and every re-authentication) starts
// its own Session.
type Mechanism interface {
	// Name is the mechanism's name as Kafka spells it ("PLAIN",
	// "SCRAM-SHA-512", ...): what SaslHandshake asks for.
	Name() string

	// Start begins one exchange and returns the client's first message.
	// ctx bounds what Start may wait for (an OAuth token).
	Start(ctx context.Context) (Session, []byte, error)
}

// Session is one exchange in progress.
type Session interface {
	// Next takes the server's message (the auth bytes of a successful
	// SaslAuthenticate response) and returns the client's next message.
	// done means the exchange is complete and the server was verified
	// where the mechanism can (SCRAM's server signature): nothing more is
	// sent.
	Next(server []byte) (done bool, response []byte, err error)
}

// Describer is implemented by sessions that can add to the broker's
// message when the broker fails the exchange (OAUTHBEARER's error
// status from the server's challenge).
type Describer interface {
	Describe() string
}

// Principal is implemented by mechanisms that authenticate as a named
// user, for error messages ("as user alice").
type Principal interface {
	User() string
}
