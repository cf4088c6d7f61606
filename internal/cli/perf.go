package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
)

const perfDescription = `Measure the producer's throughput and latency, like Kafka's ` +
	`kafka-producer-perf-test.sh (ProducerPerformance), and with the same output. ` +
	`Every 5 seconds it prints the records acknowledged in the window; at the end a summary ` +
	`with latency percentiles over every record (Send to callback). ` +
	`Without --bootstrap-server (or bootstrap.servers in the other flags) it starts an ` +
	`embedded 3-broker in-process cluster (kfake) with the topic, so "kprod perf" alone runs a benchmark. ` +
	`SIGINT/SIGTERM ends the run early after delivering what was sent (and committing the open transaction), for at most 10s ` +
	`(exit status 130, or 1 if records failed or the commit did); a second signal exits at once. ` +
	`The exit status is 1 when records failed or an error stopped the run, 2 for bad flags or settings.`

type perfCmd struct {
	topic            string
	numRecords       int64
	recordSize       int64
	payloadFile      string
	payloadDelimiter string
	payloadMonotonic bool
	throughput       float64
	warmup           int64
	json             bool
	printMetrics     bool
	partitions       int64
	reportingMs      int64
	pf               producerFlags
	txn              perfTxn // --transactional-id, --transaction-duration-ms (perf_txn.go)

	fs            *flagSet
	recordSizeDef *flagDef
	partitionsDef *flagDef
}

func newPerfCmd() *perfCmd {
	c := &perfCmd{topic: "perf-test", numRecords: 1_000_000, recordSize: 100, throughput: -1,
		payloadDelimiter: `\n`, partitions: 6, reportingMs: 5000}
	fs := newFlagSet("perf")
	fs.stringVar(&c.topic, []string{"--topic"}, "TOPIC", "produce messages to this topic")
	fs.unknownHint("-t", "kprod perf names the topic with --topic, as Java's ProducerPerformance does (-t is kprod produce's)")
	fs.intVar(&c.numRecords, []string{"--num-records"}, "NUM-RECORDS", "number of messages to produce")
	c.recordSizeDef = fs.intVar(&c.recordSize, []string{"--record-size"}, "RECORD-SIZE",
		"message size in bytes: random upper-case letters, as Java's tool sends. Give at most one of --record-size, --payload-file, --payload-monotonic")
	fs.stringVar(&c.payloadFile, []string{"--payload-file"}, "PAYLOAD-FILE",
		"file to read the message payloads from, split by --payload-delimiter (a literal string, not a regular expression as in Java's tool); empty pieces are skipped; each message is one of them chosen at random")
	fs.stringVar(&c.payloadDelimiter, []string{"--payload-delimiter"}, "PAYLOAD-DELIMITER",
		`delimiter of the payloads in --payload-file (escapes \n \t \r \0 \\ are understood); ignored without --payload-file`)
	fs.boolVar(&c.payloadMonotonic, []string{"--payload-monotonic"}, "payload is a monotonically increasing integer (the record's number)")
	fs.floatVar(&c.throughput, []string{"--throughput"}, "THROUGHPUT",
		"throttle to approximately THROUGHPUT messages/sec; -1 disables throttling")
	c.pf.register(fs, "--producer-props", true)
	c.pf.embedded = true
	fs.intVar(&c.warmup, []string{"--warmup-records"}, "WARMUP-RECORDS",
		"the number of first records to treat as warmup: they are left out of an extra steady-state summary line printed after the complete test summary")
	fs.boolVar(&c.json, []string{"--json"}, "print the results as one JSON object on stdout, and nothing else there (periodic lines go to stderr), "+
		`also when the run stopped early: "interrupted" is true after SIGINT/SIGTERM, "stopped" says the error that stopped the run (absent when none did)`)
	fs.boolVar(&c.printMetrics, []string{"--print-metrics"},
		"print the producer's metrics (Java's names: record-send-rate, request-latency-avg, ...) and the tool's own counts at the end of the test (on stderr with --json)")
	fs.intVar(&c.reportingMs, []string{"--reporting-interval"}, "MS",
		"print the periodic line every MS milliseconds (Java's tool: always 5000)")
	c.partitionsDef = fs.intVar(&c.partitions, []string{"--partitions"}, "N",
		"partitions of the topic in the embedded cluster; ignored with --bootstrap-server")
	c.txn.register(fs)
	c.fs = fs
	return c
}

