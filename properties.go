package kprod

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/kprod/kprod/kerr"
)

// A setter parses one property value the way Java's ConfigDef does and
// stores it in the Config. Range checks are left to Validate, which holds
// every bound.
type setter func(c *Config, name, value string) error

// properties maps each Java producer property kprod implements to its
// setter.
var properties = map[string]setter{
	"bootstrap.servers": func(c *Config, name, v string) error {
		c.BootstrapServers = parseList(v)
		return nil
	},
	"client.id": func(c *Config, name, v string) error {
		c.ClientID = strings.TrimSpace(v)
		return nil
	},
	"acks": func(c *Config, name, v string) error {
		switch strings.TrimSpace(v) {
		case "all", "-1":
			c.Acks = AcksAll
		case "0":
			c.Acks = AcksNone
		case "1":
			c.Acks = AcksLeader
		default:
			return invalid(name, v, `must be "all", "-1", "0" or "1"`)
		}
		return nil
	},
	"enable.idempotence": func(c *Config, name, v string) error {
		b, err := parseBool(name, v)
		if err == nil {
			c.EnableIdempotence = &b
		}
		return err
	},
	"transactional.id": func(c *Config, name, v string) error {
		v = strings.TrimSpace(v)
		if v == "" {
			return invalid(name, v, "must not be empty; leave the property out for a producer without transactions")
		}
		c.TransactionalID = v
		return nil
	},
	"transaction.timeout.ms":                   msInt32(func(c *Config) *time.Duration { return &c.TransactionTimeout }),
	"retries":                                  int32Field(func(c *Config) *int { return &c.Retries }),
	"linger.ms":                                msInt64(func(c *Config) *time.Duration { return &c.Linger }),
	"batch.size":                               int32Field(func(c *Config) *int { return &c.BatchSize }),
	"max.request.size":                         int32Field(func(c *Config) *int { return &c.MaxRequestSize }),
	"max.block.ms":                             msInt64(func(c *Config) *time.Duration { return &c.MaxBlock }),
	"request.timeout.ms":                       msInt32(func(c *Config) *time.Duration { return &c.RequestTimeout }),
	"retry.backoff.ms":                         msInt64(func(c *Config) *time.Duration { return &c.RetryBackoff }),
	"retry.backoff.max.ms":                     msInt64(func(c *Config) *time.Duration { return &c.RetryBackoffMax }),
	"compression.gzip.level":                   int32Field(func(c *Config) *int { return &c.CompressionGzipLevel }),
	"compression.lz4.level":                    int32Field(func(c *Config) *int { return &c.CompressionLz4Level }),
	"compression.zstd.level":                   int32Field(func(c *Config) *int { return &c.CompressionZstdLevel }),
	"metadata.max.age.ms":                      msInt64(func(c *Config) *time.Duration { return &c.MetadataMaxAge }),
	"metadata.max.idle.ms":                     msInt64(func(c *Config) *time.Duration { return &c.MetadataMaxIdle }),
	"metadata.recovery.rebootstrap.trigger.ms": msInt64(func(c *Config) *time.Duration { return &c.MetadataRecoveryRebootstrapTrigger }),
	"metadata.recovery.strategy": func(c *Config, name, v string) error {
		// Java reads the value case-insensitively.
		c.MetadataRecoveryStrategy = strings.ToLower(strings.TrimSpace(v))
		return nil
	},
	"connections.max.idle.ms":                  msInt64(func(c *Config) *time.Duration { return &c.ConnectionsMaxIdle }),
	"send.buffer.bytes":                        int32Field(func(c *Config) *int { return &c.SendBufferBytes }),
	"receive.buffer.bytes":                     int32Field(func(c *Config) *int { return &c.ReceiveBufferBytes }),
	"partitioner.ignore.keys":                  boolField(func(c *Config) *bool { return &c.PartitionerIgnoreKeys }),
	"allow.auto.create.topics":                 boolField(func(c *Config) *bool { return &c.AllowAutoCreateTopics }),
	"reconnect.backoff.ms":                     flagged(setReconnectBackoff, msInt64(func(c *Config) *time.Duration { return &c.ReconnectBackoff })),
	"reconnect.backoff.max.ms":                 flagged(setReconnectBackoffMax, msInt64(func(c *Config) *time.Duration { return &c.ReconnectBackoffMax })),
	"delivery.timeout.ms":                      flagged(setDeliveryTimeout, msInt32(func(c *Config) *time.Duration { return &c.DeliveryTimeout })),
	"max.in.flight.requests.per.connection":    int32Field(func(c *Config) *int { return &c.MaxInFlight }),
	"socket.connection.setup.timeout.ms":       msInt64(func(c *Config) *time.Duration { return &c.SocketConnectionSetupTimeout }),
	"socket.connection.setup.timeout.max.ms":   msInt64(func(c *Config) *time.Duration { return &c.SocketConnectionSetupTimeoutMax }),
	"partitioner.adaptive.partitioning.enable": boolField(func(c *Config) *bool { return &c.PartitionerAdaptivePartitioning }),
	"partitioner.availability.timeout.ms":      msInt64(func(c *Config) *time.Duration { return &c.PartitionerAvailabilityTimeout }),
	"partitioner.rack.aware":                   boolField(func(c *Config) *bool { return &c.PartitionerRackAware }),
	"client.rack":                              trimmed(func(c *Config) *string { return &c.ClientRack }),
	"buffer.memory": func(c *Config, name, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return invalid(name, v, "must be a whole number of bytes (a Java long)")
		}
		c.BufferMemory = n
		return nil
	},
	"partitioner.class": setPartitionerClass,
	"compression.type": func(c *Config, name, v string) error {
		c.CompressionType = strings.TrimSpace(v)
		return nil
	},
	"security.protocol": func(c *Config, name, v string) error {
		v = strings.TrimSpace(v)
		if !knownSecurityProtocol(v) {
			return invalid(name, v, "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
		}
		c.SecurityProtocol = strings.ToUpper(v)
		return nil
	},

	// TLS and SASL; checked by Validate, which loads the files (see
	// security.go). PEM text is kept as given; passwords are trimmed, as
	// Java's ConfigDef trims every value, PASSWORD ones included.
	"ssl.truststore.location":               trimmed(func(c *Config) *string { return &c.SSLTruststoreLocation }),
	"ssl.truststore.certificates":           verbatim(func(c *Config) *string { return &c.SSLTruststoreCertificates }),
	"ssl.truststore.type":                   trimmed(func(c *Config) *string { return &c.SSLTruststoreType }),
	"ssl.keystore.location":                 trimmed(func(c *Config) *string { return &c.SSLKeystoreLocation }),
	"ssl.keystore.certificate.chain":        verbatim(func(c *Config) *string { return &c.SSLKeystoreCertificateChain }),
	"ssl.keystore.key":                      verbatim(func(c *Config) *string { return &c.SSLKeystoreKey }),
	"ssl.keystore.type":                     trimmed(func(c *Config) *string { return &c.SSLKeystoreType }),
	"ssl.key.password":                      trimmed(func(c *Config) *string { return &c.SSLKeyPassword }),
	"ssl.endpoint.identification.algorithm": trimmed(func(c *Config) *string { return &c.SSLEndpointIdentificationAlgorithm }),
	"ssl.protocol":                          trimmed(func(c *Config) *string { return &c.SSLProtocol }),
	"sasl.mechanism":                        trimmed(func(c *Config) *string { return &c.SASLMechanism }),
	"sasl.jaas.config":                      trimmed(func(c *Config) *string { return &c.SASLJAASConfig }),
	"ssl.enabled.protocols": func(c *Config, name, v string) error {
		c.SSLEnabledProtocols = parseList(v)
		return nil
	},
	"ssl.cipher.suites": func(c *Config, name, v string) error {
		c.SSLCipherSuites = parseList(v)
		return nil
	},
}

