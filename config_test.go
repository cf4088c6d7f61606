package kprod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
)

// validConfig is DefaultConfig with the one required setting filled in.
func validConfig() Config {
	c := DefaultConfig()
	c.BootstrapServers = []string{"localhost:9092"}
	return c
}

// wantConfigError checks that err is a configuration error about prop: it
// wraps ErrInvalidConfig, is a *ConfigError for prop, and its message names
// the property and each of wantInMsg.
func wantConfigError(t *testing.T, err error, prop string, wantInMsg ...string) *ConfigError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want an invalid %s", prop)
	}
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, kerr.ErrInvalidConfig) {
		t.Errorf("error %q does not wrap ErrInvalidConfig", err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("error %q (%T) is not a *ConfigError", err, err)
	}
	if ce.Property != prop {
		t.Errorf("ConfigError.Property = %q, want %q (error %q)", ce.Property, prop, err)
	}
	msg := err.Error()
	for _, w := range append([]string{prop}, wantInMsg...) {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	return ce
}

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	want := Config{
		Acks:                               AcksAll,
		TransactionTimeout:                 60 * time.Second,
		Retries:                            2147483647,
		MaxInFlight:                        5,
		Linger:                             5 * time.Millisecond,
		BatchSize:                          16384,
		BufferMemory:                       33554432,
		MaxRequestSize:                     1048576,
		MaxBlock:                           60 * time.Second,
		DeliveryTimeout:                    120 * time.Second,
		RequestTimeout:                     30 * time.Second,
		RetryBackoff:                       100 * time.Millisecond,
		RetryBackoffMax:                    1000 * time.Millisecond,
		CompressionType:                    "none",
		CompressionGzipLevel:               -1,
		CompressionLz4Level:                9,
		CompressionZstdLevel:               3,
		PartitionerAdaptivePartitioning:    true,
		AllowAutoCreateTopics:              true,
		MetadataMaxAge:                     5 * time.Minute,
		MetadataMaxIdle:                    5 * time.Minute,
		MetadataRecoveryStrategy:           "rebootstrap",
		MetadataRecoveryRebootstrapTrigger: 5 * time.Minute,
		ConnectionsMaxIdle:                 540 * time.Second,
		ReconnectBackoff:                   50 * time.Millisecond,
		ReconnectBackoffMax:                1000 * time.Millisecond,
		SocketConnectionSetupTimeout:       10 * time.Second,
		SocketConnectionSetupTimeoutMax:    30 * time.Second,
		SendBufferBytes:                    131072,
		ReceiveBufferBytes:                 32768,
		SecurityProtocol:                   "PLAINTEXT",
		SSLTruststoreType:                  "PEM",
		SSLKeystoreType:                    "PEM",
		SSLEndpointIdentificationAlgorithm: "https",
		SSLEnabledProtocols:                []string{"TLSv1.2", "TLSv1.3"},
		SSLProtocol:                        "TLSv1.3",
		SASLMechanism:                      "GSSAPI",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("DefaultConfig() =\n%+v\nwant\n%+v", c, want)
	}
	if c.EnableIdempotence != nil || c.ClientID != "" || c.TransactionalID != "" || c.BootstrapServers != nil ||
		c.ClientRack != "" || c.PartitionerRackAware {
		t.Error("DefaultConfig sets a setting that must default to unset")
	}

	// Defaults plus bootstrap servers are valid, idempotent, and Validate
	// changes nothing.
	c = validConfig()
	before := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate(defaults) = %v", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("Validate changed a default Config:\n%+v\nwas\n%+v", c, before)
	}
	if !c.Idempotent() {
		t.Error("defaults are not idempotent; Kafka 4.x producers are idempotent by default")
	}
	if err := c.Validate(); err != nil {
		t.Errorf("second Validate = %v", err)
	}
}

func TestConfigAcksString(t *testing.T) {
	for a, want := range map[Acks]string{AcksAll: "all", AcksNone: "0", AcksLeader: "1"} {
		if got := a.String(); got != want {
			t.Errorf("Acks(%d).String() = %q, want %q", a, got, want)
		}
	}
}

