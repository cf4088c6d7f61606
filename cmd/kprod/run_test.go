package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/kprod/kprod/internal/testcluster"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/cli"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// run runs the command in-process and returns its exit status, stdout and
// stderr. It fails the test if Run takes longer than limit.
func run(t *testing.T, limit time.Duration, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return runCtx(t, ctx, limit, stdin, args...)
}

func runCtx(t *testing.T, ctx context.Context, limit time.Duration, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := cli.Run(ctx, args, stdin, &stdout, &stderr)
	if el := time.Since(start); el > limit {
		t.Errorf("kprod %s took %v, want at most %v", strings.Join(args, " "), el, limit)
	}
	return code, stdout.String(), stderr.String()
}

func newCluster(t *testing.T, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// consume reads n records of topic from the start, failing the test if
// they do not arrive within 10s (or more than n arrive).
func consume(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s before the timeout", len(recs), n, topic)
		}
		for _, e := range fs.Errors() {
			t.Logf("fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
		}
		recs = append(recs, fs.Records()...)
	}
	if len(recs) > n {
		t.Fatalf("read %d records of %s, want %d", len(recs), topic, n)
	}
	return recs
}

// perfJSON is the --json output as a script sees it.
type perfJSON struct {
	Records       int64            `json:"records"`
	Bytes         int64            `json:"bytes"`
	RecordsPerSec float64          `json:"records_per_sec"`
	MBPerSec      float64          `json:"mb_per_sec"`
	AvgLatencyMs  float64          `json:"avg_latency_ms"`
	MaxLatencyMs  float64          `json:"max_latency_ms"`
	P50Ms         float64          `json:"p50_ms"`
	P95Ms         float64          `json:"p95_ms"`
	P99Ms         float64          `json:"p99_ms"`
	P999Ms        float64          `json:"p999_ms"`
	Errors        map[string]int64 `json:"errors"`
	ElapsedSec    float64          `json:"elapsed_sec"`
	Embedded      bool             `json:"embedded"`
	Sent          int64            `json:"sent"`
	Failed        int64            `json:"failed"`
	WarmupRecords int64            `json:"warmup_records"`
	Topic         string           `json:"topic"`
	Interrupted   bool             `json:"interrupted"`
	Stopped       string           `json:"stopped"`
	SteadyState   *perfJSON        `json:"steady_state"`
}

func parsePerfJSON(t *testing.T, stdout string) perfJSON {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var out perfJSON
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not the JSON object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("stdout has more than one JSON value:\n%s", stdout)
	}
	// The field names are an interface: every one must be there.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"records", "records_per_sec", "mb_per_sec", "avg_latency_ms", "max_latency_ms",
		"p50_ms", "p95_ms", "p99_ms", "p999_ms", "errors", "elapsed_sec", "embedded"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("the JSON output has no %q field:\n%s", f, stdout)
		}
	}
	return out
}

func checkLatencies(t *testing.T, r perfJSON) {
	t.Helper()
	if !(0 < r.P50Ms && r.P50Ms <= r.P95Ms && r.P95Ms <= r.P99Ms && r.P99Ms <= r.P999Ms) {
		t.Errorf("percentiles not ordered: p50 %v, p95 %v, p99 %v, p99.9 %v", r.P50Ms, r.P95Ms, r.P99Ms, r.P999Ms)
	}
	// HDR values are exact to 3 significant digits.
	if r.P999Ms > r.MaxLatencyMs*1.001+0.001 || r.AvgLatencyMs > r.MaxLatencyMs || r.AvgLatencyMs <= 0 {
		t.Errorf("avg %v, p99.9 %v, max %v do not fit", r.AvgLatencyMs, r.P999Ms, r.MaxLatencyMs)
	}
	if r.RecordsPerSec <= 0 || r.MBPerSec <= 0 || r.ElapsedSec <= 0 {
		t.Errorf("rates %v records/s, %v MB/s over %vs", r.RecordsPerSec, r.MBPerSec, r.ElapsedSec)
	}
}

