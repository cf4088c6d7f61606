package sasl

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Token is an OAuth 2 bearer token for OAUTHBEARER.
type Token struct {
	// Value is the token as sent to the broker (a JWT, usually).
	Value string
	// Expiry is when the token stops being valid; zero if unknown. A
	// token already expired is not sent.
	Expiry time.Time
	// Extensions are SASL extensions sent with the token (KIP-342), for
	// example Confluent Cloud's logicalCluster and identityPoolId.
	Extensions map[string]string
}

// OAuthBearer is the OAUTHBEARER mechanism (RFC 7628, KIP-255). Source
// is asked for a token on every exchange, so on every re-authentication
// too: it should cache a token and refresh it before it expires.
type OAuthBearer struct {
	Source func(ctx context.Context) (Token, error)
}

// SourceError is the token source's failure. The identity provider may
// be unreachable for a moment, so the connection is tried again later,
// as the Java client retries a failed token refresh, rather than failed
// as if the broker had refused the credentials.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return "OAUTHBEARER: the token source failed: " + e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// token calls the user's token source. A panic in it (a bug there, not
// an identity provider away for a moment) is an error, not a crash of the
// goroutine that dials, and is not tried again as a SourceError is.
func (o OAuthBearer) token(ctx context.Context) (tok Token, panicked bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			tok, panicked, err = Token{}, true, fmt.Errorf("OAUTHBEARER: the token source panicked: %v (fix Config.SASLOAuthTokenSource)", v)
		}
	}()
	tok, err = o.Source(ctx)
	return tok, false, err
}

// Name returns "OAUTHBEARER".
func (OAuthBearer) Name() string { return "OAUTHBEARER" }

// extensionKey and extensionValue are RFC 7628's grammar of a SASL
// extension (Java's OAuthBearerClientInitialResponse checks the same);
// "auth" is reserved for the token. bearerToken is what a broker accepts
// as the token (RFC 6750's b64token, Java's AUTH_PATTERN): anything else
// it refuses as invalid credentials, so the client says so first.
var (
	extensionKey   = regexp.MustCompile(`^[A-Za-z]+$`)
	extensionValue = regexp.MustCompile("^[\x21-\x7E \t\r\n]+$")
	bearerToken    = regexp.MustCompile(`^[-_~+/.a-zA-Z0-9]+=*$`)
)

// ValidateExtensions checks SASL extensions as Java does before it sends
// them: a name of letters only, not "auth"; a value of printable ASCII
// (spaces, tabs and line breaks allowed), not empty.
func ValidateExtensions(ext map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(ext)) {
		if !extensionKey.MatchString(k) || k == "auth" {
			return fmt.Errorf("OAUTHBEARER: SASL extension name %q is invalid: it must be letters only, and not \"auth\"", k)
		}
		if !extensionValue.MatchString(ext[k]) {
			what := "has characters other than printable ASCII, spaces, tabs and line breaks"
			if ext[k] == "" {
				what = "is empty (an unset variable?)"
			}
			return fmt.Errorf("OAUTHBEARER: the value of SASL extension %q %s; a broker would refuse the login as invalid credentials", k, what)
		}
	}
	return nil
}

// Start gets a token and returns the client's initial response:
// gs2-header, then auth=Bearer <token> and the extensions, each ended by
// ^A, and a final ^A.
func (o OAuthBearer) Start(ctx context.Context) (Session, []byte, error) {
	if o.Source == nil {
		return nil, nil, errors.New("OAUTHBEARER: no token source")
	}
	tok, panicked, err := o.token(ctx)
	if panicked {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, &SourceError{Err: err}
	}
	if strings.TrimSpace(tok.Value) == "" {
		return nil, nil, errors.New("OAUTHBEARER: the token source returned an empty token")
	}
	if !bearerToken.MatchString(tok.Value) {
		return nil, nil, errors.New("OAUTHBEARER: the token source returned a token with characters a broker refuses (a bearer token is letters, digits and -._~+/, then any '='s: quotes or spaces left on?)")
	}
	if err := ValidateExtensions(tok.Extensions); err != nil {
		return nil, nil, err
	}
	if !tok.Expiry.IsZero() && !time.Now().Before(tok.Expiry) {
		return nil, nil, fmt.Errorf("OAUTHBEARER: the token source returned a token that expired at %s; it must return a fresh one",
			tok.Expiry.UTC().Format(time.RFC3339))
	}
	var b strings.Builder
	b.WriteString("n,,\x01auth=Bearer ")
	b.WriteString(tok.Value)
	b.WriteByte(1)
	for _, k := range slices.Sorted(maps.Keys(tok.Extensions)) {
		v := tok.Extensions[k]
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte(1)
	}
	b.WriteByte(1)
	return &oauthSession{}, []byte(b.String()), nil
}

