package kprod

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// oauthClient is an OAuthTokenSource held by value, whose fields fmt
// would print if Config were printed as a plain struct.
type oauthClient struct{ ClientSecret string }

func (o oauthClient) Token(context.Context) (OAuthToken, error) { return OAuthToken{}, nil }

// apiKeyInterceptor is an Interceptor held by value with a secret field.
type apiKeyInterceptor struct{ APIKey string }

func (apiKeyInterceptor) OnSend(r *Record) *Record               { return r }
func (apiKeyInterceptor) OnAcknowledgement(r *Record, err error) {}

const redactBroker = "broker-1.example:9092"

// secretConfig is a Config with every secret, and every field that can
// reach one, set to a distinctive value; it returns those values.
func secretConfig() (Config, []string) {
	secrets := []string{
		"sasl-password-Zq81", "jaas-password-Xw42", "key-password-Rt93",
		"keystore-key-Mn57", "oauth-secret-Pk64", "interceptor-secret-Lb28",
		"tls-private-key-Hs35",
	}
	c := DefaultConfig()
	c.BootstrapServers = []string{redactBroker}
	c.SecurityProtocol = SecuritySASLSSL
	c.SASLMechanism = SASLPlain
	c.SASLUsername = "alice"
	c.SASLPassword = secrets[0]
	c.SASLJAASConfig = `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + secrets[1] + `";`
	c.SSLKeyPassword = secrets[2]
	c.SSLKeystoreKey = "-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + secrets[3] + "\n-----END ENCRYPTED PRIVATE KEY-----\n"
	c.SASLOAuthTokenSource = oauthClient{ClientSecret: secrets[4]}
	c.Interceptors = []Interceptor{apiKeyInterceptor{APIKey: secrets[5]}, InterceptorFuncs{}}
	c.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{PrivateKey: secrets[6]}}}
	c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) { return nil, nil }
	c.Logger = slog.New(slog.DiscardHandler)
	c.Partitioner = RoundRobinPartitioner()
	c.EnableIdempotence = new(true)
	return c, secrets
}

// checkNoSecrets fails if out holds any of secrets, as text or in hex.
func checkNoSecrets(t *testing.T, what, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(out, s) || strings.Contains(strings.ToLower(out), hex.EncodeToString([]byte(s))) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, out)
		}
	}
}

