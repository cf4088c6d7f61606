package kprod

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/kprod/kprod/kerr"
)

// Acks is how many replicas must have a record before the broker
// acknowledges it (Java property acks).
type Acks int8

const (
	// AcksNone (acks=0): the producer does not wait for the broker at all.
	// Records can be lost without any error, and the offsets reported are
	// -1. A batch whose request could not be written (the connection was
	// lost first) is retried, as in Java; once written it is done.
	AcksNone Acks = 0
	// AcksLeader (acks=1): the leader acknowledges once it wrote the record
	// to its own log. A record is lost if the leader fails before its
	// followers copy it.
	AcksLeader Acks = 1
	// AcksAll (acks=all, or -1): the leader acknowledges once every in-sync
	// replica has the record. The default, and required for idempotence.
	AcksAll Acks = -1
)

// String returns the value as written in a Java properties file: "0", "1"
// or "all".
func (a Acks) String() string {
	if a == AcksAll {
		return "all"
	}
	return strconv.Itoa(int(a))
}

// Compression types, the values of Config.CompressionType
// (compression.type).
const (
	CompressionNone   = "none"
	CompressionGzip   = "gzip"
	CompressionSnappy = "snappy"
	CompressionLz4    = "lz4"
	CompressionZstd   = "zstd"
)

// Metadata recovery strategies, the values of
// Config.MetadataRecoveryStrategy (metadata.recovery.strategy).
const (
	MetadataRecoveryRebootstrap = "rebootstrap"
	MetadataRecoveryNone        = "none"
)

// Security protocols, the values of Config.SecurityProtocol
// (security.protocol): PLAINTEXT, TLS (SSL), SASL without TLS and SASL
// over TLS.
const (
	SecurityPlaintext     = "PLAINTEXT"
	SecuritySSL           = "SSL"
	SecuritySASLPlaintext = "SASL_PLAINTEXT"
	SecuritySASLSSL       = "SASL_SSL"
)