// trimmed sets a string property with surrounding spaces dropped, as
// Java's ConfigDef does for strings.
func trimmed(field func(*Config) *string) setter {
	return func(c *Config, name, v string) error {
		*field(c) = strings.TrimSpace(v)
		return nil
	}
}

// verbatim sets PEM text as given: PEM parsing ignores the spaces anyway.
func verbatim(field func(*Config) *string) setter {
	return func(c *Config, name, v string) error {
		*field(c) = v
		return nil
	}
}

// javaOnlyProperties are producer properties of the Java client that name
// Java classes or configure JVM-side machinery, or that kprod does not let
// you tune. Set accepts them with any value, records them in
// Config.IgnoredProperties and otherwise ignores them, so that a Java
// producer.properties loads unchanged. The value says why it has no effect.
var javaOnlyProperties = map[string]string{
	"key.serializer":      "Java serializer class; kprod records carry bytes",
	"value.serializer":    "Java serializer class; kprod records carry bytes",
	"interceptor.classes": "Java interceptor classes",
	"metric.reporters":    "Java metrics reporter classes",
	"security.providers":  "Java security provider classes",

	"metrics.sample.window.ms": "Java metrics library setting",
	"metrics.num.samples":      "Java metrics library setting",
	"metrics.recording.level":  "Java metrics library setting",
	"enable.metrics.push":      "client telemetry push (KIP-714) is not implemented",

	"auto.register.schemas":     "Confluent serializer setting; kprod records carry bytes",
	"use.latest.version":        "Confluent serializer setting; kprod records carry bytes",
	"auto.include.jmx.reporter": "removed in Kafka 4.0; kprod has no JMX",

	"client.dns.lookup": "kprod always dials every address a bootstrap name resolves to (Java's default, use_all_dns_ips)",

	// Only false is accepted; see unsupportedValues.
	"transaction.two.phase.commit.enable": "two-phase commit (KIP-939) is not implemented",

	"ssl.truststore.password":            "PEM trust stores have no password (kprod reads PEM only)",
	"ssl.keystore.password":              "PEM key stores have no store password; an encrypted key takes ssl.key.password",
	"ssl.keymanager.algorithm":           "Java key manager factory",
	"ssl.trustmanager.algorithm":         "Java trust manager factory",
	"ssl.secure.random.implementation":   "Java SecureRandom implementation",
	"ssl.provider":                       "Java security provider",
	"ssl.engine.factory.class":           "Java SSL engine factory class",
	"sasl.client.callback.handler.class": "Java SASL callback handler class; OAUTHBEARER tokens come from Config.SASLOAuthTokenSource",
	"sasl.login.callback.handler.class":  "Java login callback handler class; OAUTHBEARER tokens come from Config.SASLOAuthTokenSource",
	"sasl.login.class":                   "Java login class",
}

