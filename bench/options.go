package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// options holds every flag; the coordinator passes the workload part of
// them on to its workers.
type options struct {
	// Coordinator.
	targets      listFlag
	clients      string
	sizes        string
	batches      string
	compressions string
	runs         int
	rate         string
	jsonOut      string
	mdOut        string
	javaLibs     string
	javaHeap     string
	runTimeout   time.Duration
	kfakeBrokers int
	kfakeStore   bool
	partitions   int
	keepTopics   bool
	profileDir   string
	brokerWarmup int
	ctx          context.Context // the coordinator's; ends on SIGINT/SIGTERM

	// Shared by coordinator and worker.
	brokers string
	records int
	warmup  int
	// keys > 0 gives every record a key, one of keys of them (keySet).
	keys int
	// values is where each record's value comes from: valuesShared or
	// valuesWritten (payloads).
	values string
	// javaWarmup is ProducerPerformance's --warmup-records: the JVM's JIT
	// needs far more records than the Go clients' warmup to settle.
	javaWarmup int

	// Worker.
	worker      bool
	client      string
	topic       string
	size        int
	batch       int
	compression string
	rateN       float64
	cpuProfile  string

	// kfake server.
	kfakeServe bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.Var(&o.targets, "target", "a cluster to run against, repeatable: `kfake`, kfake:N (N brokers) or NAME=host:port,... for a real cluster (default kfake)")
	fs.StringVar(&o.brokers, "brokers", "", "shortcut for -target kafka=`host:port,...` (in worker mode: the bootstrap servers)")
	fs.StringVar(&o.clients, "clients", strings.Join(allClients[:len(allClients)-1], ","), "clients to run, comma-separated, in this order (harness: the worker's own per-record cost, no client; only when named)")
	fs.StringVar(&o.sizes, "sizes", "100", "value sizes in bytes, comma-separated (e.g. 100,1024)")
	fs.StringVar(&o.batches, "batches", "16384", "batch sizes in bytes (batch.size), comma-separated (e.g. 16384,1048576)")
	fs.StringVar(&o.compressions, "compressions", "none", "compression codecs, comma-separated: none, lz4")
	fs.IntVar(&o.records, "records", 1_000_000, "records per client and run (warm-up records not included)")
	fs.IntVar(&o.warmup, "warmup", 10_000, "records each Go client sends before the measurement starts")
	fs.IntVar(&o.javaWarmup, "java-warmup", 300_000, "records the Java client (ProducerPerformance --warmup-records) sends before its steady state: its JIT compiles the send path meanwhile")
	fs.IntVar(&o.keys, "keys", 0, "give each record a key: the decimal text of a random integer in [0, `N`), as ProducerPerformance's --key-distribution random --record-key-range N; every client partitions keys by murmur2, as Java does (0: no keys, the sticky or the client's default partitioner)")
	fs.StringVar(&o.values, "values", valuesShared, "where each record's value comes from: `shared` = a window of pre-made letters, read only (no copy); written = a new slice of them, written on the sending goroutine just before the send, as an application that serializes each record makes one (the Java client makes its own values either way)")
	fs.IntVar(&o.partitions, "partitions", 6, "partitions of each benchmark topic")
	fs.IntVar(&o.runs, "runs", 3, "runs per client and configuration; the table shows medians")
	fs.StringVar(&o.rate, "rate", "0", "records/s per client: 0 = as fast as it goes; a number; `half` = an unthrottled pass, then one at half the slowest client's median rate (every client keeps up: a latency comparison); half:CLIENT = at half of that client's")
	fs.StringVar(&o.jsonOut, "json", "", "also write every run and the medians as JSON to this `file`")
	fs.StringVar(&o.mdOut, "out", "", "write the Markdown table to this `file` as well as stdout")
	fs.StringVar(&o.javaLibs, "java-libs", "", "directory of the Kafka jars for the Java client (default $KPROD_CACHE/libs or $HOME/.cache/kprod/kafka-$KPROD_KAFKA_VERSION/libs)")
	fs.StringVar(&o.javaHeap, "java-heap", "-Xmx512M", "JVM heap flags for ProducerPerformance (bin/kafka-producer-perf-test.sh's)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 5*time.Minute, "a worker that runs longer is killed and its run recorded as failed")
	fs.IntVar(&o.kfakeBrokers, "kfake-brokers", 3, "brokers of the kfake target when given as plain kfake")
	fs.BoolVar(&o.kfakeStore, "kfake-store", false, "let kfake keep produced records in memory (default: BlackholeProduce, which acknowledges without storing)")
	fs.StringVar(&o.profileDir, "profile-dir", "", "write a CPU profile of each Go worker's measured part into this `directory`")
	fs.IntVar(&o.brokerWarmup, "broker-warmup", 2_000_000, "records produced (by franz-go, unmeasured) to a real cluster before the first measurement, to warm the brokers' JIT")
	fs.BoolVar(&o.keepTopics, "keep-topics", false, "do not delete each run's topic afterwards")

	fs.BoolVar(&o.worker, "worker", false, "internal: run one client (with -client) and print one JSON result line")
	fs.StringVar(&o.client, "client", "", "internal (worker): the client to run")
	fs.StringVar(&o.topic, "topic", "", "internal (worker): topic to produce to")
	fs.IntVar(&o.size, "size", 100, "internal (worker): value size in bytes")
	fs.IntVar(&o.batch, "batch", 16384, "internal (worker): batch size in bytes")
	fs.StringVar(&o.compression, "compression", "none", "internal (worker): none or lz4")
	fs.Float64Var(&o.rateN, "rate-n", 0, "internal (worker): records/s, 0 = unlimited")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "internal (worker): write a CPU profile of the measured part to this `file`")
	fs.BoolVar(&o.kfakeServe, "kfake-serve", false, "internal: serve a kfake cluster of -kfake-brokers brokers until stdin closes")
}

// warmupOf is how many records client sends before its measurement.
func (o *options) warmupOf(client string) int {
	if client == "java" {
		return o.javaWarmup
	}
	return o.warmup
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(name, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", name, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s: empty", name)
	}
	return out, nil
}

// defaultJavaLibs follows scripts/kafka-cluster.sh: $KPROD_CACHE, else
// $HOME/.cache/kprod/kafka-$KPROD_KAFKA_VERSION (4.4.0 by default).
func defaultJavaLibs() string {
	if c := os.Getenv("KPROD_CACHE"); c != "" {
		return filepath.Join(c, "libs")
	}
	v := os.Getenv("KPROD_KAFKA_VERSION")
	if v == "" {
		v = "4.4.0"
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "kprod", "kafka-"+v, "libs")
}