// TestConfigSetEveryProperty sets every supported property to a valid,
// non-default value and checks the field it lands in.
func TestConfigSetEveryProperty(t *testing.T) {
	tests := []struct {
		name, value string
		check       func(c *Config) any
		want        any
	}{
		{"bootstrap.servers", " b1:9092 , b2:9093,[::1]:9094 ", func(c *Config) any { return c.BootstrapServers }, []string{"b1:9092", "b2:9093", "[::1]:9094"}},
		{"client.id", " billing ", func(c *Config) any { return c.ClientID }, "billing"},
		{"acks", "all", func(c *Config) any { return c.Acks }, AcksAll},
		{"acks", "-1", func(c *Config) any { return c.Acks }, AcksAll},
		{"acks", "1", func(c *Config) any { return c.Acks }, AcksLeader},
		{"acks", " 0 ", func(c *Config) any { return c.Acks }, AcksNone},
		{"enable.idempotence", "FALSE", func(c *Config) any { return *c.EnableIdempotence }, false},
		{"enable.idempotence", "true", func(c *Config) any { return *c.EnableIdempotence }, true},
		{"transactional.id", "tx-1", func(c *Config) any { return c.TransactionalID }, "tx-1"},
		{"transaction.timeout.ms", "90000", func(c *Config) any { return c.TransactionTimeout }, 90 * time.Second},
		{"retries", "3", func(c *Config) any { return c.Retries }, 3},
		{"retries", "0", func(c *Config) any { return c.Retries }, 0},
		{"max.in.flight.requests.per.connection", "1", func(c *Config) any { return c.MaxInFlight }, 1},
		{"linger.ms", "0", func(c *Config) any { return c.Linger }, time.Duration(0)},
		{"linger.ms", "250", func(c *Config) any { return c.Linger }, 250 * time.Millisecond},
		{"batch.size", "0", func(c *Config) any { return c.BatchSize }, 0},
		{"batch.size", "65536", func(c *Config) any { return c.BatchSize }, 65536},
		{"buffer.memory", "67108864", func(c *Config) any { return c.BufferMemory }, int64(67108864)},
		{"buffer.memory", "4294967296", func(c *Config) any { return c.BufferMemory }, int64(4294967296)},
		{"max.request.size", "2097152", func(c *Config) any { return c.MaxRequestSize }, 2097152},
		{"max.block.ms", "0", func(c *Config) any { return c.MaxBlock }, time.Duration(0)},
		{"max.block.ms", "9223372036854775807", func(c *Config) any { return c.MaxBlock }, time.Duration(math.MaxInt64)},
		{"delivery.timeout.ms", "300000", func(c *Config) any { return c.DeliveryTimeout }, 5 * time.Minute},
		{"request.timeout.ms", "+15000", func(c *Config) any { return c.RequestTimeout }, 15 * time.Second},
		{"retry.backoff.ms", "200", func(c *Config) any { return c.RetryBackoff }, 200 * time.Millisecond},
		{"retry.backoff.max.ms", "5000", func(c *Config) any { return c.RetryBackoffMax }, 5 * time.Second},
		{"compression.type", "zstd", func(c *Config) any { return c.CompressionType }, "zstd"},
		{"compression.type", "snappy", func(c *Config) any { return c.CompressionType }, "snappy"},
		{"compression.gzip.level", "9", func(c *Config) any { return c.CompressionGzipLevel }, 9},
		{"compression.gzip.level", "1", func(c *Config) any { return c.CompressionGzipLevel }, 1},
		{"compression.lz4.level", "17", func(c *Config) any { return c.CompressionLz4Level }, 17},
		{"compression.zstd.level", "-131072", func(c *Config) any { return c.CompressionZstdLevel }, -131072},
		{"compression.zstd.level", "22", func(c *Config) any { return c.CompressionZstdLevel }, 22},
		{"partitioner.ignore.keys", "true", func(c *Config) any { return c.PartitionerIgnoreKeys }, true},
		{"allow.auto.create.topics", "false", func(c *Config) any { return c.AllowAutoCreateTopics }, false},
		{"partitioner.adaptive.partitioning.enable", "false", func(c *Config) any { return c.PartitionerAdaptivePartitioning }, false},
		{"partitioner.availability.timeout.ms", "2000", func(c *Config) any { return c.PartitionerAvailabilityTimeout }, 2 * time.Second},
		{"partitioner.rack.aware", "TRUE", func(c *Config) any { return c.PartitionerRackAware }, true},
		{"client.rack", " use1-az1 ", func(c *Config) any { return c.ClientRack }, "use1-az1"},
		{"partitioner.class", " " + JavaRoundRobinPartitioner + " ", func(c *Config) any { return fmt.Sprintf("%T", c.Partitioner) }, "*kprod.roundRobin"},
		{"metadata.max.age.ms", "60000", func(c *Config) any { return c.MetadataMaxAge }, time.Minute},
		{"metadata.max.idle.ms", "5000", func(c *Config) any { return c.MetadataMaxIdle }, 5 * time.Second},
		{"metadata.recovery.strategy", " NONE ", func(c *Config) any { return c.MetadataRecoveryStrategy }, MetadataRecoveryNone},
		{"metadata.recovery.strategy", "Rebootstrap", func(c *Config) any { return c.MetadataRecoveryStrategy }, MetadataRecoveryRebootstrap},
		{"metadata.recovery.rebootstrap.trigger.ms", "0", func(c *Config) any { return c.MetadataRecoveryRebootstrapTrigger }, time.Duration(0)},
		{"connections.max.idle.ms", "-1", func(c *Config) any { return c.ConnectionsMaxIdle }, -time.Millisecond},
		{"connections.max.idle.ms", "60000", func(c *Config) any { return c.ConnectionsMaxIdle }, time.Minute},
		{"reconnect.backoff.ms", "100", func(c *Config) any { return c.ReconnectBackoff }, 100 * time.Millisecond},
		{"reconnect.backoff.max.ms", "10000", func(c *Config) any { return c.ReconnectBackoffMax }, 10 * time.Second},
		{"socket.connection.setup.timeout.ms", "5000", func(c *Config) any { return c.SocketConnectionSetupTimeout }, 5 * time.Second},
		{"socket.connection.setup.timeout.max.ms", "60000", func(c *Config) any { return c.SocketConnectionSetupTimeoutMax }, time.Minute},
		{"send.buffer.bytes", "-1", func(c *Config) any { return c.SendBufferBytes }, -1},
		{"send.buffer.bytes", "1048576", func(c *Config) any { return c.SendBufferBytes }, 1048576},
		{"receive.buffer.bytes", "-1", func(c *Config) any { return c.ReceiveBufferBytes }, -1},
		{"receive.buffer.bytes", "65536", func(c *Config) any { return c.ReceiveBufferBytes }, 65536},
		{"security.protocol", "plaintext", func(c *Config) any { return c.SecurityProtocol }, "PLAINTEXT"},
		// TLS and SASL settings are only stored here: with PLAINTEXT,
		// Validate does not look at them (security_test.go does).
		{"ssl.truststore.location", " /etc/kafka/ca.pem ", func(c *Config) any { return c.SSLTruststoreLocation }, "/etc/kafka/ca.pem"},
		{"ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----", func(c *Config) any { return c.SSLTruststoreCertificates }, "-----BEGIN CERTIFICATE-----"},
		{"ssl.truststore.type", "PEM", func(c *Config) any { return c.SSLTruststoreType }, "PEM"},
		{"ssl.keystore.location", "/etc/kafka/client.pem", func(c *Config) any { return c.SSLKeystoreLocation }, "/etc/kafka/client.pem"},
		{"ssl.keystore.certificate.chain", "chain", func(c *Config) any { return c.SSLKeystoreCertificateChain }, "chain"},
		{"ssl.keystore.key", "key", func(c *Config) any { return c.SSLKeystoreKey }, "key"},
		{"ssl.keystore.type", "pem", func(c *Config) any { return c.SSLKeystoreType }, "pem"},
		{"ssl.key.password", " p w ", func(c *Config) any { return c.SSLKeyPassword }, "p w"}, // trimmed, as Java trims PASSWORD values,
		{"ssl.endpoint.identification.algorithm", "", func(c *Config) any { return c.SSLEndpointIdentificationAlgorithm }, ""},
		{"ssl.enabled.protocols", "TLSv1.3", func(c *Config) any { return c.SSLEnabledProtocols }, []string{"TLSv1.3"}},
		{"ssl.protocol", "TLSv1.2", func(c *Config) any { return c.SSLProtocol }, "TLSv1.2"},
		{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", func(c *Config) any { return c.SSLCipherSuites }, []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}},
		{"sasl.mechanism", "SCRAM-SHA-512", func(c *Config) any { return c.SASLMechanism }, "SCRAM-SHA-512"},
		{"sasl.jaas.config", jaasPlain, func(c *Config) any { return c.SASLJAASConfig }, jaasPlain},
	}
	covered := make(map[string]bool)
	for _, tt := range tests {
		covered[tt.name] = true
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			c := validConfig()
			if err := c.Set(tt.name, tt.value); err != nil {
				t.Fatalf("Set(%q, %q) = %v", tt.name, tt.value, err)
			}
			if got := tt.check(&c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("after Set(%q, %q): field = %#v, want %#v", tt.name, tt.value, got, tt.want)
			}
			// The value is valid on its own: Validate accepts it, given
			// the settings it needs (a transactional id needs idempotence,
			// which needs acks=all...).
			if tt.name == "acks" && tt.value != "all" && tt.value != "-1" {
				c.EnableIdempotence = new(false)
			}
			if tt.name == "retries" && tt.value == "0" {
				c.EnableIdempotence = new(false)
			}
			if tt.name == "partitioner.rack.aware" {
				c.ClientRack = "use1-az1"
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate after Set(%q, %q) = %v", tt.name, tt.value, err)
			}
		})
	}
	for name := range properties {
		if !covered[name] {
			t.Errorf("property %s has no test case", name)
		}
	}
}