func (c *perfCmd) usage(w io.Writer) {
	printCommandUsage(w, []string{
		"usage: kprod perf [--topic TOPIC] [--num-records N] [--record-size B | --payload-file FILE]",
		"                  [--throughput R] [--bootstrap-server HOST:PORT,...] [--producer-props K=V ...]",
		"                  [--producer.config FILE] [-X K=V]... [--warmup-records N] [--json] [--print-metrics]",
	}, perfDescription, c.fs, []string{
		"kprod perf --num-records 200000",
		"kprod perf --bootstrap-server localhost:9092 --topic t --num-records 1000000 --record-size 1024 \\",
		"    --throughput -1 --producer-props acks=1 linger.ms=10 --json",
	})
}

// perfRun is one run's state shared with the producer's callbacks.
type perfRun struct {
	total *stats
	// steady is the stats from --warmup-records on (nil before, and
	// without a warmup); the reporter reads it.
	steady   atomic.Pointer[stats]
	fails    failures
	sent     atomic.Int64
	fatal    atomic.Pointer[error]
	lastAck  progress
	maxBlock time.Duration
	metrics  kprod.Metrics // the producer's, taken after the last record
	clientID string        // for the metrics' tags
}

func (c *perfCmd) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	rest, err := c.fs.parse(args)
	if err != nil {
		return usageFail(stderr, "perf", err)
	}
	if c.fs.help {
		c.usage(stdout)
		return exitOK
	}
	if len(rest) > 0 {
		return usageFail(stderr, "perf", usagef("unexpected argument %q", rest[0]))
	}
	if err := c.check(); err != nil {
		return usageFail(stderr, "perf", err)
	}
	payloads, err := c.readPayloads(stderr)
	if err != nil {
		return usageFail(stderr, "perf", err)
	}
	cfg, err := c.pf.build(map[string]string{"client.id": "perf-producer-client"})
	if err != nil {
		return usageFail(stderr, "perf", err)
	}
	if err := c.txn.apply(&cfg); err != nil {
		return usageFail(stderr, "perf", err)
	}
	embedded := len(cfg.BootstrapServers) == 0
	if embedded {
		// Check the rest of the settings before starting anything.
		probe := cfg
		probe.BootstrapServers = []string{"127.0.0.1:9092"}
		if err := validate(&probe); err != nil {
			return usageFail(stderr, "perf", err)
		}
		cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(int32(c.partitions), c.topic))
		if err != nil {
			fmt.Fprintf(stderr, "kprod perf: cannot start the embedded cluster: %v\n", err)
			return exitFail
		}
		defer cluster.Close()
		cfg.BootstrapServers = cluster.ListenAddrs()
		fmt.Fprintf(stderr, "kprod perf: no --bootstrap-server given: started an embedded 3-broker cluster (kfake, in this process) at %s with topic %q of %d partitions. It measures kprod against an in-memory fake, not a real Kafka.\n",
			strings.Join(cfg.BootstrapServers, ","), c.topic, c.partitions)
	} else if c.partitionsDef.wasSet {
		fmt.Fprintln(stderr, "kprod perf: --partitions applies only to the embedded cluster; ignored with --bootstrap-server")
	}
	if err := validate(&cfg); err != nil {
		return usageFail(stderr, "perf", err)
	}
	if len(cfg.IgnoredProperties) > 0 {
		fmt.Fprintf(stderr, "kprod perf: ignored Java-only properties: %s\n", strings.Join(cfg.IgnoredProperties, ", "))
	}
	p, err := kprod.NewProducer(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "kprod perf: %v\n", err)
		return exitUsage
	}
	out := stdout
	if c.json {
		out = stderr
	}
	if c.warmup > 0 {
		// On the report's stream, as Java's tool prints it on stdout.
		fmt.Fprintf(out, "Warmup first %d records. Steady state results will print after the complete test summary.\n", c.warmup)
	}
	// The whole shutdown after SIGINT (delivering what was sent, closing)
	// gets interruptGrace from the signal on.
	gctx, cancelGrace := withGrace(ctx, interruptGrace)
	defer cancelGrace()
	r := &perfRun{maxBlock: cfg.MaxBlock, clientID: cfg.ClientID}
	// InitTransactions comes before the clocks start, as Java's tool calls
	// initTransactions() before it takes startMs: its time is setup, not
	// throughput, and the throttle must not catch up on it with a burst.
	ready := c.txn.init(ctx, p, r)
	start := time.Now()
	r.total = newStats(start)
	r.lastAck.mark() // the stall clock starts with the run
	rep := startReporter(r, c.numRecords, time.Duration(c.reportingMs)*time.Millisecond, out, stderr)
	interrupted := ctx.Err() != nil
	if ready {
		interrupted = c.produce(ctx, gctx, p, r, newPayloadGen(c, payloads), start)
	}
	if interrupted {
		c.txn.finish(gctx, p, r)
	}
	closeErr := closeProducer(gctx, p, cfg.DeliveryTimeout)
	end := time.Now()
	r.metrics = p.Metrics()
	rep.stop()

	stopped := r.fatal.Load()
	stopReason := ""
	if stopped != nil {
		stopReason = (*stopped).Error()
		fmt.Fprintf(stderr, "kprod perf: stopped after %d of %d records: %v\n", r.sent.Load(), c.numRecords, *stopped)
	}
	if closeErr != nil {
		fmt.Fprintf(stderr, "kprod perf: %v\n", closeErr)
	}
	if interrupted {
		fmt.Fprintf(stderr, "kprod perf: interrupted after %d of %d records\n", r.sent.Load(), c.numRecords)
	}
	// What was sent before a stop is reported too, as ProducerPerformance
	// reports its totals. When the first record (or InitTransactions)
	// stopped the run, the text summary would hold nothing but zeros; the
	// JSON object is printed all the same: a script reads the outcome,
	// "stopped" included, from it.
	if stopped == nil || r.sent.Load() > 1 || c.json {
		c.report(stdout, stderr, r, end, embedded, interrupted, stopReason)
	}
	if stopped != nil {
		return exitFail
	}

	switch {
	case r.fails.count() > 0:
		return exitFail
	case interrupted:
		return exitInterrupted
	}
	return exitOK
}