// Config holds every producer setting kprod supports. Each field's comment
// gives the Java property it mirrors and its default, which is the Kafka 4.x
// producer default.
//
// Build one with DefaultConfig and change the fields you need, or from Java
// properties with ConfigFromProperties / ConfigFromFile / Set. A zero
// Config is not usable: Validate rejects it and says so.
//
// Durations stand for the Java *.ms properties. Where Java takes a 32-bit
// int (request.timeout.ms, delivery.timeout.ms, transaction.timeout.ms) the
// duration must fit in 2147483647 ms; time sent to brokers is rounded down
// to whole milliseconds.
//
// Validate checks every bound and cross-field rule and fills in what the
// Java client derives (see Validate); the producer validates the Config it
// is given. A Config must not be changed while a producer uses it.
type Config struct {
	// BootstrapServers are the brokers the producer first connects to, as
	// "host:port" (IPv6 as "[::1]:9092"). Required, no default
	// (bootstrap.servers). The rest of the cluster is discovered from them.
	BootstrapServers []string

	// ClientID names the producer in broker logs, quotas and metrics
	// (client.id). Default "": the producer then generates
	// "kprod-producer-N".
	ClientID string

	// Acks is the durability the producer waits for (acks). Default
	// AcksAll.
	Acks Acks

	// EnableIdempotence makes retries safe: the broker drops duplicate
	// batches and keeps each partition's records in order
	// (enable.idempotence). Default nil, which means on unless a setting
	// conflicts with it; in Go, set it with new(true) or new(false).
	//
	// Idempotence needs Acks = AcksAll, Retries > 0 and MaxInFlight <= 5.
	// As in the Java client (Kafka 4.x):
	//   - explicitly true and any of those conflicts: Validate fails,
	//     naming both settings;
	//   - nil and Acks is not AcksAll or Retries is 0: idempotence is
	//     turned off silently (Idempotent reports false);
	//   - nil and MaxInFlight > 5: Validate fails; set it to new(false) to
	//     use more than 5 requests in flight without idempotence.
	EnableIdempotence *bool

	// TransactionalID enables transactions; it must be stable across
	// restarts of the same logical producer (transactional.id). Default ""
	// (no transactions). Requires idempotence: Validate fails if
	// idempotence is off, explicitly or because of a conflicting setting.
	TransactionalID string

	// TransactionTimeout is how long the transaction coordinator lets a
	// transaction stay open before aborting it (transaction.timeout.ms).
	// Default 60s. Must not exceed the broker's transaction.max.timeout.ms.
	TransactionTimeout time.Duration

	// Retries is how many times a failed batch is resent (retries).
	// Default 2147483647: in practice DeliveryTimeout bounds retrying.
	Retries int

	// MaxInFlight is how many produce requests may be outstanding on one
	// broker connection (max.in.flight.requests.per.connection). Default 5.
	// With idempotence on it must be at most 5; with idempotence off and
	// more than 1 in flight, a retry can reorder records.
	MaxInFlight int

	// Linger is how long a batch may wait for more records before it is
	// sent, unless it fills up first (linger.ms). Default 5ms (Kafka 4.0
	// raised it from 0). As in Java, a lingering batch also goes earlier
	// when a request to its partition's leader is being sent anyway.
	Linger time.Duration

	// BatchSize is the most bytes of records per partition batch
	// (batch.size). Default 16384. 0 disables batching: every record is
	// sent in its own batch. A record larger than BatchSize gets a batch of
	// its own. A produce request holds one batch per partition, as many as
	// fit in MaxRequestSize (at least one), as in Java: with BatchSize near
	// MaxRequestSize every request carries a single batch, so raise
	// MaxRequestSize along with a large BatchSize to keep several
	// partitions' batches in one request (the broker's own limit,
	// socket.request.max.bytes, is 100 MiB by default).
	BatchSize int

	// BufferMemory is the total bytes of records the producer holds
	// waiting to be sent (buffer.memory). Default 33554432 (32 MiB). When
	// full, Send blocks up to MaxBlock (a Send from a callback fails at
	// once). Must be > 0.
	//
	// When the brokers take records more slowly than Send hands them
	// over, the buffer stays full and is a queue: each record waits about
	// BufferMemory ÷ the brokers' byte rate before it is sent, and the
	// process holds the whole buffer. A smaller buffer then need not cost
	// throughput: on a 3-broker cluster that set the pace, 4 MiB (8 MiB
	// with 1 MiB batches) sent as many records per second as 32 MiB, at a
	// sixth to a tenth of the median latency and about a third of the
	// memory (BENCHMARKS.md). Leave room for a few batches of every
	// partition written to; a larger buffer rides out bursts and broker
	// pauses without blocking Send.
	BufferMemory int64

	// MaxRequestSize is the largest produce request, and so the largest
	// record, in bytes (max.request.size). Default 1048576 (1 MiB). Brokers
	// have their own limit (message.max.bytes). Must be > 0.
	MaxRequestSize int

	// MaxBlock bounds how long Send waits for metadata and buffer space
	// (max.block.ms). Default 60s.
	MaxBlock time.Duration

	// DeliveryTimeout bounds the time from Send returning to the record's
	// callback, retries included (delivery.timeout.ms). Default 120s. Must
	// be at least Linger + RequestTimeout; if it was left at its default,
	// Validate raises it to that sum instead of failing, and NewProducer
	// logs a warning saying so, as Java does.
	DeliveryTimeout time.Duration

	// RequestTimeout is how long the producer waits for a response before
	// it fails the request and closes the connection
	// (request.timeout.ms). Default 30s. It is also sent as the produce
	// request's timeout for acks=all replication.
	RequestTimeout time.Duration

	// RetryBackoff is the first wait before resending a failed request;
	// it doubles on each further failure up to RetryBackoffMax, with ±20%
	// jitter (retry.backoff.ms). Default 100ms.
	RetryBackoff time.Duration

	// RetryBackoffMax caps the retry backoff (retry.backoff.max.ms).
	// Default 1s. If RetryBackoff is larger, Validate lowers RetryBackoff
	// to RetryBackoffMax, which then applies as a constant backoff, and
	// NewProducer logs a warning (as in Java).
	RetryBackoffMax time.Duration

	// CompressionType compresses record batches: "none", "gzip", "snappy",
	// "lz4" or "zstd", lower case (compression.type). Default "none".
	CompressionType string

	// CompressionGzipLevel is the gzip level, 1..9 or -1 for the library
	// default (compression.gzip.level). Default -1.
	CompressionGzipLevel int

	// CompressionLz4Level is the lz4 level, 1..17 (compression.lz4.level).
	// Default 9.
	CompressionLz4Level int

	// CompressionZstdLevel is the zstd level, -131072..22
	// (compression.zstd.level). Default 3.
	CompressionZstdLevel int

	// PartitionerIgnoreKeys: records with a key but no partition are
	// spread like keyless records instead of hashed by key
	// (partitioner.ignore.keys). Default false.
	PartitionerIgnoreKeys bool

	// PartitionerAdaptivePartitioning: keyless records go more often to
	// partitions whose brokers keep up better
	// (partitioner.adaptive.partitioning.enable). Default true.
	PartitionerAdaptivePartitioning bool

	// PartitionerAvailabilityTimeout: with adaptive partitioning, a
	// partition whose leader has had a batch ready to send for this long
	// without taking it gets no keyless records
	// (partitioner.availability.timeout.ms). Default 0, which disables the
	// check.
	PartitionerAvailabilityTimeout time.Duration

	// PartitionerRackAware: keyless records go to partitions whose leader
	// is in ClientRack, to keep produce traffic within one rack or
	// availability zone (partitioner.rack.aware, KIP-1123). Default false.
	// Requires ClientRack. When no partition is led from ClientRack, the
	// records are spread over all partitions as without it. Keyed records
	// are hashed as always, and it has no effect with a Partitioner set.
	// Unless producers and partition leaders are spread alike over the
	// racks, the load on the brokers is not even (see Partitioner).
	PartitionerRackAware bool

	// ClientRack is the rack this producer runs in, as the brokers name
	// theirs in broker.rack: an availability zone, a data center
	// (client.rack). Default "". The producer uses it only for
	// PartitionerRackAware; surrounding spaces are dropped, as in Java.
	ClientRack string

	// MetadataMaxAge forces a metadata refresh after this long even if
	// nothing changed (metadata.max.age.ms). Default 5m.
	MetadataMaxAge time.Duration

	// MetadataMaxIdle: metadata of a topic not produced to for this long
	// is dropped (metadata.max.idle.ms). Default 5m, at least 5s.
	MetadataMaxIdle time.Duration

	// MetadataRecoveryStrategy is what the producer does when the brokers
	// the metadata named stop answering (metadata.recovery.strategy):
	// MetadataRecoveryRebootstrap (the default, as in Java 4.x) asks the
	// bootstrap.servers addresses for metadata again, resolving their
	// names anew; MetadataRecoveryNone keeps asking the known brokers.
	// A rebootstrap happens when none of the known brokers answered a
	// metadata refresh, when one answers REBOOTSTRAP_REQUIRED, or when
	// refreshes have failed for MetadataRecoveryRebootstrapTrigger.
	MetadataRecoveryStrategy string

	// MetadataRecoveryRebootstrapTrigger: metadata refreshes failing for
	// this long cause a rebootstrap
	// (metadata.recovery.rebootstrap.trigger.ms). Default 5m.
	MetadataRecoveryRebootstrapTrigger time.Duration

	// ConnectionsMaxIdle closes connections idle for this long
	// (connections.max.idle.ms). Default 9m. Negative (Java: -1), or 0,
	// never closes idle connections.
	ConnectionsMaxIdle time.Duration

	// ReconnectBackoff is the first wait before reconnecting to a broker
	// that failed; it doubles up to ReconnectBackoffMax, with ±20% jitter
	// (reconnect.backoff.ms). Default 50ms.
	ReconnectBackoff time.Duration

	// ReconnectBackoffMax caps the reconnect backoff
	// (reconnect.backoff.max.ms). Default 1s. As in Java: when
	// reconnect.backoff.ms is given through Set (a properties file) and
	// reconnect.backoff.max.ms is not, and ReconnectBackoffMax is still its
	// 1s default, Validate sets ReconnectBackoffMax to ReconnectBackoff
	// (constant backoff); if ReconnectBackoff is larger,
	// Validate lowers it to ReconnectBackoffMax.
	ReconnectBackoffMax time.Duration

	// SocketConnectionSetupTimeout bounds one connection attempt; it
	// doubles for consecutive failures up to
	// SocketConnectionSetupTimeoutMax, with ±20% jitter
	// (socket.connection.setup.timeout.ms). Default 10s. Must be > 0.
	SocketConnectionSetupTimeout time.Duration

	// SocketConnectionSetupTimeoutMax caps the connection setup timeout
	// (socket.connection.setup.timeout.max.ms). Default 30s. If
	// SocketConnectionSetupTimeout is larger, Validate lowers it to this
	// value (a constant timeout) and NewProducer logs a warning, as in
	// Java.
	SocketConnectionSetupTimeoutMax time.Duration

	// SendBufferBytes is the TCP send buffer (SO_SNDBUF) size
	// (send.buffer.bytes). Default 131072; -1 (or 0) keeps the OS
	// default, which Linux grows as a connection needs it. -1 can do
	// better with requests of more than a few hundred KiB (large batches:
	// less system time in BENCHMARKS.md) and on links with a long round
	// trip (more bytes in flight). Not applied when a custom Dial returns
	// something other than a *net.TCPConn.
	SendBufferBytes int

	// ReceiveBufferBytes is the TCP receive buffer (SO_RCVBUF) size
	// (receive.buffer.bytes). Default 32768; -1 (or 0) keeps the OS
	// default. Not applied when a custom Dial returns something other
	// than a *net.TCPConn.
	ReceiveBufferBytes int

	// SecurityProtocol is how connections are secured
	// (security.protocol): PLAINTEXT, SSL (TLS), SASL_PLAINTEXT (SASL
	// without TLS: only for networks you trust, PLAIN then sends the
	// password as is) or SASL_SSL, any case. Default PLAINTEXT. It must
	// match the listener of the brokers' ports in BootstrapServers; a
	// mismatch fails with an error that asks about it (kerr.ErrTLS,
	// kerr.ErrAuthentication). See the SSL* and SASL* fields.
	SecurityProtocol string

	// TLSConfig is the TLS configuration for SSL and SASL_SSL, for
	// callers that build their own (certificates from a secrets manager,
	// custom verification). No Java property. Default nil: built from
	// the SSL* fields. When set, the SSL* certificate and key fields must
	// be empty; it is used as given except that an empty ServerName is
	// set to each broker's host, for the certificate check.
	TLSConfig *tls.Config

	// SSLTruststoreLocation is a PEM file with the CA certificates that
	// broker certificates must chain to (ssl.truststore.location).
	// Default "": the system's CAs (Java: the JVM's).
	SSLTruststoreLocation string

	// SSLTruststoreCertificates is the same CA certificates as PEM text
	// (ssl.truststore.certificates). Default "".
	SSLTruststoreCertificates string

	// SSLTruststoreType is the format of the truststore
	// (ssl.truststore.type). Default and only value: PEM. Java's default
	// is JKS, which kprod cannot read: Validate says how to convert a JKS
	// or PKCS12 store.
	SSLTruststoreType string

	// SSLKeystoreLocation is a PEM file with the client's private key and
	// its certificate chain, for brokers that authenticate clients by
	// certificate (mutual TLS, ssl.client.auth=required)
	// (ssl.keystore.location). Default "": no client certificate.
	SSLKeystoreLocation string

	// SSLKeystoreCertificateChain and SSLKeystoreKey are the client's
	// certificate chain and private key as PEM text, instead of
	// SSLKeystoreLocation (ssl.keystore.certificate.chain,
	// ssl.keystore.key). Default "".
	SSLKeystoreCertificateChain string
	SSLKeystoreKey              string

	// SSLKeystoreType is the format of the keystore (ssl.keystore.type).
	// Default and only value: PEM (Java's default JKS: see
	// SSLTruststoreType).
	SSLKeystoreType string

	// SSLKeyPassword decrypts the private key, if it is an encrypted
	// PKCS#8 key (-----BEGIN ENCRYPTED PRIVATE KEY-----, PBES2, as
	// "openssl pkcs8 -topk8 -v2 aes-256-cbc" writes) (ssl.key.password).
	// Default "": the key is not encrypted. OpenSSL's legacy encryption
	// (Proc-Type: 4,ENCRYPTED) is refused, as in Java.
	SSLKeyPassword string

	// SSLEndpointIdentificationAlgorithm is "https" to check that the
	// broker's certificate is for the host dialed, or "" not to check
	// (the chain is still verified against the truststore)
	// (ssl.endpoint.identification.algorithm). Default "https".
	SSLEndpointIdentificationAlgorithm string

	// SSLEnabledProtocols are the TLS versions offered
	// (ssl.enabled.protocols): TLSv1.2 and/or TLSv1.3. Default both.
	// TLSv1 and TLSv1.1, listed with one of them (Kafka's default before
	// 2.5), are skipped with a warning, as current JDKs skip them.
	SSLEnabledProtocols []string

	// SSLProtocol caps the TLS version (ssl.protocol): TLSv1.3, TLSv1.2,
	// or TLS (the newest). Default TLSv1.3.
	SSLProtocol string

	// SSLCipherSuites are the TLS 1.2 cipher suites offered, by their
	// IANA names as Java takes them (ssl.cipher.suites). Default nil:
	// Go's secure defaults. TLS 1.3 suites may be listed but are not
	// selectable in Go (all three are used). As in Java, a TLS version
	// none of whose suites is listed is not used: only TLS 1.3 suites
	// mean TLS 1.3 only, only TLS 1.2 suites TLS 1.2 only.
	SSLCipherSuites []string

	// SASLMechanism is the SASL mechanism for SASL_PLAINTEXT and SASL_SSL
	// (sasl.mechanism): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
	// OAUTHBEARER. Default GSSAPI, as in Java, which kprod does not
	// implement: Validate asks for one of the others when the protocol
	// uses SASL.
	SASLMechanism string

	// SASLJAASConfig is Java's JAAS configuration (sasl.jaas.config):
	// for PLAIN and SCRAM, PlainLoginModule or ScramLoginModule with
	// username and password options,
	//	org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
	// for OAUTHBEARER, OAuthBearerLoginModule with the unsecured-token
	// options (unsecuredLoginStringClaim_sub=...; development only).
	// Default "". Alternatively set SASLUsername and SASLPassword.
	SASLJAASConfig string

	// SASLUsername and SASLPassword are the PLAIN or SCRAM credentials,
	// instead of SASLJAASConfig. No Java property. Default "".
	SASLUsername string
	SASLPassword string

	// SASLOAuthTokenSource supplies the tokens of OAUTHBEARER; it is
	// asked on every connection and every re-authentication (see
	// OAuthTokenSource). No Java property: kprod does not fetch tokens
	// from an OAuth server itself (sasl.oauthbearer.token.endpoint.url is
	// ignored). Default nil.
	SASLOAuthTokenSource OAuthTokenSource

	// IgnoredProperties lists the Java-only properties Set accepted and
	// ignored (key.serializer, interceptor.classes, the JVM-side TLS
	// settings such as ssl.keymanager.algorithm, ...; see
	// ConfigFromProperties), so that a Java producer.properties loads
	// unchanged and you can see what had no effect.
	IgnoredProperties []string

	// AllowAutoCreateTopics lets the brokers create a topic the producer
	// asks metadata for, when the brokers have auto.create.topics.enable
	// (the Java producer always allows it). Default true. Java property
	// name (from the consumer): allow.auto.create.topics.
	AllowAutoCreateTopics bool

	// Logger receives the producer's log records (connection, metadata
	// and retry events at debug level, with broker, topic and partition
	// attributes; a few rare events at info level: transactions
	// initialized, a rebootstrap, an epoch recovered; warnings and errors
	// otherwise). nil logs warnings and errors to stderr;
	// slog.New(slog.DiscardHandler) silences it. A few rare events are
	// logged while the producer holds a lock of its own, so a handler
	// must not call the Producer, and should not block for long. No Java
	// property.
	Logger *slog.Logger

	// Dial opens connections to brokers; nil uses a net.Dialer. For
	// tests, proxies and custom transports. With SSL and SASL_SSL, kprod
	// does the TLS handshake on the connection Dial returns (checking the
	// certificate against the host of the address it asked for). No Java
	// property.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Partitioner chooses the partition of records that do not name one
	// (Java: partitioner.class). Default nil: the built-in partitioner,
	// Java's default (murmur2 of the key, else uniform sticky, adaptive;
	// see Partitioner). RoundRobinPartitioner() is Java's
	// RoundRobinPartitioner, which Set("partitioner.class",
	// JavaRoundRobinPartitioner) selects; other Java class names are
	// ignored. With a Partitioner set, partitioner.ignore.keys,
	// partitioner.adaptive.partitioning.enable,
	// partitioner.availability.timeout.ms and partitioner.rack.aware have
	// no effect, as in Java.
	Partitioner Partitioner

	// Interceptors see each record before it is partitioned and each
	// outcome before the record's callback, in slice order (Java:
	// interceptor.classes, which Set ignores as it names Java classes).
	// Default none. See Interceptor.
	Interceptors []Interceptor

	// setByName records the properties given through Set whose mere
	// presence changes what Java derives (see Validate).
	setByName setFlags

	// warnings are what Validate changed where the Java producer logs a
	// warning about it; NewProducer logs them.
	warnings []string
}

