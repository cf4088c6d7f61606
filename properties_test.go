package kprod

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPropertiesParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"blank and comment lines", "\n   \n# a comment\n  ! another\n\t\f\n", map[string]string{}},
		{"equals", "a=1\nb = 2\nc\t=\t3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"colon", "a:1\nb : 2", map[string]string{"a": "1", "b": "2"}},
		{"whitespace separator", "a 1\nb\t2\nc \f 3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"whitespace then separator", "a  =  1\nb \t: 2", map[string]string{"a": "1", "b": "2"}},
		{"only one separator is dropped", "a==1\nb::2\nc = =3\nd  :=4", map[string]string{"a": "=1", "b": ":2", "c": "=3", "d": "=4"}},
		{"key alone", "flag\nother=\nthird:", map[string]string{"flag": "", "other": "", "third": ""}},
		{"leading whitespace of lines", "   a=1\n\t b=2", map[string]string{"a": "1", "b": "2"}},
		{"trailing whitespace kept", "a=1  \nb=x\t", map[string]string{"a": "1  ", "b": "x\t"}},
		{"separator chars inside value", "url=http://h:1/p?q=1", map[string]string{"url": "http://h:1/p?q=1"}},
		{"comment char inside value", "a=b # not a comment\nc=!d", map[string]string{"a": "b # not a comment", "c": "!d"}},
		{"last value wins", "a=1\na=2", map[string]string{"a": "2"}},

		{"continuation", "servers=b1:9092,\\\n        b2:9092,\\\n\tb3:9092\nnext=x",
			map[string]string{"servers": "b1:9092,b2:9092,b3:9092", "next": "x"}},
		{"continuation in key", "lin\\\n  ger.ms=5", map[string]string{"linger.ms": "5"}},
		{"escaped backslash does not continue", "path=c:\\\\dir\\\\\nnext=x", map[string]string{"path": "c:\\dir\\", "next": "x"}},
		{"three backslashes continue", "a=x\\\\\\\n  y", map[string]string{"a": "x\\y"}},
		{"continuation onto a # line", "a=1\\\n#2", map[string]string{"a": "1#2"}},
		{"continuation then blank line ends it", "a=1\\\n\nb=2", map[string]string{"a": "1", "b": "2"}},
		{"comment line is not continued", "# note \\\na=1", map[string]string{"a": "1"}},
		{"backslash at end of input", "a=1\\", map[string]string{"a": "1"}},

		{"escapes", `a=tab\there\nnl\rcr\fff`, map[string]string{"a": "tab\there\nnl\rcr\fff"}},
		{"escaped separators in key", `my\=key=v` + "\n" + `my\:k\ 2 = v2`, map[string]string{"my=key": "v", "my:k 2": "v2"}},
		{"unknown escape keeps the char", `a=\q\#\!\"`, map[string]string{"a": `q#!"`}},
		{"unicode escape", `name=caf\u00e9 \u20AC`, map[string]string{"name": "café €"}},
		{"surrogate pair escape", `e=\uD83D\uDE00!`, map[string]string{"e": "😀!"}},
		{"lone surrogate", `e=\uD83Dx`, map[string]string{"e": "\uFFFDx"}},
		{"utf-8 text", "name=Zürich", map[string]string{"name": "Zürich"}},

		{"CRLF line ends", "a=1\r\nb=2\r\n\r\n#c\r\nd=\\\r\n  4\r\n", map[string]string{"a": "1", "b": "2", "d": "4"}},
		{"CR line ends", "a=1\rb=2\r", map[string]string{"a": "1", "b": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProperties(tt.in)
			if err != nil {
				t.Fatalf("parseProperties(%q) = %v", tt.in, err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("parseProperties(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestPropertiesMalformedEscape(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"a=1\nb=\\u12G4", []string{"line 2", `b=\u12G4:`, "only the escape is shown"}},
		{"a=1\n\n# c\nb=\\u12", []string{"line 4", `b=\u12:`}},
		{"x\\u00=1", []string{"line 1", "in the property name"}},
	} {
		_, err := parseProperties(tt.in)
		if err == nil {
			t.Errorf("parseProperties(%q): no error for a malformed \\u escape", tt.in)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `malformed \uxxxx escape`) {
			t.Errorf("parseProperties(%q) = %q, want ErrInvalidConfig saying malformed \\uxxxx escape", tt.in, err)
		}
		var ce *ConfigError
		if isValue := tt.want[1] != "in the property name"; errors.As(err, &ce) != isValue || isValue && ce.Property != "b" {
			t.Errorf("parseProperties(%q) = %#v, want a *ConfigError for property b only for a bad value", tt.in, err)
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("parseProperties(%q) = %q, want it to say %q", tt.in, err, w)
			}
		}
	}
}

// TestPropertiesMalformedEscapeShowsOnlyTheEscape: the error showed the
// whole value of a property whose name does not look secret, so a
// credential in a Java-only property leaked into logs.
func TestPropertiesMalformedEscapeShowsOnlyTheEscape(t *testing.T) {
	_, err := parseProperties("acks=all\nbasic.auth.user.info=alice:Hunter2sup3rS3cret\\u12G4\n")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Property != "basic.auth.user.info" || ce.Value != `\u12G4` {
		t.Fatalf("error %#v, want a *ConfigError for basic.auth.user.info showing only the escape", err)
	}
	if msg := err.Error(); strings.Contains(msg, "alice") || strings.Contains(msg, "Hunter2") {
		t.Errorf("error %q shows the value around the escape", msg)
	}
}

// TestPropertiesMalformedEscapeHidesSecret: the error for a malformed \u
// escape quoted up to 6 characters of the value, a password's included,
// and did not name the property.
func TestPropertiesMalformedEscapeHidesSecret(t *testing.T) {
	for _, tt := range []struct {
		key, value, secret string
	}{
		{"ssl.key.password", `hun\u7er2`, `\u7er2`},
		{"ssl.truststore.password", `pw\uZZ`, `\uZZ`},
		{"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required password="s\u3cr";`, `\u3cr"`},
		{"my.db.password", `x\u12`, `\u12`}, // unknown, but looks secret
		{"ssl.keystore.key", `-----BEGIN\u`, `BEGIN`},
	} {
		path := writeFile(t, "producer.properties", "acks=all\n"+tt.key+"="+tt.value+"\n")
		_, err := LoadProperties(path)
		if err == nil {
			t.Errorf("%s=%s: no error", tt.key, tt.value)
			continue
		}
		msg := err.Error()
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: error %q does not wrap ErrInvalidConfig", tt.key, msg)
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Property != tt.key || ce.Value != "[hidden]" {
			t.Errorf("%s: error %#v, want a *ConfigError for the property with its value hidden", tt.key, err)
		}
		for _, w := range []string{path, "line 2", tt.key + "=", `malformed \uxxxx escape`, "not shown"} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q does not say %q", tt.key, msg, w)
			}
		}
		if strings.Contains(msg, tt.secret) {
			t.Errorf("%s: error %q shows the value (%q)", tt.key, msg, tt.secret)
		}
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// javaProducerProperties is a producer.properties as Java applications ship
// it: serializers, an interceptor, metrics settings and the usual tuning.
const javaProducerProperties = `# Producer configuration for the billing service.
# Loaded by KafkaProducer in the Java version of the service.

bootstrap.servers=kafka-1.internal:9092,\
                  kafka-2.internal:9092,\
                  kafka-3.internal:9092
client.id = billing-producer

key.serializer=org.apache.kafka.common.serialization.StringSerializer
value.serializer=io.confluent.kafka.serializers.KafkaAvroSerializer
interceptor.classes=io.opentelemetry.instrumentation.kafkaclients.TracingProducerInterceptor
metric.reporters=
metrics.recording.level=INFO
client.dns.lookup=use_all_dns_ips
schema.registry.url=https://registry.internal:8081
basic.auth.credentials.source=USER_INFO
basic.auth.user.info=svc:registry-Pa55
auto.register.schemas=false
auto.include.jmx.reporter=false

! durability
acks=all
enable.idempotence=true
retries=2147483647
max.in.flight.requests.per.connection=5
delivery.timeout.ms=180000
request.timeout.ms=30000

# throughput
linger.ms: 20
batch.size 65536
compression.type=zstd
compression.zstd.level=6
buffer.memory=67108864
max.request.size=2097152
max.block.ms=30000

security.protocol=PLAINTEXT
ssl.endpoint.identification.algorithm=https
`

func TestPropertiesJavaProducerFile(t *testing.T) {
	path := writeFile(t, "producer.properties", javaProducerProperties)
	props, err := LoadProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := props["bootstrap.servers"]; got != "kafka-1.internal:9092,kafka-2.internal:9092,kafka-3.internal:9092" {
		t.Errorf("bootstrap.servers = %q", got)
	}
	if got := props["metric.reporters"]; got != "" {
		t.Errorf("metric.reporters = %q, want empty", got)
	}

	c, err := ConfigFromFile(path)
	if err != nil {
		t.Fatalf("ConfigFromFile = %v", err)
	}
	want := DefaultConfig()
	want.BootstrapServers = []string{"kafka-1.internal:9092", "kafka-2.internal:9092", "kafka-3.internal:9092"}
	want.ClientID = "billing-producer"
	want.EnableIdempotence = new(true)
	want.DeliveryTimeout = 180 * time.Second
	want.Linger = 20 * time.Millisecond
	want.BatchSize = 65536
	want.CompressionType = CompressionZstd
	want.CompressionZstdLevel = 6
	want.BufferMemory = 64 << 20
	want.MaxRequestSize = 2 << 20
	want.MaxBlock = 30 * time.Second
	want.setByName = setDeliveryTimeout
	want.IgnoredProperties = []string{ // Set in name order
		"auto.include.jmx.reporter", "auto.register.schemas", "basic.auth.credentials.source", "basic.auth.user.info",
		"client.dns.lookup", "interceptor.classes", "key.serializer", "metric.reporters",
		"metrics.recording.level", "schema.registry.url", "value.serializer",
	}
	if c.Acks != AcksAll || !c.Idempotent() {
		t.Errorf("acks %v, idempotent %v", c.Acks, c.Idempotent())
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ConfigFromFile =\n%+v\nwant\n%+v", c, want)
	}
	if !slices.Equal(c.IgnoredProperties, want.IgnoredProperties) {
		t.Errorf("IgnoredProperties = %q, want %q", c.IgnoredProperties, want.IgnoredProperties)
	}
}

// TestPropertiesRackAware: a Java producer.properties with rack-aware
// partitioning (KIP-1123) loads, and one that forgets client.rack fails
// as the Java producer does, naming the file and what to set.
func TestPropertiesRackAware(t *testing.T) {
	path := writeFile(t, "rack.properties", `bootstrap.servers=kafka-1.use1-az1.internal:9092
# keep keyless records in this availability zone
partitioner.rack.aware=true
client.rack=use1-az1
`)
	c, err := ConfigFromFile(path)
	if err != nil {
		t.Fatalf("ConfigFromFile = %v", err)
	}
	if !c.PartitionerRackAware || c.ClientRack != "use1-az1" || len(c.IgnoredProperties) != 0 {
		t.Errorf("PartitionerRackAware %v, ClientRack %q, ignored %q", c.PartitionerRackAware, c.ClientRack, c.IgnoredProperties)
	}

	path = writeFile(t, "norack.properties", "bootstrap.servers=b:9092\npartitioner.rack.aware=true\nclient.rack=\n")
	_, err = ConfigFromFile(path)
	wantConfigError(t, err, "client.rack", path, "partitioner.rack.aware=true")
}

func TestPropertiesFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.properties")
	if _, err := LoadProperties(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("LoadProperties(missing) = %v, want fs.ErrNotExist naming the file", err)
	}
	if _, err := ConfigFromFile(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ConfigFromFile(missing) = %v, want fs.ErrNotExist", err)
	}

	path := writeFile(t, "bad.properties", "bootstrap.servers=b:9092\nlinger.ms=-3\n")
	_, err := ConfigFromFile(path)
	ce := wantConfigError(t, err, "linger.ms", path, "-3")
	if ce.Value != "-3" {
		t.Errorf("Value = %q", ce.Value)
	}

	path = writeFile(t, "typo.properties", "bootstrap.servers=b:9092\nbatch.szie=1\n")
	_, err = ConfigFromFile(path)
	wantConfigError(t, err, "batch.szie", "did you mean batch.size?")

	path = writeFile(t, "escape.properties", "bootstrap.servers=b:9092\nclient.id=\\uZZZZ\n")
	if _, err := ConfigFromFile(path); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), path+": ") ||
		!strings.Contains(err.Error(), "line 2") {
		t.Errorf("ConfigFromFile(bad escape) = %v, want ErrInvalidConfig naming the file and line 2", err)
	}
}

// TestPropertiesErrorIsDeterministic: with several bad properties, the
// first in name order is reported, whatever the map order.
func TestPropertiesErrorIsDeterministic(t *testing.T) {
	props := map[string]string{
		"bootstrap.servers": "b:9092", "zzz.unknown": "1", "aaa.unknown": "1", "mmm.unknown": "1",
	}
	for range 20 {
		_, err := ConfigFromProperties(props)
		wantConfigError(t, err, "aaa.unknown")
	}
}

func ExampleConfigFromProperties() {
	// The properties a Java producer was configured with, e.g. from
	// LoadProperties("producer.properties").
	props := map[string]string{
		"bootstrap.servers": "localhost:9092",
		"key.serializer":    "org.apache.kafka.common.serialization.StringSerializer",
		"value.serializer":  "org.apache.kafka.common.serialization.StringSerializer",
		"acks":              "1",
		"linger.ms":         "20",
		"compression.type":  "lz4",
	}
	cfg, err := ConfigFromProperties(props)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acks:", cfg.Acks)
	fmt.Println("linger:", cfg.Linger)
	fmt.Println("compression:", cfg.CompressionType)
	// acks=1 conflicts with idempotence, which was not asked for
	// explicitly, so it is turned off as in the Java client.
	fmt.Println("idempotent:", cfg.Idempotent())
	fmt.Println("ignored:", cfg.IgnoredProperties)

	props["linger.ms"] = "-1"
	_, err = ConfigFromProperties(props)
	fmt.Println(err)
	// Output:
	// acks: 1
	// linger: 20ms
	// compression: lz4
	// idempotent: false
	// ignored: [key.serializer value.serializer]
	// kprod: invalid configuration: linger.ms=-1: must be >= 0
}