func (c *perfCmd) check() error {
	if c.topic == "" {
		return usagef("--topic must not be empty")
	}
	if c.numRecords <= 0 {
		return usagef("--num-records should be greater than zero")
	}
	if c.warmup < 0 || c.warmup >= c.numRecords {
		return usagef("the value for --warmup-records must be at least 0 and strictly fewer than the number of records in the test, --num-records")
	}
	if c.recordSize <= 0 || c.recordSize > 1<<30 {
		return usagef("--record-size should be greater than zero (and at most 1 GiB)")
	}
	n := 0
	for _, set := range []bool{c.recordSizeDef.wasSet, c.payloadFile != "", c.payloadMonotonic} {
		if set {
			n++
		}
	}
	if n > 1 {
		return usagef("give at most one of --record-size, --payload-file, --payload-monotonic")
	}
	if c.throughput == 0 || c.throughput != c.throughput {
		return usagef("--throughput must be a positive rate in records/sec, or -1 for no throttling")
	}
	if c.reportingMs <= 0 || c.reportingMs > maxMs {
		return usagef("--reporting-interval must be between 1 and %d ms", maxMs)
	}
	if c.partitions < 1 || c.partitions > 1<<20 {
		return usagef("--partitions must be between 1 and %d", 1<<20)
	}
	return nil
}

// maxMs is the largest millisecond flag value that a time.Duration holds
// (about 292 years).
const maxMs = math.MaxInt64 / int64(time.Millisecond)