// warn records a warning for NewProducer to log, once.
func (c *Config) warn(msg string) {
	if !slices.Contains(c.warnings, msg) {
		// Clip: copies of a Config must not share the appended element.
		c.warnings = append(slices.Clip(c.warnings), msg)
	}
}

// setFlags are properties given through Set where Java's behaviour depends
// on whether the user configured them at all, not only on their values.
type setFlags uint8

const (
	setDeliveryTimeout setFlags = 1 << iota
	setReconnectBackoff
	setReconnectBackoffMax
)

// Defaults, as in the Kafka 4.x Java producer.
const (
	defaultDeliveryTimeout     = 120 * time.Second
	defaultReconnectBackoffMax = 1000 * time.Millisecond
	maxIdempotentInFlight      = 5
	minMetadataMaxIdle         = 5 * time.Second
	maxInt32Ms                 = time.Duration(math.MaxInt32) * time.Millisecond
	defaultSecurityProtocol    = SecurityPlaintext
	defaultCompressionType     = CompressionNone
	defaultCompressionGzipLvl  = -1
	defaultCompressionLz4Lvl   = 9
	defaultCompressionZstdLvl  = 3
	minCompressionZstdLvl      = -131072
	maxCompressionZstdLvl      = 22
	maxCompressionLz4Lvl       = 17
	maxCompressionGzipLvl      = 9
	minSocketBufferBytesOSDflt = -1
)

