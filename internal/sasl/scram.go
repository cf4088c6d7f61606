package sasl

import (
	"context"
	"fmt"

	"github.com/xdg-go/scram"
)

// Scram is SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802, RFC 7677; KIP-84).
// The password never crosses the wire; the server proves it knows the
// stored credentials too.
type Scram struct {
	name   string
	user   string
	client *scram.Client // caches the salted password between exchanges
}

// NewScram returns the mechanism named name ("SCRAM-SHA-256" or
// "SCRAM-SHA-512") for user and password.
//
// The user and password are used as given, without SASLprep (RFC 4013):
// Kafka's ScramFormatter does not normalize them either, so a password
// that SASLprep would change still matches what the broker stored.
func NewScram(name, user, password string) (*Scram, error) {
	var hash scram.HashGeneratorFcn
	switch name {
	case "SCRAM-SHA-256":
		hash = scram.SHA256
	case "SCRAM-SHA-512":
		hash = scram.SHA512
	default:
		return nil, fmt.Errorf("unknown SCRAM mechanism %q; Kafka has SCRAM-SHA-256 and SCRAM-SHA-512", name)
	}
	c, err := hash.NewClientUnprepped(user, password, "")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// Kafka's minimum (ScramMechanism.minIterations) is 4096, which is
	// also the library's default floor.
	return &Scram{name: name, user: user, client: c}, nil
}

// Name returns SCRAM-SHA-256 or SCRAM-SHA-512.
func (s *Scram) Name() string { return s.name }

// User returns the user name.
func (s *Scram) User() string { return s.user }

// Start returns the client-first message.
func (s *Scram) Start(context.Context) (Session, []byte, error) {
	conv := s.client.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.name, err)
	}
	return &scramSession{name: s.name, conv: conv}, []byte(first), nil
}

type scramSession struct {
	name string
	conv *scram.ClientConversation
}

// Next answers server-first with client-final, then checks the server's
// signature in server-final.
func (s *scramSession) Next(server []byte) (bool, []byte, error) {
	resp, err := s.conv.Step(string(server))
	if err != nil {
		// The library's errors quote the server's message, never the
		// password or the keys derived from it.
		return false, nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if s.conv.Done() {
		if !s.conv.Valid() {
			return false, nil, fmt.Errorf("%s: the broker's final message does not prove it knows the credentials", s.name)
		}
		return true, nil, nil
	}
	return false, []byte(resp), nil
}