// TestConfigBootstrapLikeJava: as Java's ClientUtils, bootstrap.servers
// skips empty entries (a trailing or doubled comma); a broker listed
// twice is kept once (Java keeps both, Kafka 4.2 drops the second).
func TestConfigBootstrapLikeJava(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{"bootstrap.servers": "b1:9092,,b2:9092, b1:9092,"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b1:9092", "b2:9092"}; !slices.Equal(c.BootstrapServers, want) {
		t.Fatalf("bootstrap.servers: %q, want %q", c.BootstrapServers, want)
	}
}

// TestConfigPropertyBadValues: every property rejects bad values, through
// Set (unparsable) or Validate (out of range), with an error naming the
// property and the value.
func TestConfigPropertyBadValues(t *testing.T) {
	tests := []struct {
		name, value string
		wantInMsg   string // besides the property name
	}{
		{"bootstrap.servers", "", "required"},
		{"bootstrap.servers", "localhost", "host:port"},
		{"bootstrap.servers", " , ", "required"},
		{"bootstrap.servers", "b1:0", "1..65535"},
		{"bootstrap.servers", "b1:65536", "1..65535"},
		{"bootstrap.servers", "b1:http", "1..65535"},
		{"bootstrap.servers", ":9092", "no host"},
		{"acks", "2", "all"},
		{"acks", "ALL", "all"},
		{"acks", "", "all"},
		{"enable.idempotence", "yes", "true"},
		{"enable.idempotence", "1", "true"},
		{"transactional.id", "  ", "must not be empty"},
		{"transaction.timeout.ms", "-1", "0..2147483647"},
		{"transaction.timeout.ms", "2147483648", "Java int"},
		{"retries", "-1", "0..2147483647"},
		{"retries", "1.5", "Java int"},
		{"max.in.flight.requests.per.connection", "0", ">= 1"},
		{"linger.ms", "-5", ">= 0"},
		{"linger.ms", "5ms", "Java long"},
		{"batch.size", "-1", "0..2147483647"},
		{"batch.size", "40000000", "must not exceed buffer.memory"},
		{"batch.size", "16k", "Java int"},
		{"buffer.memory", "0", "> 0"},
		{"buffer.memory", "-1", "> 0"},
		{"buffer.memory", "32MB", "Java long"},
		{"max.request.size", "0", "1..2147483647"},
		{"max.request.size", "99999999999", "Java int"},
		{"max.block.ms", "-1", ">= 0"},
		{"delivery.timeout.ms", "-1", "0..2147483647"},
		{"delivery.timeout.ms", "1000", "linger.ms + request.timeout.ms"},
		{"request.timeout.ms", "-1", "0..2147483647"},
		{"request.timeout.ms", "abc", "Java int"},
		{"retry.backoff.ms", "-1", ">= 0"},
		{"retry.backoff.max.ms", "-1", ">= 0"},
		{"compression.type", "GZIP", "lower case"},
		{"compression.type", "brotli", "none, gzip, snappy, lz4, zstd"},
		{"compression.type", "", "none, gzip"},
		{"compression.gzip.level", "0", "1..9"},
		{"compression.gzip.level", "10", "1..9"},
		{"compression.gzip.level", "-2", "1..9"},
		{"compression.lz4.level", "0", "1..17"},
		{"compression.lz4.level", "18", "1..17"},
		{"compression.zstd.level", "23", "-131072..22"},
		{"compression.zstd.level", "-131073", "-131072..22"},
		{"partitioner.ignore.keys", "on", "true"},
		{"allow.auto.create.topics", "no", "true"},
		{"partitioner.adaptive.partitioning.enable", "", "true"},
		{"partitioner.availability.timeout.ms", "-1", ">= 0"},
		{"partitioner.rack.aware", "1", "true"},
		{"partitioner.class", "org.apache.kafka.clients.producer.UniformStickyPartitioner", "partitioner.ignore.keys=true"},
		{"partitioner.class", "org.apache.kafka.clients.producer.internals.DefaultPartitioner", "removed in Kafka 4.0"},
		{"metadata.max.age.ms", "-1", ">= 0"},
		{"metadata.max.idle.ms", "4999", "5000"},
		{"metadata.recovery.strategy", "reboot", `"rebootstrap" or "none"`},
		{"metadata.recovery.rebootstrap.trigger.ms", "-1", ">= 0"},
		{"connections.max.idle.ms", "forever", "Java long"},
		{"reconnect.backoff.ms", "-1", ">= 0"},
		{"reconnect.backoff.max.ms", "-1", ">= 0"},
		{"socket.connection.setup.timeout.ms", "0", "1 ms"},
		{"socket.connection.setup.timeout.max.ms", "0", "1 ms"},
		{"send.buffer.bytes", "-2", "-1"},
		{"receive.buffer.bytes", "-2", "-1"},
		{"receive.buffer.bytes", "x", "Java int"},
		{"security.protocol", "TLS", "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"},
	}
	covered := make(map[string]bool)
	for _, tt := range tests {
		covered[tt.name] = true
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			props := map[string]string{"bootstrap.servers": "localhost:9092", tt.name: tt.value}
			c, err := ConfigFromProperties(props)
			ce := wantConfigError(t, err, tt.name, tt.wantInMsg)
			shown := strings.TrimSpace(strings.Split(tt.value, ",")[0])
			if tt.value != "" && !strings.Contains(strings.ToLower(ce.Value), strings.ToLower(shown)) {
				t.Errorf("ConfigError.Value = %q, want it to show %q", ce.Value, tt.value)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Error("ConfigFromProperties returned a non-zero Config with an error")
			}
		})
	}
	for name := range properties {
		// any string is a valid client.id, and a valid client.rack on
		// its own (TestConfigRackAware covers it with
		// partitioner.rack.aware); TLS and SASL settings are checked only
		// with a security.protocol that uses them:
		// TestSecurityPropertiesBadValues covers them.
		if !covered[name] && name != "client.id" && name != "client.rack" && !securityProperty(name) {
			t.Errorf("property %s has no bad-value test case", name)
		}
	}
}