// DefaultConfig returns a Config holding every default of the Kafka 4.x
// Java producer. Only BootstrapServers must be filled in.
func DefaultConfig() Config {
	return Config{
		Acks:                               AcksAll,
		TransactionTimeout:                 60 * time.Second,
		Retries:                            math.MaxInt32,
		MaxInFlight:                        5,
		Linger:                             5 * time.Millisecond,
		BatchSize:                          16384,
		BufferMemory:                       32 * 1024 * 1024,
		MaxRequestSize:                     1024 * 1024,
		MaxBlock:                           60 * time.Second,
		DeliveryTimeout:                    defaultDeliveryTimeout,
		RequestTimeout:                     30 * time.Second,
		RetryBackoff:                       100 * time.Millisecond,
		RetryBackoffMax:                    1000 * time.Millisecond,
		CompressionType:                    defaultCompressionType,
		CompressionGzipLevel:               defaultCompressionGzipLvl,
		CompressionLz4Level:                defaultCompressionLz4Lvl,
		CompressionZstdLevel:               defaultCompressionZstdLvl,
		PartitionerIgnoreKeys:              false,
		AllowAutoCreateTopics:              true,
		PartitionerAdaptivePartitioning:    true,
		PartitionerAvailabilityTimeout:     0,
		MetadataMaxAge:                     5 * time.Minute,
		MetadataMaxIdle:                    5 * time.Minute,
		MetadataRecoveryStrategy:           MetadataRecoveryRebootstrap,
		MetadataRecoveryRebootstrapTrigger: 5 * time.Minute,
		ConnectionsMaxIdle:                 9 * time.Minute,
		ReconnectBackoff:                   50 * time.Millisecond,
		ReconnectBackoffMax:                defaultReconnectBackoffMax,
		SocketConnectionSetupTimeout:       10 * time.Second,
		SocketConnectionSetupTimeoutMax:    30 * time.Second,
		SendBufferBytes:                    128 * 1024,
		ReceiveBufferBytes:                 32 * 1024,
		SecurityProtocol:                   defaultSecurityProtocol,
		SSLTruststoreType:                  defaultSSLStoreType,
		SSLKeystoreType:                    defaultSSLStoreType,
		SSLEndpointIdentificationAlgorithm: defaultEndpointIDAlgo,
		SSLEnabledProtocols:                defaultSSLEnabledProtocols(),
		SSLProtocol:                        defaultSSLProtocol,
		SASLMechanism:                      SASLGSSAPI,
	}
}

