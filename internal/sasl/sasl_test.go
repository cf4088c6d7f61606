package sasl

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xdg-go/scram"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		in     string
		module string
		opts   map[string]string
	}{
		{
			`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`,
			PlainLoginModule, map[string]string{"username": "alice", "password": "alice-secret"},
		},
		{
			// Unquoted values, odd spacing, a comment, upper-case flag.
			"  org.apache.kafka.common.security.scram.ScramLoginModule  REQUIRED\n\tusername = bob /* the user */ password=p4ss ; ",
			ScramLoginModule, map[string]string{"username": "bob", "password": "p4ss"},
		},
		{
			// Quoted values keep spaces, ';' and '=', and backslash escapes.
			`org.apache.kafka.common.security.plain.PlainLoginModule required username="a b" password="x;y=z \"q\" \\";`,
			PlainLoginModule, map[string]string{"username": "a b", "password": `x;y=z "q" \`},
		},
		{
			`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="svc" unsecuredLoginExtension_traceId="123";`,
			OAuthBearerLoginModule, map[string]string{"unsecuredLoginStringClaim_sub": "svc", "unsecuredLoginExtension_traceId": "123"},
		},
		{
			`org.apache.kafka.common.security.plain.PlainLoginModule required password="";`,
			PlainLoginModule, map[string]string{"password": ""},
		},
		{
			// Single quotes are quotes too, as in Java's StreamTokenizer.
			`org.apache.kafka.common.security.plain.PlainLoginModule required username='alice' password='it"s';`,
			PlainLoginModule, map[string]string{"username": "alice", "password": `it"s`},
		},
		{
			// StreamTokenizer's escapes: octal (at most \377), \a, \v.
			`org.apache.kafka.common.security.plain.PlainLoginModule required username="a\101b\vc" password="\0\477\a";`,
			PlainLoginModule, map[string]string{"username": "aAb\x0bc", "password": "\x00" + "\x277" + "\x07"},
		},
		{
			// A quoted class, flag or option name, as Java's tokenizer
			// reads any token quoted or not.
			`"org.apache.kafka.common.security.plain.PlainLoginModule" 'required' "username"="a" 'password'=b;`,
			PlainLoginModule, map[string]string{"username": "a", "password": "b"},
		},
	} {
		j, err := ParseJAAS(tc.in)
		if err != nil {
			t.Errorf("ParseJAAS(%q): %v", tc.in, err)
			continue
		}
		if j.Module != tc.module || j.Flag != "required" {
			t.Errorf("ParseJAAS(%q) = module %q flag %q", tc.in, j.Module, j.Flag)
		}
		if len(j.Options) != len(tc.opts) {
			t.Errorf("ParseJAAS(%q) options = %q, want %q", tc.in, j.Options, tc.opts)
		}
		for k, v := range tc.opts {
			if j.Options[k] != v {
				t.Errorf("ParseJAAS(%q) option %s = %q, want %q", tc.in, k, j.Options[k], v)
			}
		}
	}
}

func TestParseJAASErrorsHideValues(t *testing.T) {
	const secret = "s3cr3t-value"
	for _, in := range []string{
		``,
		`org.apache.kafka.common.security.plain.PlainLoginModule`,
		`org.apache.kafka.common.security.plain.PlainLoginModule mandatory username="u" password="` + secret + `";`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secret + `"`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="` + secret,
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password=` + secret + ` x;`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required password="` + secret + `"; other required;`,
	} {
		_, err := ParseJAAS(in)
		if err == nil {
			t.Errorf("ParseJAAS(%q) succeeded", in)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseJAAS error shows the password: %v", err)
		}
	}
}