// TestConfigValidateFields covers Go users who assign fields directly.
func TestConfigValidateFields(t *testing.T) {
	tests := []struct {
		prop   string
		modify func(c *Config)
		want   string
	}{
		{"bootstrap.servers", func(c *Config) { c.BootstrapServers = nil }, "required"},
		{"bootstrap.servers", func(c *Config) { c.BootstrapServers = []string{"", " "} }, "required"},
		{"acks", func(c *Config) { c.Acks = 2 }, "all"},
		{"acks", func(c *Config) { c.Acks = -2 }, "all"},
		{"linger.ms", func(c *Config) { c.Linger = -time.Nanosecond }, "-1ns"},
		{"delivery.timeout.ms", func(c *Config) { c.DeliveryTimeout = 2147483648 * time.Millisecond }, "2147483647"},
		{"request.timeout.ms", func(c *Config) { c.RequestTimeout = time.Duration(math.MaxInt64) }, "2147483647"},
		{"batch.size", func(c *Config) { c.BatchSize = math.MaxInt32 + 1 }, "2147483647"},
		{"retries", func(c *Config) { c.Retries = -1 }, "0..2147483647"},
		{"max.in.flight.requests.per.connection", func(c *Config) { c.MaxInFlight = -1 }, ">= 1"},
		{"transaction.timeout.ms", func(c *Config) { c.TransactionalID = "tx"; c.TransactionTimeout = 0 }, "at least 1 ms"},
		{"transactional.id", func(c *Config) { c.TransactionalID = "  " }, "must not be blank"},
		{"compression.type", func(c *Config) { c.CompressionType = "None" }, "lower case"},
		{"sasl.mechanism", func(c *Config) { c.SecurityProtocol = "sasl_ssl" }, "GSSAPI"},
		{"security.protocol", func(c *Config) { c.SASLUsername = "u" }, "does not use SASL"},
	}
	for _, tt := range tests {
		t.Run(tt.prop, func(t *testing.T) {
			c := validConfig()
			tt.modify(&c)
			wantConfigError(t, c.Validate(), tt.prop, tt.want)
		})
	}

	// A lower-case protocol is accepted and normalized, as Java's
	// case-insensitive validator does.
	c := validConfig()
	c.SecurityProtocol = "plaintext"
	if err := c.Validate(); err != nil || c.SecurityProtocol != "PLAINTEXT" {
		t.Errorf("SecurityProtocol \"plaintext\": err %v, normalized to %q", err, c.SecurityProtocol)
	}
	// So are metadata.recovery.strategy (case-insensitive in Java too)
	// and a transactional.id with spaces around it (Java trims strings).
	c = validConfig()
	c.MetadataRecoveryStrategy = "REBOOTSTRAP"
	c.TransactionalID = " tx "
	if err := c.Validate(); err != nil || c.MetadataRecoveryStrategy != MetadataRecoveryRebootstrap || c.TransactionalID != "tx" {
		t.Errorf("MetadataRecoveryStrategy \"REBOOTSTRAP\", TransactionalID \" tx \": err %v, normalized to %q, %q", err, c.MetadataRecoveryStrategy, c.TransactionalID)
	}
	// transaction.timeout.ms of 0 is only checked when transactions are on.
	c = validConfig()
	c.TransactionTimeout = 0
	if err := c.Validate(); err != nil {
		t.Errorf("TransactionTimeout 0 without transactional.id: %v", err)
	}
}