// readPayloads reads --payload-file: split on the delimiter, every empty
// piece dropped. Java's tool drops only the trailing ones (String.split
// keeps the leading and middle ones, and the tool sends them as empty
// records); kprod drops them all, as an empty payload is most likely a
// doubled delimiter, not a record meant to be sent.
func (c *perfCmd) readPayloads(stderr io.Writer) ([][]byte, error) {
	if c.payloadFile == "" {
		return nil, nil
	}
	delim, err := unescape(c.payloadDelimiter)
	if err == nil && delim == "" {
		err = errors.New("it is empty")
	}
	if err != nil {
		return nil, usagef("invalid --payload-delimiter %q: %v", c.payloadDelimiter, err)
	}
	abs, _ := filepath.Abs(c.payloadFile)
	fmt.Fprintf(stderr, "Reading payloads from: %s\n", abs)
	data, err := os.ReadFile(c.payloadFile)
	if err != nil {
		return nil, usagef("--payload-file: %v", err)
	}
	var out [][]byte
	for _, p := range bytes.Split(data, []byte(delim)) {
		if len(p) > 0 {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, usagef("--payload-file %s holds no payload", c.payloadFile)
	}
	fmt.Fprintf(stderr, "Number of messages read: %d\n", len(out))
	return out, nil
}

// produce sends the records, throttled from start, and reports whether
// ctx ended it. InitTransactions, if any, has been called. Each Send gets
// gctx, which the interrupt ends only after its grace: a Send that waits
// for memory when the interrupt comes still buffers its record (which
// the run then delivers, and commits), rather than fail it, which would
// also make an open transaction abortable.
func (c *perfCmd) produce(ctx, gctx context.Context, p *kprod.Producer, r *perfRun, gen *payloadGen, start time.Time) (interrupted bool) {
	var first chan struct{}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for i := int64(0); i < c.numRecords; i++ {
		if ctx.Err() != nil {
			return true
		}
		if r.fatal.Load() != nil || !c.txn.begin(p, r) {
			return false
		}
		value := gen.next(i)
		// The record's timestamp is the send's start, from the clock
		// read that times it: the producer would read the clock again
		// for a record without one. One read here and one in the
		// callback (monoNow) are each record's only clock reads.
		sendStart := monoNow()
		rec := &kprod.Record{Topic: c.topic, Value: value, Timestamp: monoBase.Add(sendStart)}
		if i == c.warmup && c.warmup > 0 {
			r.steady.Store(newStats(time.Now()))
		}
		steady := r.steady.Load()
		size := len(value)
		var firstCh chan struct{}
		if i == 0 {
			first = make(chan struct{}, 1)
			firstCh = first
		}
		r.sent.Add(1)
		p.Send(gctx, rec, func(_ *kprod.Record, err error) {
			if firstCh != nil {
				// Once the outcome is counted: the loop reads r.fatal then.
				defer func() { firstCh <- struct{}{} }()
			}
			if err != nil {
				if gctx.Err() != nil && errors.Is(err, gctx.Err()) {
					r.sent.Add(-1) // never buffered: the run was interrupted
					return
				}
				if stopsTheRun(err, &r.lastAck, r.maxBlock) {
					r.fatal.CompareAndSwap(nil, &err)
				} else if firstCh != nil && gen.sameSize() && errors.Is(err, kerr.ErrRecordTooLarge) {
					// Every record has this size: all would fail alike.
					stop := fmt.Errorf("%w; every record of this run is %d bytes and would fail the same way: lower --record-size, or raise max.request.size (--producer-props max.request.size=...)", err, size)
					r.fatal.CompareAndSwap(nil, &stop)
				}
				r.fails.add("", err)
				return
			}
			now := monoNow()
			r.lastAck.markAt(now)
			lat := now - sendStart
			r.total.record(lat, size)
			if steady != nil {
				steady.record(lat, size)
			}
		})
		if i == 0 {
			// Fail fast: an unreachable cluster or unknown topic shows
			// on the first record; do not queue a million behind it. An
			// error of that record alone (ErrRecordTooLarge for a long
			// --payload-file piece) counts as it would for any other
			// record: stopsTheRun, in the callback, tells them apart.
			// Flushed, not left to linger.ms: alone in its batch, it
			// would hold the run (and its clock) for all of linger.ms
			// (Flush's error is the ctx's, which the select sees).
			_ = p.Flush(ctx)
			select {
			case <-first:
				if r.fatal.Load() != nil {
					return false
				}
			case <-ctx.Done():
				return true
			}
		}
		if c.throughput > 0 {
			// At most about 146 years ahead: a tiny rate must not
			// overflow time.Duration into no throttling at all.
			due := start.Add(time.Duration(min(float64(i+1)/c.throughput*float64(time.Second), 1<<62)))
			if d := time.Until(due); d > time.Millisecond {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-timer.C:
				case <-ctx.Done():
					return true
				}
			}
		}
		if !c.txn.maybeCommit(ctx, p, r, false) {
			return ctx.Err() != nil
		}
	}
	if !c.txn.maybeCommit(ctx, p, r, true) {
		return ctx.Err() != nil
	}
	return false
}