// removedPartitioners are the partitioner classes Kafka 4.0 removed: a Java
// 4.x producer refuses to start with them, and kprod tells what replaces
// them.
var removedPartitioners = map[string]string{
	"org.apache.kafka.clients.producer.internals.DefaultPartitioner": "remove partitioner.class: the built-in partitioner does what DefaultPartitioner did",
	"org.apache.kafka.clients.producer.UniformStickyPartitioner":     "remove partitioner.class and set partitioner.ignore.keys=true, which does what UniformStickyPartitioner did",
}

// setPartitionerClass maps Java's RoundRobinPartitioner to
// RoundRobinPartitioner, rejects the partitioners Kafka 4.0 removed, and
// accepts and ignores any other class (a custom Java partitioner has to be
// rewritten in Go as a Partitioner), recording it in IgnoredProperties.
func setPartitionerClass(c *Config, name, v string) error {
	class := strings.TrimSpace(v)
	switch {
	case class == JavaRoundRobinPartitioner:
		c.Partitioner = RoundRobinPartitioner()
	case removedPartitioners[class] != "":
		return invalid(name, v, "removed in Kafka 4.0; "+removedPartitioners[class])
	default:
		if !slices.Contains(c.IgnoredProperties, name) {
			c.IgnoredProperties = append(slices.Clip(c.IgnoredProperties), name)
		}
	}
	return nil
}

// javaOnlyPrefixes extend javaOnlyProperties to whole families of names:
// Kerberos (GSSAPI, which Validate rejects), the Java login machinery
// (token refresh, login retries) and its OAuth token fetching, which
// Config.SASLOAuthTokenSource replaces (Validate says so when OAUTHBEARER
// has no token source), the metrics-context labels of Java's metrics
// reporters, and the settings of Confluent's Java serializers (schema
// registry), which a Java producer hands to its serializers and kprod,
// whose records carry bytes, has no use for.
var javaOnlyPrefixes = []string{"sasl.kerberos.", "sasl.login.", "sasl.oauthbearer.", "metrics.context.",
	"schema.registry.", "basic.auth.", "bearer.auth.", "key.subject.name.", "value.subject.name."}