// TestParseJAASErrorsHideSecretWords: a bare password given as
// sasl.jaas.config parses as the login module class, and a word of an
// unquoted password with a space parses as an option name; neither may
// show in the error, which still says what is wrong.
func TestParseJAASErrorsHideSecretWords(t *testing.T) {
	for _, tc := range []struct {
		name, in, secret string
		want             []string
	}{
		{"bare password", "hunter2-bare", "hunter2-bare",
			[]string{"no control flag after an unknown login module class", "not a bare password", PlainLoginModule}},
		{"passphrase", "hunter2 bare words", "hunter2",
			[]string{"control flag of an unknown login module class", "is not required"}},
		{"unknown module without ';'", "hunter2 required", "hunter2", []string{"missing ';'", "unknown login module class"}},
		{"unquoted password with a space", PlainLoginModule + ` required username="u" password=hunter 2xq;`, "2xq",
			[]string{"option 3 of " + PlainLoginModule + " has no '=value'", "quoted"}},
		{"a word of the password before '='", PlainLoginModule + ` required password=hunter 2xq=;`, "2xq",
			[]string{"option 2 of " + PlainLoginModule + " has an empty value"}},
		{"a word of the password before a quote", PlainLoginModule + ` required password=hunter 2xq="open`, "2xq",
			[]string{"option 2 of " + PlainLoginModule + ": unterminated quoted value"}},
		// A quoted word is an option name, as in Java; the error still
		// does not show it.
		{"stray quote", PlainLoginModule + ` required password=hunter "2xq";`, "2xq", []string{"option 2 of " + PlainLoginModule + " has no '=value'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJAAS(tc.in)
			if err == nil {
				t.Fatalf("ParseJAAS(%q) succeeded", tc.in)
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("the error shows %q: %v", tc.secret, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	// Known option names are still named, and the quoted-value error is
	// still wrapped.
	_, err := ParseJAAS(PlainLoginModule + ` required username="u" password="pw-Q7z`)
	if err == nil || !strings.Contains(err.Error(), "option 2 (password) of "+PlainLoginModule) || errors.Unwrap(err) == nil {
		t.Errorf("unterminated password: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "pw-Q7z") {
		t.Errorf("the error shows the value: %v", err)
	}
}

func TestModuleName(t *testing.T) {
	for _, m := range []string{PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule, krb5LoginModule} {
		if got := ModuleName(m); got != m {
			t.Errorf("ModuleName(%s) = %q", m, got)
		}
	}
	for _, m := range []string{"hunter3", "org.apache.kafka.common.security.plain.PlainLoginModul", ""} {
		if got := ModuleName(m); strings.Contains(got, m) && m != "" || !strings.Contains(got, "unknown login module") {
			t.Errorf("ModuleName(%q) = %q", m, got)
		}
	}
}

func TestPlain(t *testing.T) {
	p := Plain{Username: "u", Password: "p"}
	s, msg, err := p.Start(context.Background())
	if err != nil || string(msg) != "\x00u\x00p" {
		t.Fatalf("Start = %q, %v", msg, err)
	}
	if done, resp, err := s.Next(nil); !done || resp != nil || err != nil {
		t.Fatalf("Next = %v %q %v", done, resp, err)
	}
	if _, _, err := (Plain{Username: "u\x00", Password: "p"}).Start(context.Background()); err == nil {
		t.Fatal("a NUL in the user name was accepted")
	}
}

// TestScram runs the client against xdg-go's SCRAM server, for both
// hashes, and with a wrong password.
func TestScram(t *testing.T) {
	for _, name := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		hash := scram.SHA256
		if name == "SCRAM-SHA-512" {
			hash = scram.SHA512
		}
		// Kafka escapes ',' and '=' in user names; the password is not
		// normalized (no SASLprep).
		const user, pass = "us,er=1", "pässword\u2168"
		cl, _ := hash.NewClientUnprepped(user, pass, "")
		creds := cl.GetStoredCredentials(scram.KeyFactors{Salt: "salty", Iters: 4096})
		srv, err := hash.NewServer(func(u string) (scram.StoredCredentials, error) {
			if u != user {
				t.Errorf("server saw user %q", u)
			}
			return creds, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			pass string
			ok   bool
		}{{pass, true}, {"wrong", false}} {
			m, err := NewScram(name, user, tc.pass)
			if err != nil {
				t.Fatal(err)
			}
			conv := srv.NewConversation()
			sess, msg, err := m.Start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var done bool
			for i := 0; !done && i < 4; i++ {
				reply, err := conv.Step(string(msg))
				if err != nil {
					if tc.ok {
						t.Fatalf("%s: server: %v", name, err)
					}
					if strings.Contains(err.Error(), tc.pass) {
						t.Errorf("the error shows the password: %v", err)
					}
					break
				}
				done, msg, err = sess.Next([]byte(reply))
				if err != nil {
					t.Fatalf("%s: client: %v", name, err)
				}
			}
			if done != tc.ok {
				t.Errorf("%s with password ok=%v: done = %v", name, tc.ok, done)
			}
		}
	}
	if _, err := NewScram("SCRAM-SHA-1", "u", "p"); err == nil {
		t.Error("SCRAM-SHA-1 accepted; Kafka does not have it")
	}
}

func TestOAuthBearerMessage(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	m := OAuthBearer{Source: func(context.Context) (Token, error) {
		return Token{Value: "tok.en.", Expiry: exp, Extensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}}, nil
	}}
	s, msg, err := m.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "n,,\x01auth=Bearer tok.en.\x01identityPoolId=pool-2\x01logicalCluster=lkc-1\x01\x01"
	if string(msg) != want {
		t.Fatalf("initial response %q, want %q", msg, want)
	}
	// Failure: the server sends its JSON status; the client answers ^A.
	done, resp, err := s.Next([]byte(`{"status":"invalid_token"}`))
	if done || string(resp) != "\x01" || err != nil {
		t.Fatalf("Next(error status) = %v %q %v", done, resp, err)
	}
	if d := s.(Describer).Describe(); !strings.Contains(d, "invalid_token") {
		t.Errorf("Describe = %q", d)
	}

	for _, bad := range []Token{
		{Value: ""},
		{Value: "a b"},
		{Value: "x", Expiry: time.Now().Add(-time.Second)},
		{Value: "x", Extensions: map[string]string{"auth": "v"}},
		{Value: "x", Extensions: map[string]string{"bad-key": "v"}},
		// What Java's client refuses, and a broker refuses as invalid
		// credentials: an empty or non-ASCII extension value, a token
		// outside RFC 6750's b64token (quotes left on, non-ASCII).
		{Value: "x", Extensions: map[string]string{"identityPoolId": ""}},
		{Value: "x", Extensions: map[string]string{"identityPoolId": "poolé"}},
		{Value: "x", Extensions: map[string]string{"identityPoolId": "a\x00b"}},
		{Value: `"eyJ.a.b"`},
		{Value: "tök"},
		{Value: "a=b"},
	} {
		m := OAuthBearer{Source: func(context.Context) (Token, error) { return bad, nil }}
		if _, _, err := m.Start(context.Background()); err == nil {
			t.Errorf("token %+v accepted", bad)
		} else if bad.Value == "x" && strings.Contains(err.Error(), "auth=") {
			t.Errorf("the error shows the token: %v", err)
		}
	}
}

func TestUnsecuredToken(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tok, err := UnsecuredToken(map[string]string{
		"unsecuredLoginStringClaim_sub":   "alice",
		"unsecuredLoginNumberClaim_n":     "42",
		"unsecuredLoginListClaim_scope":   ",a,b",
		"unsecuredLoginExtension_traceId": "t1",
		"unsecuredLoginLifetimeSeconds":   "60",
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok.Value, ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("token %q is not an unsecured JWS", tok.Value)
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if string(hdr) != `{"alg":"none"}` {
		t.Errorf("header %s", hdr)
	}
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if err := json.Unmarshal(body, &claims); err != nil {
		t.Fatal(err)
	}
	if claims["sub"] != "alice" || claims["n"] != 42.0 || claims["exp"] != 1700000060.0 || claims["iat"] != 1700000000.0 {
		t.Errorf("claims %v", claims)
	}
	if l, _ := claims["scope"].([]any); len(l) != 2 {
		t.Errorf("scope claim %v", claims["scope"])
	}
	if !tok.Expiry.Equal(now.Add(time.Minute)) || tok.Extensions["traceId"] != "t1" {
		t.Errorf("expiry %v extensions %v", tok.Expiry, tok.Extensions)
	}
	if _, err := UnsecuredToken(map[string]string{}, now); err == nil || !strings.Contains(err.Error(), "unsecuredLoginStringClaim_sub") {
		t.Errorf("no sub claim: %v", err)
	}
	// Extensions are checked when the token is made, as Java's handler
	// checks them at login (so Config.Validate finds them).
	for _, bad := range []string{"unsecuredLoginExtension_trace_id", "unsecuredLoginExtension_auth"} {
		if _, err := UnsecuredToken(map[string]string{"unsecuredLoginStringClaim_sub": "a", bad: "v"}, now); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if _, err := UnsecuredToken(map[string]string{"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginExtension_x": ""}, now); err == nil {
		t.Error("an empty extension value accepted")
	}
	// An empty list claim is [], as in Java, not null.
	for _, v := range []string{"", ","} {
		tok, err := UnsecuredToken(map[string]string{"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginListClaim_scope": v}, now)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok.Value, ".")[1])
		if !strings.Contains(string(body), `"scope":[]`) {
			t.Errorf("list claim %q: %s, want \"scope\":[]", v, body)
		}
	}
}

// A token source that panics fails the login with an error that says so;
// the panic does not take down the goroutine that dials, and the error is
// not a SourceError (tried again as an identity provider away for a
// moment would be).
func TestOAuthBearerSourcePanics(t *testing.T) {
	m := OAuthBearer{Source: func(context.Context) (Token, error) { panic("no token today") }}
	_, _, err := m.Start(context.Background())
	var se *SourceError
	if err == nil || !strings.Contains(err.Error(), "panicked: no token today") || errors.As(err, &se) {
		t.Fatalf("Start with a panicking source: %v, want an error naming the panic, not a SourceError", err)
	}
}