// TestRedactFormat: every fmt verb, on a Config and a *Config, on their
// own and inside other values, hides the secrets and shows the rest.
func TestRedactFormat(t *testing.T) {
	cfg, secrets := secretConfig()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%20.3v"} {
		for _, arg := range []any{cfg, &cfg} {
			what := fmt.Sprintf("Sprintf(%q, %T)", verb, arg)
			out := fmt.Sprintf(verb, arg)
			checkNoSecrets(t, what, out, secrets)
			if strings.Contains(out, "PANIC") {
				t.Errorf("%s panicked: %s", what, out)
			}
			switch verb {
			case "%v", "%+v", "%#v", "%s":
				if !strings.Contains(out, redactBroker) {
					t.Errorf("%s does not show bootstrap servers %q:\n%s", what, redactBroker, out)
				}
			}
		}
	}
	others := map[string]string{
		"String":             cfg.String(),
		"(*Config).String":   (&cfg).String(),
		"Sprint":             fmt.Sprint(cfg),
		"Sprintln(*Config)":  fmt.Sprintln(&cfg),
		"in a struct":        fmt.Sprintf("%+v", struct{ C Config }{cfg}),
		"pointer in struct":  fmt.Sprintf("%+v", struct{ P *Config }{&cfg}),
		"in a slice (%#v)":   fmt.Sprintf("%#v", []Config{cfg}),
		"in a map of *":      fmt.Sprintf("%v", map[string]*Config{"c": &cfg}),
		"as an error's verb": fmt.Errorf("producer %v failed", &cfg).Error(),
	}
	for what, out := range others {
		checkNoSecrets(t, what, out, secrets)
		if !strings.Contains(out, redactBroker) {
			t.Errorf("%s does not show bootstrap servers:\n%s", what, out)
		}
	}

	plus := fmt.Sprintf("%+v", cfg)
	for _, want := range []string{
		"BootstrapServers:[" + redactBroker + "]", "Acks:all", "Linger:5ms", "EnableIdempotence:true",
		"SASLUsername:alice", "SASLPassword:[hidden]", "SASLJAASConfig:[hidden]",
		"SSLKeyPassword:[hidden]", "SSLKeystoreKey:[hidden]",
		"SASLOAuthTokenSource:kprod.oauthClient", "TLSConfig:*tls.Config", "Logger:*slog.Logger",
		"Partitioner:*kprod.roundRobin", "Interceptors:[kprod.apiKeyInterceptor kprod.InterceptorFuncs]",
		"Dial:func(context.Context, string, string) (net.Conn, error)",
	} {
		if !strings.Contains(plus, want) {
			t.Errorf("%%+v does not show %q:\n%s", want, plus)
		}
	}
	if v := fmt.Sprintf("%v", cfg); strings.Contains(v, "BootstrapServers") || !strings.HasPrefix(v, "{["+redactBroker+"] ") {
		t.Errorf("%%v should print the values without names, as for any struct:\n%s", v)
	}
	if s := fmt.Sprintf("%s", cfg); s != plus {
		t.Errorf("%%s = %s\nwant it as %%+v: %s", s, plus)
	}
	if gv := fmt.Sprintf("%#v", cfg); !strings.HasPrefix(gv, `kprod.Config{BootstrapServers:[]string{"`+redactBroker+`"}, ClientID:"", `) ||
		!strings.Contains(gv, `SASLPassword:"[hidden]"`) {
		t.Errorf("%%#v is not Go syntax:\n%s", gv)
	}
}

// TestRedactEmptySecrets: secrets that are not set print empty, not as
// [hidden], so that the output tells whether they are set.
func TestRedactEmptySecrets(t *testing.T) {
	out := fmt.Sprintf("%+v", DefaultConfig())
	if strings.Contains(out, hidden) || !strings.Contains(out, " SASLPassword: SASLOAuthTokenSource:<nil> ") {
		t.Errorf("empty secrets should print empty:\n%s", out)
	}
}

// TestRedactSlog: a Config or *Config given to slog is a group of its
// fields, secrets hidden, with both the JSON and the text handler.
func TestRedactSlog(t *testing.T) {
	cfg, secrets := secretConfig()
	for _, arg := range []any{cfg, &cfg} {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "cfg", arg)
		out := buf.String()
		checkNoSecrets(t, fmt.Sprintf("JSON handler (%T)", arg), out, secrets)
		var line struct{ Cfg map[string]any }
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("JSON handler wrote invalid JSON: %v\n%s", err, out)
		}
		for k, want := range map[string]any{
			"BootstrapServers": []any{redactBroker}, "Acks": "all", "Linger": "5ms",
			"BatchSize": 16384.0, "EnableIdempotence": true,
			"SASLPassword": hidden, "SASLJAASConfig": hidden, "SSLKeyPassword": hidden, "SSLKeystoreKey": hidden,
			"Dial":         "func(context.Context, string, string) (net.Conn, error)",
			"Interceptors": []any{"kprod.apiKeyInterceptor", "kprod.InterceptorFuncs"},
		} {
			if got := line.Cfg[k]; !reflect.DeepEqual(got, want) {
				t.Errorf("JSON %s = %#v, want %#v", k, got, want)
			}
		}

		buf.Reset()
		slog.New(slog.NewTextHandler(&buf, nil)).Info("starting", "cfg", arg)
		out = buf.String()
		checkNoSecrets(t, fmt.Sprintf("text handler (%T)", arg), out, secrets)
		for _, want := range []string{"cfg.BootstrapServers=[" + redactBroker + "]", "cfg.SASLPassword=[hidden]", "cfg.Acks=all"} {
			if !strings.Contains(out, want) {
				t.Errorf("text handler does not show %q:\n%s", want, out)
			}
		}
	}
}