// TestConfigRackAware: partitioner.rack.aware needs client.rack, as the
// Java producer's ConfigException "client.rack must be provided if
// partitioner.rack.aware is enabled" (KIP-1123).
func TestConfigRackAware(t *testing.T) {
	for _, rack := range []string{"", "  ", "\t"} {
		props := map[string]string{"bootstrap.servers": "localhost:9092", "partitioner.rack.aware": "true"}
		if rack != "" {
			props["client.rack"] = rack
		}
		_, err := ConfigFromProperties(props)
		ce := wantConfigError(t, err, "client.rack", "partitioner.rack.aware", "broker.rack")
		if ce.Value != "" {
			t.Errorf("client.rack %q: ConfigError.Value = %q, want it trimmed", rack, ce.Value)
		}
	}

	// Go users setting fields get the same error, and a custom
	// Partitioner does not excuse it: Java checks before it looks at
	// partitioner.class.
	c := validConfig()
	c.PartitionerRackAware = true
	wantConfigError(t, c.Validate(), "client.rack", "partitioner.rack.aware=true")
	c.Partitioner = RoundRobinPartitioner()
	wantConfigError(t, c.Validate(), "client.rack")

	// Java reports its own ProducerConfig errors first.
	c = validConfig()
	c.PartitionerRackAware, c.EnableIdempotence, c.Acks = true, new(true), AcksLeader
	wantConfigError(t, c.Validate(), "enable.idempotence")

	// A rack is trimmed, as Java trims string properties; a rack without
	// rack awareness is fine (Java's consumer uses the same property).
	c = validConfig()
	c.PartitionerRackAware, c.ClientRack = true, " use1-az1\n"
	if err := c.Validate(); err != nil || c.ClientRack != "use1-az1" {
		t.Fatalf("Validate = %v, ClientRack %q, want use1-az1", err, c.ClientRack)
	}
	before := c
	if err := c.Validate(); err != nil || !reflect.DeepEqual(c, before) {
		t.Fatalf("second Validate = %v, changed the Config: %+v", err, c)
	}
	c = validConfig()
	c.ClientRack = "use1-az1"
	if err := c.Validate(); err != nil {
		t.Fatalf("client.rack without partitioner.rack.aware: %v", err)
	}
}

// TestConfigZeroValue: a Config built without DefaultConfig fails with a
// message that says so.
func TestConfigZeroValue(t *testing.T) {
	var c Config
	c.BootstrapServers = []string{"localhost:9092"}
	err := c.Validate()
	wantConfigError(t, err, "buffer.memory", "kprod.DefaultConfig()")

	// Each field whose zero value is invalid says so when it is the cause.
	for _, tt := range []struct {
		prop string
		zero func(c *Config)
	}{
		{"buffer.memory", func(c *Config) { c.BufferMemory = 0 }},
		{"max.request.size", func(c *Config) { c.MaxRequestSize = 0 }},
		{"max.in.flight.requests.per.connection", func(c *Config) { c.MaxInFlight = 0 }},
		{"metadata.max.idle.ms", func(c *Config) { c.MetadataMaxIdle = 0 }},
		{"socket.connection.setup.timeout.ms", func(c *Config) { c.SocketConnectionSetupTimeout = 0 }},
		{"socket.connection.setup.timeout.max.ms", func(c *Config) { c.SocketConnectionSetupTimeoutMax = 0 }},
		{"compression.lz4.level", func(c *Config) { c.CompressionLz4Level = 0 }},
		{"compression.gzip.level", func(c *Config) { c.CompressionGzipLevel = 0 }},
		{"compression.type", func(c *Config) { c.CompressionType = "" }},
		{"metadata.recovery.strategy", func(c *Config) { c.MetadataRecoveryStrategy = "" }},
		{"security.protocol", func(c *Config) { c.SecurityProtocol = "" }},
	} {
		c := validConfig()
		tt.zero(&c)
		wantConfigError(t, c.Validate(), tt.prop, "kprod.DefaultConfig()")
	}
	// A non-zero bad value gets no such hint.
	c = validConfig()
	c.BufferMemory = -1
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "DefaultConfig") {
		t.Errorf("BufferMemory -1: %v, want an error without the zero-value hint", err)
	}
}

