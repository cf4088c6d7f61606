package sasl

import (
	"context"
	"errors"
	"strings"
)

// Plain is the PLAIN mechanism (RFC 4616): the user and password are sent
// as they are, so use it only over TLS (SASL_SSL) outside tests.
type Plain struct {
	Username string
	Password string
}

// Name returns "PLAIN".
func (Plain) Name() string { return "PLAIN" }

// User returns the user name.
func (p Plain) User() string { return p.Username }

// Start returns the one message PLAIN sends: authzid (empty), user and
// password, separated by NUL.
func (p Plain) Start(context.Context) (Session, []byte, error) {
	if strings.ContainsRune(p.Username, 0) || strings.ContainsRune(p.Password, 0) {
		return nil, nil, errors.New("PLAIN: the user name and password must not contain NUL characters")
	}
	msg := make([]byte, 0, 2+len(p.Username)+len(p.Password))
	msg = append(msg, 0)
	msg = append(msg, p.Username...)
	msg = append(msg, 0)
	msg = append(msg, p.Password...)
	return plainSession{}, msg, nil
}

type plainSession struct{}

// Next accepts the server's (empty) answer: PLAIN is one round trip, and
// a wrong password comes back as the SaslAuthenticate error code.
func (plainSession) Next([]byte) (bool, []byte, error) { return true, nil, nil }