func TestPerfEmbeddedJSON(t *testing.T) {
	code, stdout, stderr := run(t, 30*time.Second, nil, "perf", "--num-records", "5000", "--json", "--partitions", "3")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	r := parsePerfJSON(t, stdout)
	if r.Records != 5000 || r.Sent != 5000 || r.Failed != 0 || len(r.Errors) != 0 {
		t.Errorf("records %d, sent %d, failed %d, errors %v; want 5000 records and no errors", r.Records, r.Sent, r.Failed, r.Errors)
	}
	if r.Bytes != 5000*100 {
		t.Errorf("bytes %d, want %d (100-byte records by default)", r.Bytes, 5000*100)
	}
	if !r.Embedded || r.SteadyState != nil {
		t.Errorf("embedded %v, steady_state %v; want embedded and no steady state", r.Embedded, r.SteadyState)
	}
	checkLatencies(t, r)
	if !strings.Contains(stderr, "embedded 3-broker cluster") || !strings.Contains(stderr, `"perf-test" of 3 partitions`) {
		t.Errorf("stderr does not say that it started an embedded cluster:\n%s", stderr)
	}
}

func TestPerfWarmupJSON(t *testing.T) {
	code, stdout, stderr := run(t, 30*time.Second, nil, "perf", "--num-records", "3000", "--warmup-records", "1000", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	r := parsePerfJSON(t, stdout)
	if r.Records != 3000 || r.WarmupRecords != 1000 {
		t.Errorf("records %d, warmup_records %d; want 3000 and 1000", r.Records, r.WarmupRecords)
	}
	if r.SteadyState == nil || r.SteadyState.Records != 2000 {
		t.Fatalf("steady_state %+v, want 2000 records (the warmup left out)", r.SteadyState)
	}
	checkLatencies(t, *r.SteadyState)
}

// The text output is ProducerPerformance's, so that scripts written for
// kafka-producer-perf-test.sh parse it.
func TestPerfTextOutput(t *testing.T) {
	code, stdout, stderr := run(t, 30*time.Second, nil, "perf", "--num-records", "2000", "--record-size", "50",
		"--warmup-records", "500", "--print-metrics", "--producer-props", "acks=1", "linger.ms=1")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	total := regexp.MustCompile(`(?m)^2000 records sent, [0-9.]+ records/sec \([0-9.]+ MB/sec\), [0-9.]+ ms avg latency, [0-9.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$`)
	steady := regexp.MustCompile(`(?m)^1500 steady state records sent, [0-9.]+ records/sec`)
	if !total.MatchString(stdout) || !steady.MatchString(stdout) {
		t.Errorf("stdout lacks Java's summary lines:\n%s", stdout)
	}
	if !strings.Contains(stdout, "producer-metrics:record-send-total:{client-id=perf-producer-client} ") || !strings.Contains(stdout, "producer-metrics:request-latency-avg:") || !strings.Contains(stdout, "producer-topic-metrics:byte-rate:{client-id=perf-producer-client, topic=") || !strings.Contains(stdout, "perf:record-error-total") {
		t.Errorf("--print-metrics printed no counts:\n%s", stdout)
	}
	if !strings.Contains(stdout, "Warmup first 500 records") {
		t.Errorf("stdout does not announce the warmup (Java's tool prints it there):\n%s", stdout)
	}
}

// Every record perf counts was written: read them back from a cluster the
// test owns. --payload-monotonic makes each value the record's number.
func TestPerfDeliversEveryRecord(t *testing.T) {
	c := newCluster(t, 4, "bench")
	const n = 3000
	code, stdout, stderr := run(t, 30*time.Second, nil, "perf", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","),
		"--topic", "bench", "--num-records", strconv.Itoa(n), "--payload-monotonic", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if r := parsePerfJSON(t, stdout); r.Records != n || r.Embedded {
		t.Errorf("records %d, embedded %v; want %d, false", r.Records, r.Embedded, n)
	}
	seen := make([]bool, n)
	for _, r := range consume(t, c.ListenAddrs(), "bench", n) {
		i, err := strconv.Atoi(string(r.Value))
		if err != nil || i < 0 || i >= n || seen[i] {
			t.Fatalf("unexpected or repeated value %q", r.Value)
		}
		seen[i] = true
	}
}

func TestPerfPayloadFile(t *testing.T) {
	c := newCluster(t, 1, "payloads")
	file := filepath.Join(t.TempDir(), "payloads.txt")
	if err := os.WriteFile(file, []byte("alpha|beta||gamma|"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, 30*time.Second, nil, "perf", "-b", c.ListenAddrs()[0], "--topic", "payloads",
		"--num-records", "200", "--payload-file", file, "--payload-delimiter", "|", "--partitions", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if !strings.Contains(stderr, "Number of messages read: 3") {
		t.Errorf("stderr does not count the payloads (empty ones are dropped):\n%s", stderr)
	}
	if !strings.Contains(stderr, "--partitions applies only to the embedded cluster") {
		t.Errorf("no warning that --partitions is ignored:\n%s", stderr)
	}
	counts := map[string]int{}
	for _, r := range consume(t, c.ListenAddrs(), "payloads", 200) {
		counts[string(r.Value)]++
	}
	for v, n := range counts {
		if v != "alpha" && v != "beta" && v != "gamma" || n == 0 {
			t.Errorf("value %q sent %d times", v, n)
		}
	}
	if len(counts) != 3 {
		t.Errorf("values %v: want all three payloads chosen at random", counts)
	}
}

func TestPerfThroughputThrottles(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := run(t, 30*time.Second, nil, "perf", "--num-records", "300", "--throughput", "1000", "--json",
		"--reporting-interval", "100")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	// With --json the periodic lines go to stderr: stdout is the JSON alone
	// (parsePerfJSON checks).
	if !windowLine.MatchString(stderr) {
		t.Errorf("no periodic line on stderr:\n%s", stderr)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Errorf("300 records at 1000/s took %v, want about 300ms", el)
	}
	if r := parsePerfJSON(t, stdout); r.RecordsPerSec > 1200 {
		t.Errorf("%v records/sec, want about 1000", r.RecordsPerSec)
	}
}

var windowLine = regexp.MustCompile(`(?m)^\d+ records sent, [0-9.]+ records/sec \([0-9.]+ MB/sec\), [0-9.]+ ms avg latency, [0-9.]+ ms max latency\.$`)

// The periodic lines are ProducerPerformance's, on stdout before the
// summary.
func TestPerfPeriodicLines(t *testing.T) {
	code, stdout, stderr := run(t, 30*time.Second, nil, "perf", "--num-records", "2000", "--throughput", "4000",
		"--reporting-interval", "100")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	lines := windowLine.FindAllString(stdout, -1)
	if len(lines) < 2 {
		t.Fatalf("%d periodic lines over 0.5s at 100ms, want several:\n%s", len(lines), stdout)
	}
	if i := strings.Index(stdout, "2000 records sent"); i < 0 || i < strings.LastIndex(stdout, lines[len(lines)-1]) {
		t.Errorf("the summary is not the last line:\n%s", stdout)
	}
}

func TestPerfInterrupted(t *testing.T) {
	r := perfInterrupted(t, "--num-records", "100000000", "--throughput", "2000")
	if !r.Interrupted || r.Records == 0 || r.Records != r.Sent || r.Failed != 0 {
		t.Errorf("records %d, sent %d, failed %d: what was sent before the interrupt must be delivered", r.Records, r.Sent, r.Failed)
	}
}

// A tiny --throughput waits (here until the interrupt) rather than
// overflowing the schedule into no throttling at all.
func TestPerfTinyThroughputWaits(t *testing.T) {
	if r := perfInterrupted(t, "--num-records", "3", "--throughput", "1e-12"); r.Sent != 1 {
		t.Errorf("%d records sent at 1e-12 records/s within 1.5s, want 1 (the first goes at once, as in Java's throttle)", r.Sent)
	}
}

// perfInterrupted runs perf --json with args and interrupts it after
// 1.5 s, late enough that the embedded cluster is up and records went
// out, even under -race on a busy machine; it must exit 130.
func perfInterrupted(t *testing.T, args ...string) perfJSON {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(1500*time.Millisecond, cancel)
	code, stdout, stderr := runCtx(t, ctx, 20*time.Second, nil, append([]string{"perf", "--json"}, args...)...)
	if code != 130 {
		t.Fatalf("exit %d, want 130 (interrupted)\nstderr: %s", code, stderr)
	}
	return parsePerfJSON(t, stdout)
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"perf", "--bogus"}, "unknown flag --bogus"},
		{[]string{"perf", "--num-recods", "5"}, "did you mean --num-records?"},
		{[]string{"perf", "--num-records"}, "--num-records needs a value"},
		{[]string{"perf", "--num-records", "many"}, `invalid value "many" for --num-records`},
		{[]string{"perf", "--num-records", "0"}, "--num-records should be greater than zero"},
		{[]string{"perf", "--num-records", "10", "--warmup-records", "10"}, "--warmup-records"},
		{[]string{"perf", "--record-size", "0"}, "--record-size should be greater than zero"},
		{[]string{"perf", "--record-size", "10", "--payload-monotonic"}, "at most one of"},
		{[]string{"perf", "--throughput", "0"}, "--throughput"},
		{[]string{"perf", "--reporting-interval", "0"}, "--reporting-interval"},
		// Values a time.Duration cannot hold: refused, not an overflow
		// (a panicking reporter; no transactions, or one per record).
		{[]string{"perf", "--reporting-interval", "18446744073709"}, "--reporting-interval must be between 1 and"},
		{[]string{"perf", "--transaction-duration-ms", "288230376151711744"}, "--transaction-duration-ms must be at most"},
		{[]string{"perf", "--partitions", "2000000"}, "--partitions must be between 1 and 1048576"},
		{[]string{"perf", "--payload-file", "/dev/null", "--payload-delimiter", ""}, `invalid --payload-delimiter "": it is empty`},
		{[]string{"perf", "--producer-props", "acks"}, `invalid property "acks"`},
		{[]string{"perf", "--payload-file", "/nonexistent/payloads"}, "/nonexistent/payloads"},
		{[]string{"perf", "stray"}, `unexpected argument "stray"`},
		{[]string{"produce", "--brokers", "127.0.0.1:9092"}, "--topic is required"},
		{[]string{"produce", "--topic", "t"}, "--bootstrap-server is required"},
		{[]string{"produce", "-t", "t", "-b", "127.0.0.1:9092", "--partition", "-1"}, "--partition"},
		{[]string{"produce", "-t", "t", "-b", "127.0.0.1:9092", "--delimiter", ""}, "--delimiter"},
		{[]string{"produce", "-t", "t", "-b", "127.0.0.1:9092", "--key-delimiter", `\q`}, "unknown escape"},
		{[]string{"produce", "-t", "t", "-b", "127.0.0.1:9092", "-X", "transactional.id=x"}, "does not send in transactions"},
		{[]string{"produce", "-t", "t", "-b", "127.0.0.1:9092", "-H", "=v"}, "invalid header"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `unknown command "frobnicate"`},
		{nil, "usage: kprod COMMAND"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, 5*time.Second, nil, tc.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout should be empty, got:\n%s", stdout)
			}
		})
	}
}