// ConfigError is a configuration value Validate or Set rejected. It wraps
// kerr.ErrInvalidConfig (kprod.ErrInvalidConfig), so errors.Is works on it,
// and every error from Validate, Set, ConfigFromProperties and
// ConfigFromFile that is about a value is one (get it with errors.As).
type ConfigError struct {
	Property string // the Java property name, e.g. "linger.ms"
	Value    string // the rejected value, as text (durations in ms)
	Reason   string // what is allowed, or which other setting conflicts
}

func (e *ConfigError) Error() string {
	v := e.Value
	if len(v) > maxShownValue {
		// PEM text given inline, say: the start names it well enough.
		v = v[:maxShownValue] + fmt.Sprintf("... (%d bytes)", len(e.Value))
	}
	if v == "" || strings.ContainsAny(v, " \t\r\n\"'") {
		v = strconv.Quote(v)
	}
	return fmt.Sprintf("%v: %s=%s: %s", kerr.ErrInvalidConfig, e.Property, v, e.Reason)
}

func (e *ConfigError) Unwrap() error { return kerr.ErrInvalidConfig }

// maxShownValue is how much of a value a ConfigError's message shows
// (Value keeps all of it).
const maxShownValue = 120

// zeroHint is added to errors caused by a field at its Go zero value when
// that value is not valid: the likely cause is a Config built without
// DefaultConfig, though the value may also have been set to 0 on purpose
// (a properties file), so the hint says "if".
const zeroHint = " (this is also the Go zero value: if you built the Config by hand, start from kprod.DefaultConfig() and change only the fields you need)"

func invalid(prop, value, reason string) *ConfigError {
	if isSecret(prop) && value != "" {
		value = "[hidden]" // a password, a key or a JAAS configuration with one
	}
	return &ConfigError{Property: prop, Value: value, Reason: reason}
}

// ms formats a duration the way the Java property holds it: whole
// milliseconds, or a Go duration when it has a fraction of a millisecond.
func ms(d time.Duration) string {
	if d%time.Millisecond == 0 {
		return strconv.FormatInt(int64(d/time.Millisecond), 10)
	}
	return d.String()
}

// Idempotent reports whether the producer will be idempotent: the effective
// value of enable.idempotence after the Java rules (see EnableIdempotence).
// It is meaningful for a Config that passed Validate.
func (c *Config) Idempotent() bool {
	if c.EnableIdempotence != nil {
		return *c.EnableIdempotence
	}
	return c.Acks == AcksAll && c.Retries > 0
}