// unsupportedValues are Java-only properties whose non-default values would
// change what the producer guarantees, so ignoring them would be wrong:
// only the listed value is accepted.
var unsupportedValues = map[string]string{
	"transaction.two.phase.commit.enable": "false",
	// Java also has resolve_canonical_bootstrap_servers_only, and refuses
	// any other value.
	"client.dns.lookup": "use_all_dns_ips",
}

// rejectedProperties are Java features kprod cannot honour; a file using
// them would not mean the same thing here.
var rejectedProperties = map[string]string{
	"config.providers": "Java config providers (${provider:path:key} substitution) are not supported; write the resolved values into the properties instead",
}

// Set sets one producer property by its Java name (as in a Java
// producer.properties file) from its string form, parsed as the Java client
// does: integers and longs in decimal, booleans "true"/"false" in any case,
// lists comma-separated, acks "all", "-1", "0" or "1", surrounding spaces
// ignored. *.ms properties are milliseconds.
//
// Java-only properties (key.serializer, interceptor.classes, ...; see
// ConfigFromProperties) are accepted and appended to IgnoredProperties.
// An unknown name is an error that names it and, for a likely typo, the
// known property meant.
//
// Set checks only that the value parses; ranges and conflicts between
// properties are checked by Validate. Errors are *ConfigError values
// wrapping ErrInvalidConfig.
func (c *Config) Set(name, value string) error {
	name = strings.TrimSpace(name)
	if set, ok := properties[name]; ok {
		return set(c, name, value)
	}
	if reason, ok := rejectedProperties[name]; ok || strings.HasPrefix(name, "config.providers.") {
		if !ok {
			reason = rejectedProperties["config.providers"]
		}
		if value != "" {
			// A provider's parameters hold its credentials (a vault
			// token, say), and the reason does not depend on the value.
			value = "[hidden]"
		}
		return invalid(name, value, reason)
	}
	if javaOnly(name) {
		if want, ok := unsupportedValues[name]; ok && !strings.EqualFold(strings.TrimSpace(value), want) {
			return invalid(name, value, fmt.Sprintf("not supported by kprod (%s); only %s is accepted", javaOnlyProperties[name], want))
		}
		if !slices.Contains(c.IgnoredProperties, name) {
			// Clip: copies of a Config must not share the appended element.
			c.IgnoredProperties = append(slices.Clip(c.IgnoredProperties), name)
		}
		return nil
	}
	if looksSecret(name) {
		value = "[hidden]" // a misspelt sasl.jaas.config or ssl.key.password
	}
	return invalid(name, value, unknownReason(name))
}

// looksSecret reports whether an unknown property's value may be a
// password or key, which its error must not show.
func looksSecret(name string) bool {
	n := strings.ToLower(name)
	return isSecret(closestProperty(name)) || strings.Contains(n, "password") ||
		strings.Contains(n, "secret") || strings.Contains(n, "jaas") || strings.HasSuffix(n, ".key")
}