func TestConfigIdempotence(t *testing.T) {
	tests := []struct {
		name           string
		props          map[string]string
		wantIdempotent bool
		wantErrProp    string   // "" = valid
		wantInMsg      []string // besides wantErrProp
	}{
		{"default on", nil, true, "", nil},
		{"explicit on", map[string]string{"enable.idempotence": "true"}, true, "", nil},
		{"explicit off", map[string]string{"enable.idempotence": "false"}, false, "", nil},
		{"explicit off allows acks=1", map[string]string{"enable.idempotence": "false", "acks": "1"}, false, "", nil},
		{"explicit off allows 10 in flight", map[string]string{"enable.idempotence": "false", "max.in.flight.requests.per.connection": "10"}, false, "", nil},

		// Not set explicitly: a conflicting acks or retries turns it off.
		{"implicit, acks=1", map[string]string{"acks": "1"}, false, "", nil},
		{"implicit, acks=0", map[string]string{"acks": "0"}, false, "", nil},
		{"implicit, retries=0", map[string]string{"retries": "0"}, false, "", nil},
		{"implicit, 5 in flight", map[string]string{"max.in.flight.requests.per.connection": "5"}, true, "", nil},
		{"implicit, 1 in flight", map[string]string{"max.in.flight.requests.per.connection": "1"}, true, "", nil},

		// Set explicitly: a conflict is an error naming both settings.
		{"explicit, acks=1", map[string]string{"enable.idempotence": "true", "acks": "1"}, false,
			"enable.idempotence", []string{"acks=1", "acks=all"}},
		{"explicit, acks=0", map[string]string{"enable.idempotence": "true", "acks": "0"}, false,
			"enable.idempotence", []string{"acks=0"}},
		{"explicit, retries=0", map[string]string{"enable.idempotence": "true", "retries": "0"}, false,
			"enable.idempotence", []string{"retries=0"}},
		{"explicit, 6 in flight", map[string]string{"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"}, false,
			"max.in.flight.requests.per.connection", []string{"enable.idempotence=true", "at most 5"}},

		// Kafka 4.x: more than 5 in flight is an error unless idempotence
		// is explicitly off, even when acks would turn it off.
		{"implicit, 6 in flight", map[string]string{"max.in.flight.requests.per.connection": "6"}, false,
			"max.in.flight.requests.per.connection", []string{"enable.idempotence=false", "on by default"}},
		{"implicit, acks=1 and 6 in flight", map[string]string{"acks": "1", "max.in.flight.requests.per.connection": "6"}, false,
			"max.in.flight.requests.per.connection", []string{"enable.idempotence"}},

		// transactional.id needs idempotence.
		{"transactions", map[string]string{"transactional.id": "tx"}, true, "", nil},
		{"transactions, explicit off", map[string]string{"transactional.id": "tx", "enable.idempotence": "false"}, false,
			"transactional.id", []string{"idempotence", "enable.idempotence=false"}},
		{"transactions, acks=1 turns it off", map[string]string{"transactional.id": "tx", "acks": "1"}, false,
			"transactional.id", []string{"acks=1"}},
		{"transactions, retries=0 turns it off", map[string]string{"transactional.id": "tx", "retries": "0"}, false,
			"transactional.id", []string{"retries=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			props := map[string]string{"bootstrap.servers": "localhost:9092"}
			for k, v := range tt.props {
				props[k] = v
			}
			c, err := ConfigFromProperties(props)
			if tt.wantErrProp != "" {
				wantConfigError(t, err, tt.wantErrProp, tt.wantInMsg...)
				return
			}
			if err != nil {
				t.Fatalf("ConfigFromProperties = %v", err)
			}
			if got := c.Idempotent(); got != tt.wantIdempotent {
				t.Errorf("Idempotent() = %v, want %v", got, tt.wantIdempotent)
			}
		})
	}

	// The same rules for a Config built in Go.
	c := validConfig()
	c.Acks = AcksLeader
	if err := c.Validate(); err != nil || c.Idempotent() {
		t.Errorf("Go Config with AcksLeader: err %v, Idempotent %v; want valid and not idempotent", err, c.Idempotent())
	}
	c.EnableIdempotence = new(true)
	wantConfigError(t, c.Validate(), "enable.idempotence", "acks=1")
}

// TestConfigDeliveryTimeout: delivery.timeout.ms >= linger.ms +
// request.timeout.ms; an unset delivery timeout is raised instead, as Java.
func TestConfigDeliveryTimeout(t *testing.T) {
	// Explicit and too small: error naming all three properties.
	_, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers": "b:9092", "delivery.timeout.ms": "30000", "linger.ms": "100", "request.timeout.ms": "30000",
	})
	wantConfigError(t, err, "delivery.timeout.ms", "linger.ms", "request.timeout.ms", "30100")

	// Explicitly set to its default value: still explicit, still an error.
	_, err = ConfigFromProperties(map[string]string{
		"bootstrap.servers": "b:9092", "delivery.timeout.ms": "120000", "request.timeout.ms": "120000",
	})
	wantConfigError(t, err, "delivery.timeout.ms", "120005")

	// Not set: raised to linger + request timeout.
	c, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers": "b:9092", "linger.ms": "1000", "request.timeout.ms": "150000",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.DeliveryTimeout != 151*time.Second {
		t.Errorf("DeliveryTimeout = %v, want it raised to 151s", c.DeliveryTimeout)
	}
	// Equal is fine.
	c = validConfig()
	c.DeliveryTimeout, c.Linger, c.RequestTimeout = 31*time.Second, time.Second, 30*time.Second
	if err := c.Validate(); err != nil {
		t.Errorf("delivery = linger + request: %v", err)
	}
	// A Go user who changed DeliveryTimeout set it explicitly.
	c = validConfig()
	c.DeliveryTimeout = 10 * time.Second
	wantConfigError(t, c.Validate(), "delivery.timeout.ms", "30005")
	// A huge linger saturates the sum at Java's int maximum.
	c = validConfig()
	c.Linger = time.Duration(math.MaxInt64)
	if err := c.Validate(); err != nil || c.DeliveryTimeout != maxInt32Ms {
		t.Errorf("huge linger: err %v, DeliveryTimeout %v, want %v", err, c.DeliveryTimeout, maxInt32Ms)
	}
}