// Validate checks every bound and cross-field rule and returns the first
// violation as a *ConfigError wrapping kerr.ErrInvalidConfig, naming the
// Java property, the value and what is allowed.
//
// Where the Java client silently derives a value, Validate does the same
// and updates the Config:
//   - BootstrapServers entries are trimmed, and a "SCHEME://" prefix that
//     Java tolerates ("PLAINTEXT://b1:9092") is dropped; empty entries
//     are skipped and a broker listed twice is kept once;
//   - SecurityProtocol and SASLMechanism are upper-cased, ClientRack
//     and TransactionalID are trimmed (a blank TransactionalID is an
//     error), MetadataRecoveryStrategy is trimmed and lower-cased;
//   - DeliveryTimeout left at its default is raised to Linger +
//     RequestTimeout when smaller (NewProducer logs a warning, as Java);
//   - reconnect.backoff.ms given by Set without reconnect.backoff.max.ms,
//     ReconnectBackoffMax left at its default, sets ReconnectBackoffMax =
//     ReconnectBackoff;
//   - a backoff or setup timeout larger than its maximum is lowered to the
//     maximum (RetryBackoff, ReconnectBackoff,
//     SocketConnectionSetupTimeout; for RetryBackoff and
//     SocketConnectionSetupTimeout NewProducer logs a warning, as Java).
//
// Validate is idempotent: a Config that passed passes again unchanged.
func (c *Config) Validate() error {
	if err := c.validateBootstrap(); err != nil {
		return err
	}
	if err := c.validateBounds(); err != nil {
		return err
	}
	c.deriveTimeouts()
	if err := c.validateDeliveryTimeout(); err != nil {
		return err
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if err := c.validateIdempotence(); err != nil {
		return err
	}
	return c.validateRack()
}

// validateRack is the check of Java's RecordAccumulator.PartitionerConfig,
// made when the producer is built: after ProducerConfig's own checks, and
// whether or not a custom partitioner is set.
func (c *Config) validateRack() error {
	c.ClientRack = strings.TrimSpace(c.ClientRack)
	if c.PartitionerRackAware && c.ClientRack == "" {
		return invalid("client.rack", c.ClientRack,
			"must be set when partitioner.rack.aware=true; set it to the broker.rack of the brokers near this producer (its availability zone), or set partitioner.rack.aware=false")
	}
	return nil
}

func (c *Config) validateBootstrap() error {
	const prop = "bootstrap.servers"
	if len(c.BootstrapServers) == 0 {
		return invalid(prop, "", `required: list one or more brokers as "host:port[,host:port...]"`)
	}
	// As Java's ClientUtils.parseAndValidateAddresses, empty entries (a
	// trailing comma) are skipped; a broker listed twice is kept once.
	seen := make(map[string]bool, len(c.BootstrapServers))
	addrs := make([]string, 0, len(c.BootstrapServers))
	for _, s := range c.BootstrapServers {
		if strings.TrimSpace(s) == "" {
			continue
		}
		addr, reason := parseBootstrap(s)
		if reason != "" {
			return invalid(prop, strings.Join(c.BootstrapServers, ","), fmt.Sprintf("entry %q %s", s, reason))
		}
		if !seen[addr] {
			seen[addr] = true
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) == 0 {
		return invalid(prop, strings.Join(c.BootstrapServers, ","), `required: list one or more brokers as "host:port[,host:port...]"`)
	}
	// Replace rather than modify the slice: the caller may share it.
	if !slices.Equal(addrs, c.BootstrapServers) {
		c.BootstrapServers = addrs
	}
	return nil
}

// parseBootstrap checks one bootstrap.servers entry and returns it as
// host:port, or why it is invalid. Like the Java client it accepts an
// optional "SCHEME://" prefix and brackets around IPv6 addresses.
func parseBootstrap(s string) (addr, reason string) {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if several(s) {
			return "", `holds several addresses: separate brokers with commas ("host1:port1,host2:port2")`
		}
		return "", `is not "host:port" (IPv6: "[addr]:port")`
	}
	if host == "" {
		return "", "has no host"
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", "has an invalid port; it must be 1..65535"
	}
	return net.JoinHostPort(host, port), ""
}

// several reports whether s is two or more valid addresses separated by
// spaces or ';' rather than by the commas of a Java list.
func several(s string) bool {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == ';' || unicode.IsSpace(r) })
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if _, reason := parseBootstrap(p); reason != "" {
			return false
		}
	}
	return true
}

// A bound is one field's allowed range. Validate walks them in the order
// of this table; each has the Java property name for the message.
type bound struct {
	prop     string
	val      int64  // the field's value; durations in nanoseconds
	shown    string // the value as the error shows it
	min, max int64
	allowed  string // what the error says is allowed
	zeroBad  bool   // the Go zero value is outside the range
}

func intBound(prop string, v, lo, hi int64, allowed string) bound {
	return bound{prop: prop, val: v, shown: strconv.FormatInt(v, 10), min: lo, max: hi, allowed: allowed, zeroBad: lo > 0 || hi < 0}
}

func durBound(prop string, d, lo, hi time.Duration, allowed string) bound {
	return bound{prop: prop, val: int64(d), shown: ms(d), min: int64(lo), max: int64(hi), allowed: allowed, zeroBad: lo > 0}
}