type oauthSession struct {
	status string // the server's error challenge, if it sent one
}

// Next: an empty server message is success. Anything else is the
// server's JSON error status (RFC 7628 §3.2.2), which the client must
// acknowledge with a lone ^A; the server then fails the exchange.
func (s *oauthSession) Next(server []byte) (bool, []byte, error) {
	if len(server) == 0 {
		return true, nil, nil
	}
	if s.status != "" {
		return false, nil, fmt.Errorf("OAUTHBEARER: the broker sent a second challenge after its error %s", s.status)
	}
	s.status = string(server)
	return false, []byte{1}, nil
}

// Describe returns the server's error status, if any.
func (s *oauthSession) Describe() string {
	if s.status == "" {
		return ""
	}
	return "the broker's OAUTHBEARER error status is " + s.status
}

// UnsecuredToken builds the unsecured JWS (alg "none") that Java's
// default OAUTHBEARER login callback handler
// (OAuthBearerUnsecuredLoginCallbackHandler) makes from the options of
// OAuthBearerLoginModule in sasl.jaas.config. Brokers accept it only with
// the unsecured validator: for development and tests, never production.
//
// Options, as in Java: unsecuredLoginStringClaim_<name>,
// unsecuredLoginNumberClaim_<name>, unsecuredLoginListClaim_<name> (the
// first character is the separator), unsecuredLoginExtension_<name>,
// unsecuredLoginPrincipalClaimName (default sub, which must be given),
// unsecuredLoginLifetimeSeconds (default 3600).
func UnsecuredToken(options map[string]string, now time.Time) (Token, error) {
	const (
		strPrefix = "unsecuredLoginStringClaim_"
		numPrefix = "unsecuredLoginNumberClaim_"
		lstPrefix = "unsecuredLoginListClaim_"
		extPrefix = "unsecuredLoginExtension_"
	)
	claims := map[string]any{}
	ext := map[string]string{}
	principal := "sub"
	lifetime := 3600.0
	for k, v := range options {
		switch {
		case strings.HasPrefix(k, strPrefix):
			claims[strings.TrimPrefix(k, strPrefix)] = v
		case strings.HasPrefix(k, numPrefix):
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return Token{}, fmt.Errorf("OAuthBearerLoginModule option %s is not a number", k)
			}
			claims[strings.TrimPrefix(k, numPrefix)] = n
		case strings.HasPrefix(k, lstPrefix):
			list := []string{} // [] in the JSON, as Java's, for "" or a lone separator
			if len(v) > 1 {
				list = strings.Split(v[1:], v[:1])
			}
			claims[strings.TrimPrefix(k, lstPrefix)] = list
		case strings.HasPrefix(k, extPrefix):
			ext[strings.TrimPrefix(k, extPrefix)] = v
		case k == "unsecuredLoginPrincipalClaimName":
			principal = v
		case k == "unsecuredLoginLifetimeSeconds":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n <= 0 {
				return Token{}, errors.New("OAuthBearerLoginModule option unsecuredLoginLifetimeSeconds must be a positive number")
			}
			lifetime = n
		}
	}
	if s, ok := claims[principal].(string); !ok || s == "" {
		return Token{}, fmt.Errorf("OAuthBearerLoginModule: set unsecuredLoginStringClaim_%s to the principal name (or give Config.SASLOAuthTokenSource)", principal)
	}
	for _, reserved := range []string{"iat", "exp"} {
		if _, ok := claims[reserved]; ok {
			return Token{}, fmt.Errorf("OAuthBearerLoginModule: the %q claim is set from unsecuredLoginLifetimeSeconds, not given", reserved)
		}
	}
	iat := float64(now.UnixMilli()) / 1000
	claims["iat"] = iat
	claims["exp"] = iat + lifetime
	body, err := json.Marshal(claims)
	if err != nil {
		return Token{}, err
	}
	enc := base64.RawURLEncoding
	value := enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(body) + "."
	expiry := now.Add(time.Duration(lifetime * float64(time.Second)))
	if len(ext) == 0 {
		ext = nil
	}
	if err := ValidateExtensions(ext); err != nil { // as Java's handler, at login
		return Token{}, fmt.Errorf("OAuthBearerLoginModule's unsecuredLoginExtension_ options: %w", err)
	}
	return Token{Value: value, Expiry: expiry, Extensions: ext}, nil
}