// report prints the results. interrupted means a signal ended the run;
// stopped is the error that did, if one did.
func (c *perfCmd) report(stdout, stderr io.Writer, r *perfRun, end time.Time, embedded, interrupted bool, stopped string) {
	total := r.total.result(end)
	var steady *result
	if st := r.steady.Load(); st != nil {
		s := st.result(end)
		steady = &s
	}
	errs := r.fails.snapshot()
	failed := r.fails.count()
	if stopped == "" || !r.fails.onlyIs(stopped) {
		// (The "stopped after" line showed the one error already.)
		r.fails.printFirst(stderr, "kprod perf: ")
	}
	if c.json {
		out := perfJSON{
			result: total, Topic: c.topic, Sent: r.sent.Load(), Failed: failed, Errors: errs,
			Embedded: embedded, Interrupted: interrupted, Stopped: stopped, WarmupRecords: c.warmup, SteadyState: steady,
		}
		enc := json.NewEncoder(stdout)
		_ = enc.Encode(out)
		if c.printMetrics {
			// stdout is the JSON document; the metrics table goes beside it.
			printMetrics(stderr, r.metrics, r.clientID, total, r.sent.Load(), failed, errs)
		}
		return
	}
	total.printTotal(stdout, "")
	if steady != nil {
		steady.printTotal(stdout, " steady state")
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "%d records failed: %s.\n", failed, r.fails.summary())
	}
	if c.printMetrics {
		printMetrics(stdout, r.metrics, r.clientID, total, r.sent.Load(), failed, errs)
	}
}

// perfJSON is the --json output. Field names are stable: scripts depend
// on them. The top-level numbers cover every acknowledged record, as Java's
// first summary line; steady_state leaves out --warmup-records.
// interrupted is true when SIGINT/SIGTERM ended the run, and only then;
// stopped is the message of the error that stopped it (an unknown topic,
// a failed commit, ...), absent when none did. The object is printed even
// when the first record stopped the run.
type perfJSON struct {
	result
	Topic         string           `json:"topic"`
	Sent          int64            `json:"sent"`
	Failed        int64            `json:"failed"`
	Errors        map[string]int64 `json:"errors"`
	Embedded      bool             `json:"embedded"`
	Interrupted   bool             `json:"interrupted"`
	Stopped       string           `json:"stopped,omitempty"`
	WarmupRecords int64            `json:"warmup_records"`
	SteadyState   *result          `json:"steady_state,omitempty"`
}

