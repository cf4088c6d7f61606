package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
)

// Against the real Apache Kafka cluster (scripts/kafka-cluster.sh up,
// KPROD_INTEGRATION=1): lines piped through "kprod produce" come back
// from an independent client with their keys, values and headers, in
// order per key.
func TestIntegrationProduce(t *testing.T) {
	brokers := testcluster.Brokers(t)
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 3, 3, nil)

	const n = 5000
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "key-%d\tvalue-%d\n", i%50, i)
	}
	code, _, stderr := run(t, 60*time.Second, strings.NewReader(in.String()), "produce",
		"--bootstrap-server", strings.Join(brokers, ","), "--topic", topic, "--key-delimiter", `\t`,
		"-H", "source=kprod-cli", "-X", "acks=all")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if want := fmt.Sprintf("%d records sent, 0 failed", n); !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	last := map[string]int{}
	seen := make([]bool, n)
	for _, r := range consume(t, brokers, topic, n) {
		i, err := strconv.Atoi(strings.TrimPrefix(string(r.Value), "value-"))
		if err != nil || i < 0 || i >= n || seen[i] {
			t.Fatalf("unexpected or repeated value %q", r.Value)
		}
		seen[i] = true
		if want := fmt.Sprintf("key-%d", i%50); string(r.Key) != want {
			t.Errorf("value-%d has key %q, want %q", i, r.Key, want)
		}
		if len(r.Headers) != 1 || r.Headers[0].Key != "source" || string(r.Headers[0].Value) != "kprod-cli" {
			t.Errorf("value-%d has headers %v, want source=kprod-cli", i, r.Headers)
		}
		if prev, ok := last[string(r.Key)]; ok && prev > i {
			t.Errorf("key %s: value-%d after value-%d", r.Key, i, prev)
		}
		last[string(r.Key)] = i
	}
}

// perf against the real cluster: every record it counts is there.
func TestIntegrationPerf(t *testing.T) {
	brokers := testcluster.Brokers(t)
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
	// Java's batch.size of 16 KiB makes a request per 78 records of this
	// size; on a loaded 2-core machine with acks=all that alone is
	// hundreds of records/s. Larger batches keep the test short.
	const n = 10000
	code, stdout, stderr := run(t, 90*time.Second, nil, "perf", "--bootstrap-server", strings.Join(brokers, ","),
		"--topic", topic, "--num-records", strconv.Itoa(n), "--record-size", "200", "--json",
		"--producer-props", "batch.size=262144", "linger.ms=20")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	r := parsePerfJSON(t, stdout)
	if r.Records != n || len(r.Errors) != 0 || r.Embedded {
		t.Errorf("records %d, errors %v, embedded %v; want %d, none, false", r.Records, r.Errors, r.Embedded, n)
	}
	checkLatencies(t, r)
	t.Logf("real cluster: %.0f records/sec, p50 %.2f ms, p99 %.2f ms", r.RecordsPerSec, r.P50Ms, r.P99Ms)
	consume(t, brokers, topic, n)
}