// TestConfigBackoffs: as Java, backoffs and setup timeouts above their
// maximum become the maximum, and a reconnect.backoff.ms given without
// reconnect.backoff.max.ms disables exponential reconnect backoff.
func TestConfigBackoffs(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers":                      "b:9092",
		"retry.backoff.ms":                       "5000",
		"retry.backoff.max.ms":                   "2000",
		"socket.connection.setup.timeout.ms":     "40000",
		"socket.connection.setup.timeout.max.ms": "20000",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.RetryBackoff != 2*time.Second || c.RetryBackoffMax != 2*time.Second {
		t.Errorf("retry backoff = %v / max %v, want a constant 2s", c.RetryBackoff, c.RetryBackoffMax)
	}
	if c.SocketConnectionSetupTimeout != 20*time.Second {
		t.Errorf("setup timeout = %v, want the 20s max", c.SocketConnectionSetupTimeout)
	}

	c, err = ConfigFromProperties(map[string]string{"bootstrap.servers": "b:9092", "reconnect.backoff.ms": "2000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ReconnectBackoff != 2*time.Second || c.ReconnectBackoffMax != 2*time.Second {
		t.Errorf("reconnect.backoff.ms alone: backoff %v max %v, want both 2s", c.ReconnectBackoff, c.ReconnectBackoffMax)
	}
	c, err = ConfigFromProperties(map[string]string{"bootstrap.servers": "b:9092", "reconnect.backoff.ms": "20", "reconnect.backoff.max.ms": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ReconnectBackoff != 20*time.Millisecond || c.ReconnectBackoffMax != 5*time.Second {
		t.Errorf("both reconnect settings: backoff %v max %v, want 20ms / 5s", c.ReconnectBackoff, c.ReconnectBackoffMax)
	}
	// Only the max given: kept, exponential backoff stays.
	c, err = ConfigFromProperties(map[string]string{"bootstrap.servers": "b:9092", "reconnect.backoff.max.ms": "8000"})
	if err != nil {
		t.Fatal(err)
	}
	if c.ReconnectBackoff != 50*time.Millisecond || c.ReconnectBackoffMax != 8*time.Second {
		t.Errorf("reconnect max alone: backoff %v max %v, want 50ms / 8s", c.ReconnectBackoff, c.ReconnectBackoffMax)
	}
	// A Go user changing ReconnectBackoff keeps the exponential default
	// max; a base above the max is lowered to it.
	c = validConfig()
	c.ReconnectBackoff = 3 * time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ReconnectBackoff != time.Second || c.ReconnectBackoffMax != time.Second {
		t.Errorf("Go ReconnectBackoff 3s: backoff %v max %v, want 1s / 1s", c.ReconnectBackoff, c.ReconnectBackoffMax)
	}
	// reconnect.backoff.ms by name and the max as a field: the max is
	// configured, so it stays.
	c = validConfig()
	if err := c.Set("reconnect.backoff.ms", "200"); err != nil {
		t.Fatal(err)
	}
	c.ReconnectBackoffMax = 5 * time.Second
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ReconnectBackoff != 200*time.Millisecond || c.ReconnectBackoffMax != 5*time.Second {
		t.Errorf("reconnect.backoff.ms=200 and ReconnectBackoffMax 5s: backoff %v max %v, want 200ms / 5s", c.ReconnectBackoff, c.ReconnectBackoffMax)
	}
}

func TestConfigBootstrapServers(t *testing.T) {
	shared := []string{" PLAINTEXT://b1:9092", "[fe80::1%eth0]:9093", "10.0.0.1:9094"}
	c := validConfig()
	c.BootstrapServers = shared
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []string{"b1:9092", "[fe80::1%eth0]:9093", "10.0.0.1:9094"}
	if !slices.Equal(c.BootstrapServers, want) {
		t.Errorf("BootstrapServers = %q, want %q", c.BootstrapServers, want)
	}
	if shared[0] != " PLAINTEXT://b1:9092" {
		t.Error("Validate modified the caller's slice")
	}
	for _, bad := range []string{"::1:9092", "b1", "b1:", "b1:-1", "b1:9092:1"} {
		c := validConfig()
		c.BootstrapServers = []string{bad}
		wantConfigError(t, c.Validate(), "bootstrap.servers", bad)
	}
}

func TestConfigSetUnknownAndJavaOnly(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"lingr.ms", "did you mean linger.ms?"},
		{"linger_ms", "did you mean linger.ms?"},
		{"LINGER.MS", "did you mean linger.ms?"},
		{"bacth.size", "did you mean batch.size?"},
		{"ack", "did you mean acks?"},
		{"enable.idempotency", "did you mean enable.idempotence?"},
		{"max.inflight.requests.per.connection", "did you mean max.in.flight.requests.per.connection?"},
		{"key.serialiser", "did you mean key.serializer?"},
		{"group.id", "consumer property"},
		{"value.deserializer", "consumer property"},
		{"frobnicate", "unknown producer property"},
		{"ssl.", "unknown producer property"},
	} {
		c := validConfig()
		ce := wantConfigError(t, c.Set(tt.name, "1"), tt.name, tt.want)
		if strings.Contains(tt.want, "did you mean") {
			continue
		}
		if strings.Contains(ce.Reason, "did you mean") {
			t.Errorf("%s: unexpected suggestion in %q", tt.name, ce.Reason)
		}
	}

	c := validConfig()
	ignored := []string{
		"key.serializer", "value.serializer", "partitioner.class", "interceptor.classes",
		"metric.reporters", "security.providers", "metrics.sample.window.ms", "metrics.num.samples",
		"metrics.recording.level", "enable.metrics.push", "client.dns.lookup",
		"transaction.two.phase.commit.enable", "ssl.keymanager.algorithm",
		"sasl.login.class", "sasl.kerberos.service.name", "metrics.context.team",
	}
	for _, name := range ignored {
		v := "org.example.Whatever"
		switch name {
		case "transaction.two.phase.commit.enable":
			v = "false"
		case "client.dns.lookup":
			v = "use_all_dns_ips"
		}
		if err := c.Set(name, v); err != nil {
			t.Errorf("Set(%q) = %v, want it accepted and ignored", name, err)
		}
	}
	if err := c.Set("key.serializer", "again"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.IgnoredProperties, ignored) {
		t.Errorf("IgnoredProperties = %q\nwant %q", c.IgnoredProperties, ignored)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after Java-only properties: %v", err)
	}

	wantConfigError(t, validConfigPtr().Set("transaction.two.phase.commit.enable", "true"), "transaction.two.phase.commit.enable", "not supported")
	wantConfigError(t, validConfigPtr().Set("client.dns.lookup", "resolve_canonical_bootstrap_servers_only"), "client.dns.lookup", "only use_all_dns_ips")
	wantConfigError(t, validConfigPtr().Set("client.dns.lookup", "bogus"), "client.dns.lookup", "only use_all_dns_ips")
	wantConfigError(t, validConfigPtr().Set("config.providers", "file"), "config.providers", "not supported")
	wantConfigError(t, validConfigPtr().Set("config.providers.file.class", "x"), "config.providers.file.class", "not supported")
}

func validConfigPtr() *Config {
	c := validConfig()
	return &c
}

func TestConfigErrorMessage(t *testing.T) {
	err := error(&ConfigError{Property: "linger.ms", Value: "-5", Reason: "must be >= 0"})
	if got, want := err.Error(), "kprod: invalid configuration: linger.ms=-5: must be >= 0"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	err = &ConfigError{Property: "client.id", Value: "", Reason: "r"}
	if !strings.Contains(err.Error(), `client.id="": r`) {
		t.Errorf("empty value not quoted: %q", err.Error())
	}
	if !errors.Is(err, ErrInvalidConfig) {
		t.Error("ConfigError does not wrap ErrInvalidConfig")
	}
}

func TestConfigEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"abc", "abc", 0}, {"abc", "abd", 1}, {"abc", "acb", 1},
		{"kitten", "sitting", 3}, {"", "abc", 3}, {"linger.ms", "lingr.ms", 1},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}