// printMetrics prints the producer's metrics as the Java tool's
// --print-metrics does (ToolsUtils.printMetrics: group:name:{tags}), then
// the tool's own counts.
func printMetrics(w io.Writer, m kprod.Metrics, clientID string, r result, sent, failed int64, errs map[string]int64) {
	fmt.Fprintln(w)
	var rows [][2]string
	all := m.Map()
	for _, k := range m.MetricNames() {
		rows = append(rows, [2]string{javaMetricName(k, clientID), strconv.FormatFloat(all[k], 'f', 3, 64)})
	}
	slices.SortFunc(rows, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	rows = append(rows,
		[2]string{"perf:record-send-total", strconv.FormatInt(sent, 10)},
		[2]string{"perf:record-ack-total", strconv.FormatInt(r.Records, 10)},
		[2]string{"perf:record-error-total", strconv.FormatInt(failed, 10)},
		[2]string{"perf:byte-ack-total", strconv.FormatInt(r.Bytes, 10)},
		[2]string{"perf:record-latency-avg-ms", fmt.Sprintf("%.3f", r.AvgLatencyMs)},
		[2]string{"perf:record-latency-max-ms", fmt.Sprintf("%.3f", r.MaxLatencyMs)},
	)
	for _, k := range sortedKeys(errs) {
		rows = append(rows, [2]string{"perf:record-error-total{type=" + k + "}", strconv.FormatInt(errs[k], 10)})
	}
	width := len("Metric Name")
	for _, row := range rows {
		width = max(width, len(row[0]))
	}
	fmt.Fprintf(w, "%-*s   %s\n", width, "Metric Name", "Value")
	for _, row := range rows {
		fmt.Fprintf(w, "%-*s : %s\n", width, row[0], row[1])
	}
}

// payloadGen makes the records' values.
type payloadGen struct {
	size      int
	list      [][]byte
	monotonic bool
	rng       *rand.Rand
	slab      []byte
}

// sameSize reports whether every record gets a value of the same size
// (--record-size, not --payload-file or --payload-monotonic).
func (g *payloadGen) sameSize() bool { return len(g.list) == 0 && !g.monotonic }

func newPayloadGen(c *perfCmd, list [][]byte) *payloadGen {
	// A fixed seed, as Java's SplittableRandom(0): runs send the same data.
	return &payloadGen{size: int(c.recordSize), list: list, monotonic: c.payloadMonotonic,
		rng: rand.New(rand.NewPCG(0, 0))}
}

func (g *payloadGen) next(i int64) []byte {
	switch {
	case len(g.list) > 0:
		return g.list[g.rng.IntN(len(g.list))]
	case g.monotonic:
		return strconv.AppendInt(nil, i, 10)
	}
	// A value must not change until its callback: each record gets its own
	// bytes, cut from a larger slab to save allocations.
	if len(g.slab) < g.size {
		g.slab = make([]byte, max(g.size, 1<<20))
	}
	v := g.slab[:g.size:g.size]
	g.slab = g.slab[g.size:]
	// Upper-case letters, as Java's random.nextInt(26) + 65; 8 per
	// random word (the multiply-shift maps a byte onto 0..25).
	for j := 0; j < len(v); j += 8 {
		x := g.rng.Uint64()
		for k := j; k < j+8 && k < len(v); k++ {
			v[k] = 'A' + byte((x&0xff)*26>>8)
			x >>= 8
		}
	}
	return v
}

// reporter prints the periodic lines and, when stderr is a terminal, a
// live progress line.
type reporter struct {
	done chan struct{}
	wg   sync.WaitGroup
	tty  bool
	errw io.Writer
}

func startReporter(r *perfRun, total int64, interval time.Duration, out, stderr io.Writer) *reporter {
	rep := &reporter{done: make(chan struct{}), tty: isTerminal(stderr), errw: stderr}
	rep.wg.Add(1)
	go func() {
		defer rep.wg.Done()
		window := time.NewTicker(interval)
		defer window.Stop()
		var progress <-chan time.Time
		if rep.tty {
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			progress = t.C
		}
		start := time.Now()
		steadyShown := false
		for {
			select {
			case <-rep.done:
				return
			case now := <-window.C:
				// After the warmup the windows are the steady state's,
				// announced once, as in Java's tool (4.x), whose whole-run
				// stats stop printing then.
				s := r.total
				if st := r.steady.Load(); st != nil {
					s = st
				}
				if line := s.windowLine(now); line != "" {
					rep.clear()
					if s != r.total && !steadyShown {
						fmt.Fprintln(out, "In steady state.")
						steadyShown = true
					}
					fmt.Fprintln(out, line)
				}
			case now := <-progress:
				sent, acked, failed := r.sent.Load(), r.total.acked(), r.fails.count()
				rate := float64(acked) / now.Sub(start).Seconds()
				fmt.Fprintf(stderr, "\r\033[K%d/%d sent (%.0f%%), %d acknowledged, %d failed, %.0f records/sec",
					sent, total, 100*float64(sent)/float64(total), acked, failed, rate)
			}
		}
	}()
	return rep
}

func (rep *reporter) clear() {
	if rep.tty {
		fmt.Fprint(rep.errw, "\r\033[K")
	}
}

func (rep *reporter) stop() {
	close(rep.done)
	rep.wg.Wait()
	rep.clear()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// javaMetricName is a kprod metric name ("record-send-rate", or
// "byte-rate{topic=t}" for a topic's) as Java prints the MetricName:
// its group, name and tags, e.g.
// "producer-topic-metrics:byte-rate:{client-id=c, topic=t}".
func javaMetricName(k, clientID string) string {
	if name, tags, ok := strings.Cut(k, "{"); ok {
		return "producer-topic-metrics:" + name + ":{client-id=" + clientID + ", " + tags
	}
	return "producer-metrics:" + k + ":{client-id=" + clientID + "}"
}
