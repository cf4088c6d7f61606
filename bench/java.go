package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// javaPerfLine matches ProducerPerformance's summary line (Kafka 4.x):
// "N[ steady state] records sent, R records/sec (M MB/sec), A ms avg
// latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, ...".
var javaPerfLine = regexp.MustCompile(`^(\d+)( steady state)? records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th`)

// javaLog4j keeps ProducerPerformance's client quiet: warnings to stderr.
const javaLog4j = `status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
`

// javaJVMFlags are those kafka-run-class.sh gives kafka-producer-perf-test.sh
// (whose heap, -Xmx512M, is -java-heap's default).
var javaJVMFlags = []string{
	"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
}

func javaAvailable(libs string) error {
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("no java on PATH")
	}
	jars, _ := filepath.Glob(filepath.Join(libs, "kafka-tools-*.jar"))
	if len(jars) == 0 {
		return fmt.Errorf("no kafka-tools jar in %s (run: bash scripts/kafka-cluster.sh install)", libs)
	}
	return nil
}

// javaCommand is ProducerPerformance with the workload's settings, warm-up
// records excluded from its "steady state" summary as from ours.
func javaCommand(ctx context.Context, o *options, w *workload, rate float64, log4j string) *exec.Cmd {
	comp := "none"
	if isLZ4(w.compression) {
		comp = "lz4"
	}
	thr := "-1"
	if rate > 0 {
		thr = strconv.FormatFloat(rate, 'f', 0, 64)
	}
	args := append(strings.Fields(o.javaHeap), javaJVMFlags...)
	args = append(args,
		"-Dlog4j2.configurationFile="+log4j,
		"-cp", filepath.Join(o.javaLibs, "*"),
		"org.apache.kafka.tools.ProducerPerformance",
		"--topic", w.topic,
		"--num-records", strconv.Itoa(o.records+o.javaWarmup),
		"--warmup-records", strconv.Itoa(o.javaWarmup),
		"--record-size", strconv.Itoa(w.size),
		"--throughput", thr,
		"--bootstrap-server", strings.Join(w.brokers, ","),
		"--command-property",
		"client.id="+w.clientID,
		"acks=all",
		"enable.idempotence=true",
		"linger.ms=5",
		"batch.size="+strconv.Itoa(w.batch),
		"buffer.memory="+strconv.Itoa(bufferMemory),
		"compression.type="+comp,
	)
	if w.keys > 0 {
		// Java's default partitioner hashes keys by murmur2.
		args = append(args, "--key-distribution", "random", "--record-key-range", strconv.Itoa(w.keys))
	}
	return exec.CommandContext(ctx, "java", args...)
}

// parseJava reads the steady-state summary (or, without warm-up, the
// overall one) from ProducerPerformance's output.
func parseJava(out []byte, o *options) (*workerResult, error) {
	var best []string
	for _, l := range strings.Split(string(out), "\n") {
		m := javaPerfLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		if m[2] != "" || best == nil {
			best = m
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no summary line in ProducerPerformance's output:\n%s", tail(out, 2000))
	}
	f := func(i int) float64 { v, _ := strconv.ParseFloat(best[i], 64); return v }
	n, _ := strconv.Atoi(best[1])
	// ProducerPerformance counts only the records acknowledged without
	// an error (it prints the others' exceptions and still exits 0).
	want := o.records + o.javaWarmup
	if best[2] != "" {
		want = o.records // the steady-state line
	}
	res := &workerResult{
		Client:    "java",
		Records:   n,
		RecPerSec: f(3),
		MiBPerSec: f(4), // ProducerPerformance's MB is 2^20 bytes
		P50Ms:     f(7),
		P99Ms:     f(9),
		MaxMs:     f(6),
	}
	if res.RecPerSec > 0 {
		res.ElapsedSec = float64(n) / res.RecPerSec
	}
	if n < want {
		res.Failed = int64(want - n)
		res.FirstError = fmt.Sprintf("ProducerPerformance acknowledged %d of %d records; its stderr has the exceptions", n, want)
	}
	res.clientInfo = clientInfo{
		Idempotent: yes(true),
		Notes:      "ProducerPerformance; enable.idempotence=true; latency percentiles in whole ms",
		Version:    "kafka-clients " + javaKafkaVersion(o.javaLibs),
	}
	return res, nil
}

func javaKafkaVersion(libs string) string {
	jars, _ := filepath.Glob(filepath.Join(libs, "kafka-clients-*.jar"))
	if len(jars) == 0 {
		return "?"
	}
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka-clients-"), ".jar")
}

func javaVersion() string {
	out, err := exec.Command("java", "-version").CombinedOutput()
	if err != nil {
		return "?"
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	return strings.TrimSpace(string(first))
}

func writeLog4j() (string, error) {
	f, err := os.CreateTemp("", "bench-log4j2-*.properties")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.WriteString(javaLog4j)
	return f.Name(), err
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