// A bad producer setting is a usage error with the library's message,
// which names the property.
func TestBadConfigValue(t *testing.T) {
	props := filepath.Join(t.TempDir(), "producer.properties")
	if err := os.WriteFile(props, []byte("acks=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"perf", "-X", "linger.ms=abc"}, "linger.ms=abc"},
		{[]string{"perf", "-Xbatch.size=-5"}, "batch.size"},
		{[]string{"perf", "--producer-props", "acks=1", "lingr.ms=5"}, "did you mean linger.ms"},
		{[]string{"perf", "--producer.config", props}, "acks=2"},
		{[]string{"perf", "--producer.config", "/nonexistent/producer.properties"}, "/nonexistent/producer.properties"},
		{[]string{"produce", "-t", "t", "-b", "127.0.0.1:9092", "-X", "linger.ms=abc"}, "linger.ms=abc"},
		{[]string{"produce", "-t", "t", "-b", "127.0.0.1:9092", "--producer-property", "enable.idempotence=true", "-X", "acks=1"}, "acks"},
		{[]string{"produce", "-t", "t", "-b", "not-a-host-port"}, "bootstrap.servers"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := run(t, 5*time.Second, nil, tc.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2\nstderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"usage: kprod COMMAND", "perf", "produce", "version"}},
		{[]string{"help"}, []string{"usage: kprod COMMAND"}},
		{[]string{"help", "perf"}, []string{"usage: kprod perf", "--num-records NUM-RECORDS", "(default: 1000000)", "(default: perf-test)", "--producer-props", "print the producer's metrics"}},
		{[]string{"perf", "--help"}, []string{"usage: kprod perf", "--throughput THROUGHPUT", "(default: -1)"}},
		{[]string{"perf", "-h"}, []string{"usage: kprod perf"}},
		{[]string{"help", "produce"}, []string{"usage: kprod produce", "--key-delimiter SEP", "-H, --header KEY=VALUE"}},
		{[]string{"produce", "--help"}, []string{"usage: kprod produce", "REQUIRED"}},
		{[]string{"version"}, []string{"kprod "}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, 5*time.Second, nil, tc.args...)
			if code != 0 || stderr != "" {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}

func TestProduceRoundTrip(t *testing.T) {
	c := newCluster(t, 3, "orders")
	long := strings.Repeat("x", 200*1024) // over bufio.Scanner's 64 KiB default
	input := "k1:v1\nk2:v2:with:colons\r\n:empty-key\nk4:\n" + "k5:" + long + "\nk6:last-without-newline"
	code, stdout, stderr := run(t, 20*time.Second, strings.NewReader(input), "produce",
		"--brokers", strings.Join(c.ListenAddrs(), ","), "--topic", "orders", "--key-delimiter", ":",
		"-H", "source=test", "--header", "trace=", "-H", "nullvalued", "-X", "linger.ms=1")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout should be empty, got %q", stdout)
	}
	if !strings.Contains(stderr, "6 records sent, 0 failed") {
		t.Errorf("stderr lacks the summary:\n%s", stderr)
	}
	want := map[string]string{"k1": "v1", "k2": "v2:with:colons", "": "empty-key", "k4": "", "k5": long, "k6": "last-without-newline"}
	recs := consume(t, c.ListenAddrs(), "orders", len(want))
	byKey := map[string][]*kgo.Record{}
	for _, r := range recs {
		byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
	}
	for k, v := range want {
		rs := byKey[k]
		if len(rs) != 1 {
			t.Errorf("key %q: %d records, want 1", k, len(rs))
			continue
		}
		r := rs[0]
		if r.Key == nil {
			t.Errorf("key %q arrived as a null key; an empty key before the delimiter is an empty key", k)
		}
		if string(r.Value) != v {
			t.Errorf("key %q: value %.40q (%d bytes), want %.40q (%d bytes)", k, r.Value, len(r.Value), v, len(v))
		}
		hs := r.Headers
		if len(hs) != 3 || hs[0].Key != "source" || string(hs[0].Value) != "test" ||
			hs[1].Key != "trace" || hs[1].Value == nil || len(hs[1].Value) != 0 ||
			hs[2].Key != "nullvalued" || hs[2].Value != nil {
			t.Errorf("key %q: headers %v, want source=test, trace=(empty), nullvalued=(null)", k, hs)
		}
	}
	// Records of one key keep their order; all of one partition in read order.
	perPartition := map[int32][]int64{}
	for _, r := range recs {
		perPartition[r.Partition] = append(perPartition[r.Partition], r.Offset)
	}
	for p, offs := range perPartition {
		if !slices.IsSorted(offs) {
			t.Errorf("partition %d offsets %v not increasing", p, offs)
		}
	}
}

func TestProducePartitionAndDelimiter(t *testing.T) {
	c := newCluster(t, 4, "events")
	code, _, stderr := run(t, 20*time.Second, strings.NewReader("a;;b;;c;;"), "produce",
		"-b", c.ListenAddrs()[1], "-t", "events", "--delimiter", ";;", "--partition", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	var got []string
	for _, r := range consume(t, c.ListenAddrs(), "events", 3) {
		if r.Partition != 2 {
			t.Errorf("record %q in partition %d, want 2", r.Value, r.Partition)
		}
		if r.Key != nil {
			t.Errorf("record %q has key %q, want none", r.Value, r.Key)
		}
		got = append(got, string(r.Value))
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("values %q, want a b c in order", got)
	}
}

// A line that cannot become a record fails alone: the others are sent,
// the exit status is 1 and the reasons are printed.
func TestProduceBadLinesFailAlone(t *testing.T) {
	c := newCluster(t, 1, "t")
	input := "k1\tv1\nno-delimiter-here\n" + strings.Repeat("y", 3000) + "\nk3\tv3\n"
	code, _, stderr := run(t, 20*time.Second, strings.NewReader(input), "produce",
		"-b", c.ListenAddrs()[0], "-t", "t", "--key-delimiter", `\t`, "-X", "max.request.size=2000")
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr: %s", code, stderr)
	}
	for _, w := range []string{"2 records sent, 2 failed", "line 2:", "no key delimiter", "line 3:", "max.request.size", "ErrInvalidRecord=1", "ErrRecordTooLarge=1"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	recs := consume(t, c.ListenAddrs(), "t", 2)
	if string(recs[0].Key) != "k1" || string(recs[1].Value) != "v3" {
		t.Errorf("got %q=%q, %q=%q; want k1=v1, k3=v3", recs[0].Key, recs[0].Value, recs[1].Key, recs[1].Value)
	}
}

func TestProduceUnknownTopic(t *testing.T) {
	c := newCluster(t, 1, "exists")
	input := strings.Repeat("line\n", 1000) // must not wait max.block.ms per line
	code, _, stderr := run(t, 5*time.Second, strings.NewReader(input), "produce",
		"-b", strings.Join(c.ListenAddrs(), ","), "-t", "does-not-exist", "-X", "max.block.ms=500")
	if code == 0 {
		t.Fatalf("exit 0 for an unknown topic\nstderr: %s", stderr)
	}
	if !strings.Contains(stderr, "unknown topic") || !strings.Contains(stderr, "does-not-exist") {
		t.Errorf("stderr does not say the topic is unknown:\n%s", stderr)
	}
}

func TestPerfUnknownTopic(t *testing.T) {
	c := newCluster(t, 1, "exists")
	code, stdout, stderr := run(t, 5*time.Second, nil, "perf", "-b", strings.Join(c.ListenAddrs(), ","),
		"--topic", "does-not-exist", "--num-records", "1000000", "-X", "max.block.ms=500", "--json")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	// --json: the object is there, saying what stopped the run.
	if out := parsePerfJSON(t, stdout); out.Interrupted || !strings.Contains(out.Stopped, "does-not-exist") || out.Records != 0 {
		t.Errorf("JSON after a failed start: interrupted %v, stopped %q, records %d; want a stop naming the topic", out.Interrupted, out.Stopped, out.Records)
	}
	if !strings.Contains(stderr, "unknown topic") || !strings.Contains(stderr, "does-not-exist") {
		t.Errorf("stderr does not say the topic is unknown:\n%s", stderr)
	}
}

// Every record names the same missing partition: stop after the first
// max.block.ms instead of waiting it for each line.
func TestProduceUnknownPartition(t *testing.T) {
	c := newCluster(t, 2, "t")
	code, _, stderr := run(t, 5*time.Second, strings.NewReader(strings.Repeat("x\n", 100)), "produce",
		"-b", c.ListenAddrs()[0], "-t", "t", "--partition", "7", "-X", "max.block.ms=500")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr, "unknown partition") || !strings.Contains(stderr, "stopped reading stdin") {
		t.Errorf("stderr does not explain:\n%s", stderr)
	}
}

func TestUnreachableBroker(t *testing.T) {
	addr := testcluster.FreeAddr(t)
	t.Run("produce", func(t *testing.T) {
		code, _, stderr := run(t, 10*time.Second, strings.NewReader("a\nb\nc\n"), "produce",
			"-b", addr, "-t", "t", "-X", "max.block.ms=1000")
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if !strings.Contains(stderr, "max.block.ms") || !strings.Contains(stderr, addr) {
			t.Errorf("stderr does not explain:\n%s", stderr)
		}
	})
	t.Run("perf", func(t *testing.T) {
		code, stdout, stderr := run(t, 10*time.Second, nil, "perf", "--bootstrap-server", addr,
			"--num-records", "1000000", "-X", "max.block.ms=1000", "--json")
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if out := parsePerfJSON(t, stdout); out.Interrupted || !strings.Contains(out.Stopped, addr) {
			t.Errorf("JSON after a failed start: interrupted %v, stopped %q; want a stop naming %s", out.Interrupted, out.Stopped, addr)
		}
		if !strings.Contains(stderr, "stopped") || !strings.Contains(stderr, addr) {
			t.Errorf("stderr does not explain:\n%s", stderr)
		}
	})
}

// SIGINT in-process: ctx ends while stdin is still open. What was read is
// delivered, the reader goroutine ends (goleak checks), Run returns.
func TestProduceInterrupted(t *testing.T) {
	c := newCluster(t, 2, "t")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, _, stderr := runCtx(t, ctx, 20*time.Second, pr, "produce", "-b", c.ListenAddrs()[0], "-t", "t",
			"-X", "linger.ms=60000", "-X", "batch.size=1000000")
		done <- result{code, stderr}
	}()
	for i := range 50 {
		if _, err := fmt.Fprintf(pw, "v%d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	// The pipe is unbuffered: the writes above returned once the reader
	// took them. linger.ms=60000 keeps them in the producer's buffer, so
	// only the close on interrupt can deliver them.
	time.Sleep(100 * time.Millisecond)
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after the interrupt")
	}
	if r.code != 130 {
		t.Fatalf("exit %d, want 130 (interrupted)\nstderr: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "50 records sent, 0 failed (interrupted") {
		t.Errorf("stderr lacks the summary:\n%s", r.stderr)
	}
	if got := consume(t, c.ListenAddrs(), "t", 50); len(got) != 50 {
		t.Errorf("got %d records, want 50", len(got))
	}
}