// A long value (inline PEM text) is cut in the message, with its length;
// the ConfigError keeps all of it.
func TestConfigErrorLongValue(t *testing.T) {
	long := strings.Repeat("A", 5000)
	e := invalid("ssl.truststore.certificates", long, "not PEM")
	if msg := e.Error(); len(msg) > 400 || !strings.Contains(msg, "(5000 bytes)") {
		t.Errorf("message of %d bytes: %.200s", len(msg), msg)
	}
	if e.Value != long {
		t.Error("the ConfigError lost the value")
	}
}

// newProducerLog starts a producer from c with a logger into a buffer,
// closes it at once, and returns what it logged. No broker is needed: the
// producer only dials when asked for metadata.
func newProducerLog(t *testing.T, c Config) string {
	t.Helper()
	var logBuf syncBuffer
	c.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	prod, err := NewProducer(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	prod.Close(ctx)
	return logBuf.String()
}

// logLinesWith returns the lines of a log that contain s.
func logLinesWith(log, s string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestConfigDeliveryTimeoutRaisedWarns: as Java's
// KafkaProducer.configureDeliveryTimeout, a delivery.timeout.ms left at
// its default and raised to linger.ms + request.timeout.ms is a warning,
// once, naming the new value.
func TestConfigDeliveryTimeoutRaisedWarns(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers": "localhost:9092", "linger.ms": "1000", "request.timeout.ms": "150000",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil { // twice: still one warning
		t.Fatal(err)
	}
	out := newProducerLog(t, c)
	if lines := logLinesWith(out, "delivery.timeout.ms"); len(lines) != 1 || !strings.Contains(lines[0], "151000") || !strings.Contains(lines[0], "level=WARN") {
		t.Errorf("want one warning that delivery.timeout.ms was raised to 151000 ms, got:\n%s", out)
	}
	// Nothing raised, nothing said.
	if out := newProducerLog(t, validConfig()); strings.Contains(out, "delivery.timeout.ms") {
		t.Errorf("warning without a raise:\n%s", out)
	}
}

// TestConfigStaticBackoffWarns: as Java's
// CommonClientConfigs.warnDisablingExponentialBackoff, a retry backoff or
// connection setup timeout above its maximum is a warning: the maximum
// applies, as a constant.
func TestConfigStaticBackoffWarns(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{
		"bootstrap.servers": "localhost:9092", "retry.backoff.ms": "5000",
		"socket.connection.setup.timeout.ms": "40000",
	})
	if err != nil {
		t.Fatal(err)
	}
	out := newProducerLog(t, c)
	for _, want := range []struct{ prop, max string }{{"retry.backoff.ms", "1000"}, {"socket.connection.setup.timeout.ms", "30000"}} {
		lines := logLinesWith(out, want.prop+"=")
		if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], want.max) {
			t.Errorf("want one warning that %s is above its maximum %s ms, got:\n%s", want.prop, want.max, out)
		}
	}
	if out := newProducerLog(t, validConfig()); strings.Contains(out, "maximum") {
		t.Errorf("warning with the defaults:\n%s", out)
	}
}

// TestConfigBootstrapWrongSeparator: brokers separated by spaces or ';'
// instead of commas (Java's lists are comma-separated) get an error that
// says so.
func TestConfigBootstrapWrongSeparator(t *testing.T) {
	for _, v := range []string{"b1:9092 b2:9092", "b1:9092;b2:9092", "b1:9092 ; b2:9092"} {
		_, err := ConfigFromProperties(map[string]string{"bootstrap.servers": v})
		wantConfigError(t, err, "bootstrap.servers", "separate", "commas")
	}
	// One address with a stray space inside is still about the address.
	_, err := ConfigFromProperties(map[string]string{"bootstrap.servers": "b1 9092"})
	wantConfigError(t, err, "bootstrap.servers", `"host:port"`)
}