func (c *Config) validateBounds() error {
	const anyDur = time.Duration(math.MaxInt64)
	bounds := []bound{
		intBound("acks", int64(c.Acks), -1, 1, `must be "all" (-1), "0" or "1"`),
		durBound("linger.ms", c.Linger, 0, anyDur, "must be >= 0"),
		intBound("batch.size", int64(c.BatchSize), 0, math.MaxInt32, "must be 0..2147483647 (0 sends each record in its own batch)"),
		intBound("buffer.memory", c.BufferMemory, 1, math.MaxInt64, "must be > 0"),
		intBound("max.request.size", int64(c.MaxRequestSize), 1, math.MaxInt32, "must be 1..2147483647"),
		durBound("max.block.ms", c.MaxBlock, 0, anyDur, "must be >= 0"),
		durBound("delivery.timeout.ms", c.DeliveryTimeout, 0, maxInt32Ms, "must be 0..2147483647 ms"),
		durBound("request.timeout.ms", c.RequestTimeout, 0, maxInt32Ms, "must be 0..2147483647 ms"),
		durBound("retry.backoff.ms", c.RetryBackoff, 0, anyDur, "must be >= 0"),
		durBound("retry.backoff.max.ms", c.RetryBackoffMax, 0, anyDur, "must be >= 0"),
		intBound("retries", int64(c.Retries), 0, math.MaxInt32, "must be 0..2147483647"),
		intBound("max.in.flight.requests.per.connection", int64(c.MaxInFlight), 1, math.MaxInt32, "must be >= 1"),
		durBound("metadata.max.age.ms", c.MetadataMaxAge, 0, anyDur, "must be >= 0"),
		durBound("metadata.max.idle.ms", c.MetadataMaxIdle, minMetadataMaxIdle, anyDur, "must be at least 5000 ms"),
		durBound("metadata.recovery.rebootstrap.trigger.ms", c.MetadataRecoveryRebootstrapTrigger, 0, anyDur, "must be >= 0"),
		durBound("reconnect.backoff.ms", c.ReconnectBackoff, 0, anyDur, "must be >= 0"),
		durBound("reconnect.backoff.max.ms", c.ReconnectBackoffMax, 0, anyDur, "must be >= 0"),
		durBound("socket.connection.setup.timeout.ms", c.SocketConnectionSetupTimeout, time.Millisecond, anyDur, "must be at least 1 ms"),
		durBound("socket.connection.setup.timeout.max.ms", c.SocketConnectionSetupTimeoutMax, time.Millisecond, anyDur, "must be at least 1 ms"),
		intBound("compression.lz4.level", int64(c.CompressionLz4Level), 1, maxCompressionLz4Lvl, "must be 1..17"),
		intBound("compression.zstd.level", int64(c.CompressionZstdLevel), minCompressionZstdLvl, maxCompressionZstdLvl, "must be -131072..22"),
		durBound("partitioner.availability.timeout.ms", c.PartitionerAvailabilityTimeout, 0, anyDur, "must be >= 0 (0 disables it)"),
		durBound("transaction.timeout.ms", c.TransactionTimeout, 0, maxInt32Ms, "must be 0..2147483647 ms"),
		intBound("send.buffer.bytes", int64(c.SendBufferBytes), minSocketBufferBytesOSDflt, math.MaxInt32, "must be -1 (OS default) or 0..2147483647"),
		intBound("receive.buffer.bytes", int64(c.ReceiveBufferBytes), minSocketBufferBytesOSDflt, math.MaxInt32, "must be -1 (OS default) or 0..2147483647"),
	}
	for _, b := range bounds {
		if b.val < b.min || b.val > b.max {
			reason := b.allowed
			if b.val == 0 && b.zeroBad {
				reason += zeroHint
			}
			return invalid(b.prop, b.shown, reason)
		}
	}

	// A batch is taken from buffer.memory whole: a larger batch.size would
	// fail every record (Java fails them at send, saying so).
	if int64(c.BatchSize) > c.BufferMemory {
		return invalid("batch.size", strconv.Itoa(c.BatchSize),
			fmt.Sprintf("must not exceed buffer.memory (%d): every batch is taken from it; lower batch.size or raise buffer.memory", c.BufferMemory))
	}

	// gzip takes 1..9 or -1, which a single range cannot say.
	if l := c.CompressionGzipLevel; l != defaultCompressionGzipLvl && (l < 1 || l > maxCompressionGzipLvl) {
		reason := "must be 1..9, or -1 for the library default"
		if l == 0 {
			reason += zeroHint
		}
		return invalid("compression.gzip.level", strconv.Itoa(l), reason)
	}
	switch c.CompressionType {
	case CompressionNone, CompressionGzip, CompressionSnappy, CompressionLz4, CompressionZstd:
	default:
		reason := `must be one of none, gzip, snappy, lz4, zstd (lower case)`
		if c.CompressionType == "" {
			reason += zeroHint
		}
		return invalid("compression.type", c.CompressionType, reason)
	}
	// Java: CaseInsensitiveValidString.
	if l := strings.ToLower(strings.TrimSpace(c.MetadataRecoveryStrategy)); l == MetadataRecoveryRebootstrap || l == MetadataRecoveryNone {
		c.MetadataRecoveryStrategy = l
	}
	switch c.MetadataRecoveryStrategy {
	case MetadataRecoveryRebootstrap, MetadataRecoveryNone:
	default:
		reason := `must be "rebootstrap" or "none"`
		if c.MetadataRecoveryStrategy == "" {
			reason += zeroHint
		}
		return invalid("metadata.recovery.strategy", c.MetadataRecoveryStrategy, reason)
	}
	if c.TransactionalID != "" {
		// Java trims string settings, and then refuses an empty id.
		id := strings.TrimSpace(c.TransactionalID)
		if id == "" {
			return invalid("transactional.id", strconv.Quote(c.TransactionalID),
				"must not be blank; give the transaction id, or leave it empty for a producer without transactions")
		}
		c.TransactionalID = id
	}
	if c.TransactionalID != "" && c.TransactionTimeout < time.Millisecond {
		return invalid("transaction.timeout.ms", ms(c.TransactionTimeout),
			"must be at least 1 ms when transactional.id is set; the broker rejects shorter timeouts")
	}
	return nil
}