// TestRedactNil: a nil *Config and a zero Config print without a panic.
func TestRedactNil(t *testing.T) {
	var nilCfg *Config
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, nilCfg); out != "<nil>" {
			t.Errorf("Sprintf(%q, nil *Config) = %q, want <nil>", verb, out)
		}
		if out := fmt.Sprintf(verb, Config{}); strings.Contains(out, "PANIC") {
			t.Errorf("Sprintf(%q, Config{}) = %q", verb, out)
		}
	}
	// slog recovers from the nil dereference in LogValue itself.
	slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil)).Info("m", "cfg", nilCfg)
}

// TestRedactSecretFields: the fields printing hides are those of every
// secret property (isSecret) and SASLPassword; and any string field whose
// name says it holds a secret is among them, so that a Go-only secret
// field added without a property cannot be printed by mistake.
func TestRedactSecretFields(t *testing.T) {
	secret := secretFields()
	for _, f := range []string{"SASLPassword", "SASLJAASConfig", "SSLKeyPassword", "SSLKeystoreKey"} {
		if !secret[f] {
			t.Errorf("%s is not hidden", f)
		}
	}
	for prop, set := range properties {
		if !isSecret(prop) {
			continue
		}
		const marker = "marker-Vy19"
		c := DefaultConfig()
		if err := set(&c, prop, marker); err != nil {
			t.Errorf("secret property %s rejects a plain value, so secretFields cannot find its field: %v", prop, err)
			continue
		}
		checkNoSecrets(t, prop+" printed with %+v", fmt.Sprintf("%+v", c), []string{marker})
	}
	looksSecretName := regexp.MustCompile(`(?i)password|secret|jaas|token|credential|Key$`)
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		k := f.Type.Kind()
		if k == reflect.Slice {
			k = f.Type.Elem().Kind()
		}
		if f.IsExported() && k == reflect.String && looksSecretName.MatchString(f.Name) && !secret[f.Name] {
			t.Errorf("Config.%s looks like a secret but is printed: add it to secretFields", f.Name)
		}
	}
}

// TestRedactConfigErrors: errors from Set, ConfigFromProperties and
// Validate about secret settings do not show them.
func TestRedactConfigErrors(t *testing.T) {
	const pw = "hunter2-Qe73"
	jaas := func(tail string) string {
		return `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="` + pw + `"` + tail
	}
	for name, props := range map[string]map[string]string{
		"misspelt ssl.key.password":      {"ssl.key.pasword": pw},
		"misspelt sasl.jaas.config":      {"sasl.jaas.confg": jaas(";")},
		"unknown password property":      {"sasl.password": pw},
		"jaas without its ';'":           {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas("")},
		"jaas module for another mech":   {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas(";")},
		"jaas without SASL":              {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": jaas(";")},
		"keystore key without its chain": {"security.protocol": "SSL", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\n" + pw + "\n-----END PRIVATE KEY-----\n"},
		"config provider's parameter":    {"config.providers.vault.param.vault.token": pw},
	} {
		props["bootstrap.servers"] = redactBroker
		_, err := ConfigFromProperties(props)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		checkNoSecrets(t, name, fmt.Sprintf("%v %+v", err, err), []string{pw})
	}

	c := DefaultConfig()
	c.BootstrapServers = []string{redactBroker}
	c.SASLUsername, c.SASLPassword = "alice", pw
	err := c.Validate() // SASL credentials with PLAINTEXT
	if err == nil {
		t.Fatal("SASLPassword with PLAINTEXT: no error")
	}
	checkNoSecrets(t, "SASLPassword with PLAINTEXT", err.Error(), []string{pw})
	c.SecurityProtocol, c.SASLMechanism, c.SASLJAASConfig = SecuritySASLSSL, SASLPlain, jaas(";")
	if err = c.Validate(); err == nil {
		t.Fatal("SASLPassword and sasl.jaas.config: no error")
	}
	checkNoSecrets(t, "SASLPassword and sasl.jaas.config", err.Error(), []string{pw})
}
