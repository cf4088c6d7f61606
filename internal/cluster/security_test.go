package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/sasl"
	"github.com/kprod/kprod/internal/testcluster"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWaitTopicAuthenticationFailsFast: with credentials the brokers
// refuse, WaitTopic (the producer's metadata wait) returns the
// authentication error at once instead of retrying until its deadline
// and reporting a generic timeout.
func TestWaitTopicAuthenticationFailsFast(t *testing.T) {
	c := newCluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "right-password"),
		kfake.SeedTopics(1, "t"))
	// kfake drops the connection on bad credentials; a real broker
	// answers SASL_AUTHENTICATION_FAILED, as this does.
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := kreq.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
		return resp, nil, true
	})
	cfg := testConfig(c.ListenAddrs()...)
	cfg.Broker.SASL = sasl.Plain{Username: "admin", Password: "wrong-password"}
	cl := newClient(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := cl.WaitTopic(ctx, "t")
	t.Logf("after %v: %v", time.Since(start), err)
	if !errors.Is(err, kerr.ErrAuthentication) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("want ErrAuthentication with SASL_AUTHENTICATION_FAILED, got %v", err)
	}
	if errors.Is(err, kerr.ErrMetadataTimeout) || kerr.IsRetriable(err) {
		t.Errorf("the error must not look like a (retriable) metadata timeout: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v: the failure was retried", time.Since(start))
	}
	if strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("the error shows the password: %v", err)
	}
}

// TestIntegrationWaitTopicSecurity: on the real cluster, the metadata
// wait surfaces each refusal as its typed error well within the wait.
func TestIntegrationWaitTopicSecurity(t *testing.T) {
	testcluster.Security(t)
	for _, tc := range []struct {
		name  string
		addrs []string
		setup func(*Config)
		want  error
	}{
		{"wrong password", testcluster.SASLPlaintext.Addrs(), func(c *Config) {
			m, _ := sasl.NewScram("SCRAM-SHA-512", testcluster.SecurityUser, "wrong")
			c.Broker.SASL = m
		}, kerr.SaslAuthenticationFailed},
		{"mechanism not enabled", testcluster.SASLSSL.Addrs(), func(c *Config) {
			m, _ := sasl.NewScram("SCRAM-SHA-256", testcluster.SecurityUser, testcluster.SecurityPassword)
			c.Broker.SASL = m
			c.Broker.TLS = testcluster.ClientTLS(t, false)
		}, kerr.UnsupportedSaslMechanism},
		{"client certificate missing", testcluster.SSL.Addrs(), func(c *Config) {
			c.Broker.TLS = testcluster.ClientTLS(t, false)
		}, kerr.ErrTLS},
		{"plaintext to TLS", testcluster.SSL.Addrs(), func(*Config) {}, kerr.ErrTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(tc.addrs...)
			cfg.Broker.SetupTimeout = 20 * time.Second
			cfg.Broker.SetupTimeoutMax = 20 * time.Second
			tc.setup(&cfg)
			cl := newClient(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			_, err := cl.WaitTopic(ctx, testcluster.UniqueTopic(t))
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if ctx.Err() != nil || errors.Is(err, kerr.ErrMetadataTimeout) {
				t.Errorf("the wait ran out instead of failing on the refusal: %v", err)
			}
		})
	}
}