// deriveTimeouts applies the Java client's silent adjustments of backoffs
// and setup timeouts (see Validate).
func (c *Config) deriveTimeouts() {
	// CommonClientConfigs.postProcessReconnectBackoffConfigs: a configured
	// base without a configured max turns exponential backoff off.
	// (A max set in code, not by name, counts as configured when it is
	// not the default.)
	if c.setByName&setReconnectBackoff != 0 && c.setByName&setReconnectBackoffMax == 0 && c.ReconnectBackoffMax == defaultReconnectBackoffMax {
		c.ReconnectBackoffMax = c.ReconnectBackoff
	}
	// Java's ExponentialBackoff starts at min(base, max): a base above the
	// max gives a constant backoff (or timeout) of max. For the retry
	// backoff and the setup timeout Java warns about it
	// (CommonClientConfigs.warnDisablingExponentialBackoff).
	if c.RetryBackoff > c.RetryBackoffMax {
		c.warn(staticWarning("retry.backoff.ms", "retry.backoff.max.ms", "backoff", c.RetryBackoff, c.RetryBackoffMax))
		c.RetryBackoff = c.RetryBackoffMax
	}
	c.ReconnectBackoff = min(c.ReconnectBackoff, c.ReconnectBackoffMax)
	if c.SocketConnectionSetupTimeout > c.SocketConnectionSetupTimeoutMax {
		c.warn(staticWarning("socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", "connection setup timeout",
			c.SocketConnectionSetupTimeout, c.SocketConnectionSetupTimeoutMax))
		c.SocketConnectionSetupTimeout = c.SocketConnectionSetupTimeoutMax
	}
}

// staticWarning says that base, above its maximum, gives way to it.
func staticWarning(base, maxProp, what string, v, maxV time.Duration) string {
	return fmt.Sprintf("%s=%s is above %s=%s: a constant %s of %s ms applies; lower %s or raise %s",
		base, ms(v), maxProp, ms(maxV), what, ms(maxV), base, maxProp)
}

func (c *Config) validateDeliveryTimeout() error {
	// As Java: linger capped to an int of ms, the sum capped likewise
	// (RequestTimeout is already known to fit, so nothing overflows).
	need := min(min(c.Linger, maxInt32Ms)+c.RequestTimeout, maxInt32Ms)
	if c.DeliveryTimeout >= need {
		return nil
	}
	explicit := c.setByName&setDeliveryTimeout != 0 || c.DeliveryTimeout != defaultDeliveryTimeout
	if !explicit {
		// Java keeps old configurations working: an unset delivery
		// timeout grows to cover linger + one request, with a warning.
		c.warn(fmt.Sprintf("delivery.timeout.ms (default %s ms) is below linger.ms + request.timeout.ms = %s + %s ms: using %s ms; set delivery.timeout.ms to choose the delivery timeout",
			ms(c.DeliveryTimeout), ms(c.Linger), ms(c.RequestTimeout), ms(need)))
		c.DeliveryTimeout = need
		return nil
	}
	return invalid("delivery.timeout.ms", ms(c.DeliveryTimeout), fmt.Sprintf(
		"must be at least linger.ms + request.timeout.ms = %s + %s = %s ms; raise delivery.timeout.ms or lower linger.ms or request.timeout.ms",
		ms(c.Linger), ms(c.RequestTimeout), ms(need)))
}

func (c *Config) validateSecurity() error {
	const prop = "security.protocol"
	p := strings.ToUpper(strings.TrimSpace(c.SecurityProtocol))
	switch p {
	case SecurityPlaintext, SecuritySSL, SecuritySASLPlaintext, SecuritySASLSSL:
		c.SecurityProtocol = p
		c.SASLMechanism = strings.ToUpper(strings.TrimSpace(c.SASLMechanism))
		return c.validateTLSAndSASL()
	case "":
		return invalid(prop, c.SecurityProtocol, "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"+zeroHint)
	default:
		return invalid(prop, c.SecurityProtocol, "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
	}
}

// validateIdempotence follows ProducerConfig.postProcessAndValidateIdempotenceConfigs
// of Kafka 4.x, in the same order, so that the same properties are
// accepted or rejected as by the Java producer.
func (c *Config) validateIdempotence() error {
	explicit := c.EnableIdempotence != nil
	if explicit && *c.EnableIdempotence {
		if c.Retries == 0 {
			return invalid("enable.idempotence", "true",
				"conflicts with retries=0: the idempotent producer needs retries > 0; raise retries or set enable.idempotence=false")
		}
		if c.Acks != AcksAll {
			return invalid("enable.idempotence", "true", fmt.Sprintf(
				"conflicts with acks=%s: the idempotent producer needs acks=all; set acks=all or enable.idempotence=false", c.Acks))
		}
	}
	if !explicit || *c.EnableIdempotence {
		// Unlike acks and retries, more than 5 in flight does not turn
		// default idempotence off: since Kafka 4.0 it is an error unless
		// idempotence is explicitly disabled.
		if c.MaxInFlight > maxIdempotentInFlight {
			why := "enable.idempotence=true"
			if !explicit {
				why = "idempotence, which is on by default (enable.idempotence)"
			}
			return invalid("max.in.flight.requests.per.connection", strconv.Itoa(c.MaxInFlight), fmt.Sprintf(
				"must be at most 5 with %s; lower it, or set enable.idempotence=false to allow more (a retry may then reorder records)", why))
		}
	}
	if c.TransactionalID != "" && !c.Idempotent() {
		var why string
		switch {
		case explicit:
			why = "enable.idempotence=false"
		case c.Retries == 0:
			why = "retries=0, which turns idempotence off"
		default:
			why = fmt.Sprintf("acks=%s, which turns idempotence off", c.Acks)
		}
		return invalid("transactional.id", c.TransactionalID, fmt.Sprintf(
			"requires idempotence, but it is off because of %s; remove that setting or the transactional.id", why))
	}
	return nil
}

// knownSecurityProtocol reports whether p names a Java security protocol
// (any case).
func knownSecurityProtocol(p string) bool {
	return slices.Contains([]string{SecurityPlaintext, SecuritySSL, SecuritySASLPlaintext, SecuritySASLSSL}, strings.ToUpper(p))
}