func javaOnly(name string) bool {
	if _, ok := javaOnlyProperties[name]; ok {
		return true
	}
	for _, p := range javaOnlyPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// ConfigFromProperties builds a Config from Java producer properties:
// DefaultConfig, then Set for each property (in name order), then Validate.
// The first error is returned, with a zero Config.
//
// A Java producer.properties loads unchanged. Properties that only make
// sense in the JVM are accepted, listed in IgnoredProperties, and have no
// effect: key.serializer, value.serializer, partitioner.class (except
// org.apache.kafka.clients.producer.RoundRobinPartitioner, which selects
// RoundRobinPartitioner; the DefaultPartitioner and
// UniformStickyPartitioner that Kafka 4.0 removed are rejected, as Java
// 4.x rejects them), interceptor.classes, metric.reporters, security.providers,
// metrics.sample.window.ms, metrics.num.samples, metrics.recording.level,
// metrics.context.*, enable.metrics.push, client.dns.lookup
// (use_all_dns_ips only, what kprod does),
// auto.include.jmx.reporter, the Confluent serializers' settings
// (auto.register.schemas, use.latest.version, and those starting with
// schema.registry., basic.auth., bearer.auth., key.subject.name. or
// value.subject.name.),
// transaction.two.phase.commit.enable (false only), the JVM-side TLS
// settings (ssl.keymanager.algorithm, ssl.trustmanager.algorithm,
// ssl.secure.random.implementation, ssl.provider,
// ssl.engine.factory.class, and the store passwords, which PEM stores do
// not have), and the Java SASL login machinery (sasl.login.*,
// sasl.client.callback.handler.class, sasl.kerberos.*,
// sasl.oauthbearer.*). Records are bytes in kprod, so serializers have
// no equivalent; a custom partitioner or interceptor has to be rewritten in
// Go. config.providers is rejected. Any other unknown name is an error.
func ConfigFromProperties(props map[string]string) (Config, error) {
	c := DefaultConfig()
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if err := c.Set(name, props[name]); err != nil {
			return Config{}, err
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ConfigFromFile reads a Java .properties file (see LoadProperties) and
// builds a Config from it with ConfigFromProperties. Errors name the file.
func ConfigFromFile(path string) (Config, error) {
	props, err := LoadProperties(path)
	if err != nil {
		return Config{}, err
	}
	c, err := ConfigFromProperties(props)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// LoadProperties reads a file in the format of java.util.Properties: lines
// "key=value", "key: value" or "key value"; comment lines starting with #
// or !; blank lines; a line ending in an odd number of backslashes
// continues on the next line, whose leading whitespace is dropped; escapes
// \t \n \r \f \uXXXX, and a backslash before any other character keeps
// that character (so "\=", "\:", "\ " and "\\" are literal). Leading
// whitespace of keys and values is dropped, trailing whitespace of values
// is kept (Set trims it, as Java's ConfigDef does). A key given twice keeps
// its last value.
//
// The file is read as UTF-8. (Java's Properties.load(InputStream) reads
// ISO-8859-1; the two agree for ASCII and for \uXXXX escapes.)
func LoadProperties(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the properties file: %w", kerr.ErrInvalidConfig, err)
	}
	props, err := parseProperties(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// parseProperties follows java.util.Properties.load: first split into
// logical lines (LineReader), then split each into key and value and
// unescape both (load0, loadConvert).
func parseProperties(text string) (map[string]string, error) {
	props := make(map[string]string)
	in := []rune(text)
	i, lineNo := 0, 1
	for {
		line, start, next, nextLineNo := readLogicalLine(in, i, lineNo)
		if line == nil {
			return props, nil
		}
		i, lineNo = next, nextLineNo
		key, value := splitKeyValue(line)
		k, err := unescape(key)
		if err != nil {
			// The key is not shown: on a line without a separator it is
			// the whole line, which may be a stray password.
			return nil, fmt.Errorf("%w: line %d: in the property name: %w", kerr.ErrInvalidConfig, start, err)
		}
		v, err := unescape(value)
		if err != nil {
			// Only the bad escape is shown, never the rest of the value:
			// a property kprod ignores (basic.auth.user.info, say) may
			// hold a credential under a name that does not look secret.
			shown, found := err.text, "; only the escape is shown"
			if isSecret(k) || looksSecret(k) {
				shown, found = "[hidden]", "; the value is not shown: it is secret"
			}
			return nil, &ConfigError{Property: k, Value: shown, Reason: fmt.Sprintf("line %d: %v%s", start, err, found)}
		}
		props[k] = v
	}
}

func isPropSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\f' }

// readLogicalLine returns the next logical line from in[i:] without its
// terminator, continuation backslashes and the leading whitespace of each
// natural line; nil at the end of input. It skips blank and comment lines
// and reports the line number where the logical line starts.
func readLogicalLine(in []rune, i, lineNo int) (line []rune, start, next, nextLineNo int) {
	var (
		buf                []rune
		skipSpace          = true
		continued          = false // the previous natural line ended in a continuation
		precedingBackslash = false
	)
	start = lineNo
	for i < len(in) {
		c := in[i]
		i++
		if skipSpace {
			if isPropSpace(c) {
				continue
			}
			if !continued && (c == '\r' || c == '\n') {
				// A blank line before any content: skip it.
				if c == '\r' && i < len(in) && in[i] == '\n' {
					i++
				}
				lineNo++
				start = lineNo
				continue
			}
			skipSpace, continued = false, false
		}
		if len(buf) == 0 && (c == '#' || c == '!') {
			// A comment runs to the end of its natural line and is never
			// continued.
			for i < len(in) && in[i] != '\n' && in[i] != '\r' {
				i++
			}
			skipSpace = true
			continue
		}
		if c != '\n' && c != '\r' {
			buf = append(buf, c)
			precedingBackslash = c == '\\' && !precedingBackslash
			continue
		}
		if c == '\r' && i < len(in) && in[i] == '\n' {
			i++
		}
		lineNo++
		if len(buf) == 0 {
			// An empty continuation line ends nothing: Java drops it.
			skipSpace = true
			start = lineNo
			continue
		}
		if precedingBackslash {
			buf = buf[:len(buf)-1]
			skipSpace, continued, precedingBackslash = true, true, false
			continue
		}
		return buf, start, i, lineNo
	}
	if len(buf) == 0 {
		return nil, start, i, lineNo
	}
	if precedingBackslash {
		buf = buf[:len(buf)-1]
	}
	return buf, start, i, lineNo
}

// splitKeyValue splits a logical line at the first unescaped '=', ':' or
// whitespace; whitespace and at most one '=' or ':' after the key are
// dropped.
func splitKeyValue(line []rune) (key, value []rune) {
	keyLen, valueStart := 0, len(line)
	hasSep, precedingBackslash := false, false
	for keyLen < len(line) {
		c := line[keyLen]
		if (c == '=' || c == ':') && !precedingBackslash {
			valueStart, hasSep = keyLen+1, true
			break
		}
		if isPropSpace(c) && !precedingBackslash {
			valueStart = keyLen + 1
			break
		}
		precedingBackslash = c == '\\' && !precedingBackslash
		keyLen++
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isPropSpace(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	return line[:keyLen], line[valueStart:]
}

// escapeError is a \u escape without 4 hex digits. Its message does not
// show the escape, which is part of a value that may be a password; the
// caller adds text, the escape, when the key is not secret.
type escapeError struct{ text string }

func (e *escapeError) Error() string {
	return `malformed \uxxxx escape: \u needs 4 hex digits (write a backslash as \\)`
}

// unescape resolves the escapes of a key or value. \uXXXX escapes are
// UTF-16 code units, so a surrogate pair written as two escapes becomes
// one character. The error is *escapeError, not error, so the caller
// can show the escape where the value is not secret.
func unescape(s []rune) (string, *escapeError) {
	var b strings.Builder
	var pendingHigh rune = -1
	flushHigh := func() {
		if pendingHigh >= 0 {
			b.WriteRune(utf16.DecodeRune(pendingHigh, 0)) // lone surrogate: U+FFFD
			pendingHigh = -1
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			flushHigh()
			b.WriteRune(c)
			continue
		}
		i++
		c = s[i]
		switch c {
		case 't':
			c = '\t'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 'f':
			c = '\f'
		case 'u':
			if i+4 >= len(s) {
				return "", &escapeError{text: string(s[i-1:])}
			}
			n, err := strconv.ParseUint(string(s[i+1:i+5]), 16, 16)
			if err != nil {
				return "", &escapeError{text: string(s[i-1 : i+5])}
			}
			i += 4
			r := rune(n)
			switch {
			case utf16.IsSurrogate(r) && r < 0xDC00: // high half of a pair
				flushHigh()
				pendingHigh = r
			case utf16.IsSurrogate(r) && pendingHigh >= 0:
				b.WriteRune(utf16.DecodeRune(pendingHigh, r))
				pendingHigh = -1
			default:
				flushHigh()
				b.WriteRune(r)
			}
			continue
		}
		flushHigh()
		b.WriteRune(c)
	}
	flushHigh()
	return b.String(), nil
}

// Value parsers, as Java's ConfigDef.parseType: values are trimmed; ints
// and longs are decimal with an optional sign.

func parseList(v string) []string {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func parseBool(name, v string) (bool, error) {
	switch t := strings.TrimSpace(v); {
	case strings.EqualFold(t, "true"):
		return true, nil
	case strings.EqualFold(t, "false"):
		return false, nil
	}
	return false, invalid(name, v, `must be "true" or "false"`)
}

func parseInt32(name, v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return 0, invalid(name, v, "must be a whole number from -2147483648 to 2147483647 (a Java int)")
	}
	return n, nil
}

func int32Field(field func(*Config) *int) setter {
	return func(c *Config, name, v string) error {
		n, err := parseInt32(name, v)
		if err == nil {
			*field(c) = int(n)
		}
		return err
	}
}

func boolField(field func(*Config) *bool) setter {
	return func(c *Config, name, v string) error {
		b, err := parseBool(name, v)
		if err == nil {
			*field(c) = b
		}
		return err
	}
}

// msInt32 sets a duration from a Java int property in milliseconds.
func msInt32(field func(*Config) *time.Duration) setter {
	return func(c *Config, name, v string) error {
		n, err := parseInt32(name, v)
		if err == nil {
			*field(c) = time.Duration(n) * time.Millisecond
		}
		return err
	}
}

// msInt64 sets a duration from a Java long property in milliseconds.
// Values beyond what a time.Duration holds (about 292 years) saturate:
// people write Long.MAX_VALUE to mean "forever".
func msInt64(field func(*Config) *time.Duration) setter {
	return func(c *Config, name, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return invalid(name, v, "must be a whole number of milliseconds (a Java long)")
		}
		const maxMs = math.MaxInt64 / int64(time.Millisecond)
		switch {
		case n > maxMs:
			*field(c) = time.Duration(math.MaxInt64)
		case n < -maxMs:
			*field(c) = time.Duration(math.MinInt64)
		default:
			*field(c) = time.Duration(n) * time.Millisecond
		}
		return nil
	}
}

// flagged records that the property was given, for the Java rules that
// depend on it (see Config.Validate).
func flagged(f setFlags, set setter) setter {
	return func(c *Config, name, v string) error {
		if err := set(c, name, v); err != nil {
			return err
		}
		c.setByName |= f
		return nil
	}
}

// consumerOnly are common consumer properties, to explain why they are
// unknown to a producer.
var consumerOnly = []string{
	"group.id", "group.instance.id", "auto.offset.reset", "enable.auto.commit",
	"auto.commit.interval.ms", "isolation.level", "max.poll.records",
	"max.poll.interval.ms", "session.timeout.ms", "heartbeat.interval.ms",
	"fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms",
	"max.partition.fetch.bytes", "key.deserializer", "value.deserializer",
	"partition.assignment.strategy", "group.protocol",
}

// unknownReason explains an unknown property name and suggests the property
// probably meant.
func unknownReason(name string) string {
	if slices.Contains(consumerOnly, name) {
		return "unknown producer property: it is a consumer property"
	}
	if best := closestProperty(name); best != "" {
		return fmt.Sprintf("unknown producer property; did you mean %s?", best)
	}
	return "unknown producer property"
}

// closestProperty returns the known property name an unknown one is most
// likely a typo of, or "" when none is close: the same name in another
// spelling (case, '_' or '-' for '.'), or one within a small edit distance.
func closestProperty(name string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", ".", "-", ".").Replace(strings.ToLower(s))
	}
	n := norm(name)
	var names []string
	for k := range properties {
		names = append(names, k)
	}
	for k := range javaOnlyProperties {
		names = append(names, k)
	}
	slices.Sort(names)

	best, bestDist := "", math.MaxInt
	for _, k := range names {
		if norm(k) == n {
			return k
		}
		if d := editDistance(n, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	// Allow about one slip per 6 characters, at least 2: "lingr.ms" and
	// "bacth.size" are found, "retries" is not suggested for "acks".
	if bestDist <= max(2, len(name)/6) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance, with a swap of two adjacent
// characters counting as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j]; three rows suffice.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
