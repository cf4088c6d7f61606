package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// target is one cluster the workload runs against.
type target struct {
	name    string
	desc    string
	brokers []string
	kfake   *kfakeProc
	cl      *kgo.Client
	admin   *kadm.Client
	ids     []int32 // broker node ids
	rf      int16
}

// config is one point of the workload matrix.
type config struct {
	Size        int     `json:"size"`
	Batch       int     `json:"batch"`
	Compression string  `json:"compression"`
	Rate        float64 `json:"rate"` // records/s, 0 = unthrottled
}

// runResult is one client's run: the worker's own measurements plus what
// the coordinator read from wait4.
type runResult struct {
	Target string `json:"target"`
	config
	Run int `json:"run"`
	workerResult
	ProcCPUSec float64 `json:"proc_cpu_s"`        // user+sys of the whole process
	ProcSysSec float64 `json:"proc_sys_s"`        // the sys part of ProcCPUSec: time in the kernel (system calls, loopback TCP)
	CPUPerMRec float64 `json:"cpu_s_per_1m"`      // ProcCPUSec per million records sent (warm-up included)
	SysPerMRec float64 `json:"sys_s_per_1m"`      // ProcSysSec per million records sent (warm-up included)
	MaxRSSMiB  float64 `json:"max_rss_mib"`       // peak VmHWM of the process
	OnBroker   int64   `json:"records_on_broker"` // sum of the topic's end offsets; -1 if unknown
	// BrokerCPUPerMRec is the kfake process's user+sys CPU while the
	// client's process ran, per million records sent (warm-up
	// included): client and broker share the machine's cores, so a
	// client's rate also depends on what its batches cost the broker.
	// kfake only (0 otherwise).
	BrokerCPUPerMRec float64 `json:"broker_cpu_s_per_1m,omitempty"`
	// StealPct is the share of the machine's CPU time (all cores) that
	// the hypervisor gave to other guests while the run's process ran
	// (/proc/stat's steal): on a shared VM a client's rate and CPU
	// figures drop with it, so runs under steal are not comparable with
	// runs without. -1 if /proc/stat could not be read.
	StealPct float64 `json:"steal_pct"`
	Err      string  `json:"error,omitempty"`
}

// summary is the medians of one client's successful runs.
type summary struct {
	Target string `json:"target"`
	config
	Client     string  `json:"client"`
	Runs       int     `json:"runs_ok"`
	Failed     int     `json:"runs_failed"`
	RecPerSec  float64 `json:"records_per_s"`
	MiBPerSec  float64 `json:"mib_per_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	CPUPerMRec float64 `json:"cpu_s_per_1m"`
	SysPerMRec float64 `json:"sys_s_per_1m"` // of CPUPerMRec, the kernel's part
	MaxRSSMiB  float64 `json:"max_rss_mib"`
	// BrokerCPUPerMRec: see runResult (kfake only).
	BrokerCPUPerMRec float64 `json:"broker_cpu_s_per_1m,omitempty"`
	RateRatio        float64 `json:"records_per_s_vs_baseline,omitempty"`
	CPURatio         float64 `json:"cpu_per_record_vs_baseline,omitempty"`
	// OwnCPURatio is CPURatio with the harness row's CPU (the Go
	// worker's own work per record) taken from both sides: the Go
	// clients' own CPU per record against franz-go's. Only when the
	// harness ran.
	OwnCPURatio float64  `json:"own_cpu_per_record_vs_baseline,omitempty"`
	Idempotent  *bool    `json:"idempotent,omitempty"`
	Notes       string   `json:"notes,omitempty"`
	Version     string   `json:"version,omitempty"`
	Errors      []string `json:"errors,omitempty"`
	KeptUp      *bool    `json:"kept_up,omitempty"` // throttled runs: reached 95% of the rate
	ExtraRecord int64    `json:"records_on_broker_beyond_sent,omitempty"`
	// StealPct is the median of the runs' StealPct, StealMaxPct the
	// highest; both -1 if unknown.
	StealPct    float64 `json:"steal_pct"`
	StealMaxPct float64 `json:"steal_max_pct"`
}

type report struct {
	Env        map[string]string `json:"environment"`
	Command    string            `json:"command"`
	Records    int               `json:"records"`
	Warmup     int               `json:"warmup"`
	JavaWarmup int               `json:"java_warmup"`
	Keys       int               `json:"keys,omitempty"` // -keys: distinct record keys, 0 = none
	Values     string            `json:"values"`         // -values: shared or written
	Runs       []runResult       `json:"runs"`
	Summaries  []summary         `json:"summaries"`
	Skipped    map[string]string `json:"skipped,omitempty"`
	md         bytes.Buffer
}

func coordinate(o *options) error {
	sizes, err := intList("sizes", o.sizes)
	if err != nil {
		return err
	}
	batches, err := intList("batches", o.batches)
	if err != nil {
		return err
	}
	comps := splitList(o.compressions)
	for _, c := range comps {
		if c != "none" && c != "lz4" {
			return fmt.Errorf("-compressions: %q is not none or lz4", c)
		}
	}
	if o.runs < 1 || o.records < 1 {
		return errors.New("-runs and -records must be at least 1")
	}
	if o.keys < 0 {
		return fmt.Errorf("-keys: %d is negative (0: no keys; N: keys from N distinct ones)", o.keys)
	}
	if err := checkValues(o.values); err != nil {
		return err
	}
	var fixedRate float64
	half, halfOf := false, ""
	if r, ok := strings.CutPrefix(o.rate, "half"); ok && (r == "" || r[0] == ':') {
		half, halfOf = true, strings.TrimPrefix(r, ":")
	} else {
		if fixedRate, err = strconv.ParseFloat(o.rate, 64); err != nil || fixedRate < 0 {
			return fmt.Errorf("-rate: %q is not a number of records/s or half", o.rate)
		}
	}
	if o.javaLibs == "" {
		o.javaLibs = defaultJavaLibs()
	}

	rep := &report{
		Env:        environment(o),
		Command:    "bench " + strings.Join(os.Args[1:], " "),
		Records:    o.records,
		Warmup:     o.warmup,
		JavaWarmup: o.javaWarmup,
		Keys:       o.keys,
		Values:     o.values,
		Skipped:    map[string]string{},
	}
	var clients []string
	for _, c := range splitList(o.clients) {
		if !slices.Contains(allClients, c) {
			return fmt.Errorf("-clients: unknown client %q (have %s)", c, strings.Join(allClients, ", "))
		}
		switch {
		case c == "java":
			if err := javaAvailable(o.javaLibs); err != nil {
				rep.Skipped[c] = err.Error()
				continue
			}
		case goClients[c] == nil:
			rep.Skipped[c] = unavailable[c]
			continue
		}
		clients = append(clients, c)
	}
	for c, why := range rep.Skipped {
		logf("skipping %s: %s", c, why)
	}
	if len(clients) == 0 {
		return errors.New("no client to run")
	}
	log4j := ""
	if slices.Contains(clients, "java") {
		if log4j, err = writeLog4j(); err != nil {
			return err
		}
		defer os.Remove(log4j)
	}

	targets, err := parseTargets(o)
	if err != nil {
		return err
	}
	// A ^C or SIGTERM stops the worker under way rather than orphaning it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.ctx = ctx
	rep.writeHeader(o, clients)
	for _, t := range targets {
		if err := t.open(o); err != nil {
			return fmt.Errorf("target %s: %w", t.name, err)
		}
		if t.kfake == nil && o.brokerWarmup > 0 {
			if err := t.warmBrokers(o); err != nil {
				return fmt.Errorf("target %s: %w", t.name, err)
			}
		}
		for _, size := range sizes {
			if ctx.Err() != nil {
				break
			}
			for _, batch := range batches {
				for _, comp := range comps {
					cfg := config{Size: size, Batch: batch, Compression: comp, Rate: fixedRate}
					sums := rep.phase(o, t, cfg, clients, log4j)
					if half {
						base := rateToHalve(sums, halfOf)
						if base <= 0 {
							logf("no unthrottled rate to halve for %s %+v", t.name, cfg)
							continue
						}
						cfg.Rate = float64(int64(base / 2))
						rep.phase(o, t, cfg, clients, log4j)
					}
				}
			}
		}
		t.close()
	}
	rep.writeFooter()
	os.Stdout.Write(rep.md.Bytes())
	return rep.save(o)
}

// save writes -out and -json; the coordinator also calls it after every
// table, so that an interrupted invocation keeps what it measured.
func (rep *report) save(o *options) error {
	if o.mdOut != "" {
		if err := os.WriteFile(o.mdOut, rep.md.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func parseTargets(o *options) ([]*target, error) {
	specs := append([]string(nil), o.targets...)
	if o.brokers != "" {
		specs = append(specs, "kafka="+o.brokers)
	}
	if len(specs) == 0 {
		specs = []string{"kfake"}
	}
	var ts []*target
	for _, s := range specs {
		if s == "kfake" || strings.HasPrefix(s, "kfake:") {
			n := o.kfakeBrokers
			if rest, ok := strings.CutPrefix(s, "kfake:"); ok {
				var err error
				if n, err = strconv.Atoi(rest); err != nil || n < 1 {
					return nil, fmt.Errorf("-target %q: want kfake:N with N ≥ 1", s)
				}
			}
			ts = append(ts, &target{name: "kfake", desc: fmt.Sprintf("kfake, %d brokers, in its own process", n), rf: int16(min(n, 3))})
			ts[len(ts)-1].brokers = []string{strconv.Itoa(n)} // resolved in open
			continue
		}
		name, addrs, ok := strings.Cut(s, "=")
		if !ok || name == "" || addrs == "" {
			return nil, fmt.Errorf("-target %q: want kfake, kfake:N or NAME=host:port,...", s)
		}
		ts = append(ts, &target{name: name, brokers: splitList(addrs)})
	}
	return ts, nil
}

func (t *target) open(o *options) error {
	if t.name == "kfake" {
		n, _ := strconv.Atoi(t.brokers[0])
		p, err := startKfake(n, o.kfakeStore)
		if err != nil {
			return err
		}
		t.kfake = p
		t.brokers = p.addrs
	}
	// The coordinator's client also writes each new partition's first
	// record (primeTopic), to the partition the record names.
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	t.cl, t.admin = cl, kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := t.admin.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("cannot reach %v: %w", t.brokers, err)
	}
	n := len(md.Brokers)
	for _, b := range md.Brokers {
		t.ids = append(t.ids, b.NodeID)
	}
	t.rf = int16(min(n, 3))
	if t.desc == "" {
		t.desc = fmt.Sprintf("Apache Kafka, %d broker(s) at %s", n, strings.Join(t.brokers, ","))
	}
	logf("target %s: %s; topics get %d partitions, replication factor %d", t.name, t.desc, o.partitions, t.rf)
	return nil
}

// warmBrokers produces -broker-warmup records to a scratch topic before
// anything is measured: a freshly started JVM broker is several times
// slower until its JIT has compiled the produce path, which would
// penalise whichever client happens to run first.
func (t *target) warmBrokers(o *options) error {
	topic := fmt.Sprintf("bench-warmup-%d", time.Now().UnixNano()%1e9)
	ctx, cancel := context.WithTimeout(o.ctx, 5*time.Minute)
	defer cancel()
	if err := createTopic(ctx, t, topic, o.partitions); err != nil {
		return err
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer dcancel()
		_, _ = t.admin.DeleteTopic(dctx, topic)
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.brokers...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	start := time.Now()
	vals := newPayloads(100, false)
	var firstErr atomic.Value
	for range o.brokerWarmup {
		cl.Produce(ctx, &kgo.Record{Value: vals.next()}, func(_ *kgo.Record, err error) {
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("broker warm-up: %w", err)
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("broker warm-up: %w", err)
	}
	logf("warmed the brokers up with %d records in %s", o.brokerWarmup, time.Since(start).Round(time.Millisecond))
	return nil
}

func (t *target) close() {
	if t.admin != nil {
		t.admin.Close()
	}
	if t.kfake != nil {
		t.kfake.stop()
	}
}

// phase runs every client o.runs times with one configuration, rotating
// the order from run to run so that no client always goes first.
func (rep *report) phase(o *options, t *target, cfg config, clients []string, log4j string) []summary {
	logf("== %s: %d B values, batch %d, compression %s, %s", t.name, cfg.Size, cfg.Batch, cfg.Compression, rateText(cfg.Rate))
	byClient := map[string][]runResult{}
	nonce := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	for r := range o.runs {
		for i := range clients {
			if o.ctx.Err() != nil {
				break
			}
			c := clients[(i+r)%len(clients)]
			res := rep.runOne(o, t, cfg, c, r, nonce, log4j)
			byClient[c] = append(byClient[c], res)
			rep.Runs = append(rep.Runs, res)
		}
	}
	var sums []summary
	for _, c := range clients {
		sums = append(sums, summarize(t, cfg, c, byClient[c], o.records+o.warmupOf(c)))
	}
	applyRatios(sums)
	rep.Summaries = append(rep.Summaries, sums...)
	rep.writeTable(t, cfg, sums)
	if err := rep.save(o); err != nil {
		logf("cannot save the results: %v", err)
	}
	return sums
}

func (rep *report) runOne(o *options, t *target, cfg config, client string, run int, nonce, log4j string) runResult {
	res := runResult{Target: t.name, config: cfg, Run: run + 1, OnBroker: -1}
	res.Client = client
	topic := fmt.Sprintf("bench-%s-%d-%d-%s-%d-%s", client, cfg.Size, cfg.Batch, cfg.Compression, run+1, nonce)
	fail := func(err error) runResult {
		res.Err = err.Error()
		logf("  run %d %-9s FAILED: %v", run+1, client, err)
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := createTopic(ctx, t, topic, o.partitions); err != nil {
		return fail(err)
	}
	if err := primeTopic(ctx, t, topic, o.partitions); err != nil {
		return fail(err)
	}
	if !o.keepTopics {
		defer func() {
			dctx, dcancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer dcancel()
			if _, err := t.admin.DeleteTopic(dctx, topic); err != nil {
				logf("  cannot delete topic %s: %v", topic, err)
			}
		}()
	}
	w := &workload{brokers: t.brokers, topic: topic, size: cfg.Size, batch: cfg.Batch, compression: cfg.Compression, clientID: "bench-" + client, keys: o.keys}

	rctx, rcancel := context.WithTimeout(o.ctx, o.runTimeout)
	defer rcancel()
	var cmd *exec.Cmd
	if client == "java" {
		cmd = javaCommand(rctx, o, w, cfg.Rate, log4j)
	} else {
		self, err := os.Executable()
		if err != nil {
			return fail(err)
		}
		cmd = exec.CommandContext(rctx, self, "-worker",
			"-client", client,
			"-brokers", strings.Join(t.brokers, ","),
			"-topic", topic,
			"-size", strconv.Itoa(cfg.Size),
			"-batch", strconv.Itoa(cfg.Batch),
			"-compression", cfg.Compression,
			"-records", strconv.Itoa(o.records),
			"-warmup", strconv.Itoa(o.warmup),
			"-rate-n", strconv.FormatFloat(cfg.Rate, 'f', -1, 64),
			"-keys", strconv.Itoa(o.keys),
			"-values", o.values,
		)
		if o.profileDir != "" {
			if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
				return fail(err)
			}
			cmd.Args = append(cmd.Args, "-cpuprofile", filepath.Join(o.profileDir, topic+".pprof"))
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if client != "java" {
		// A Go worker that overruns prints its goroutines on SIGQUIT.
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	}
	cmd.WaitDelay = 5 * time.Second
	var runErr error
	peak := new(atomic.Int64)
	var brokerCPU0 time.Duration
	if t.kfake != nil {
		brokerCPU0 = procCPU(t.kfake.cmd.Process.Pid)
	}
	ticks0, ticksOK0 := machineTicks()
	if runErr = cmd.Start(); runErr == nil {
		stopWatch := watchHWM(cmd.Process.Pid, peak)
		runErr = cmd.Wait()
		stopWatch()
	}
	ticks1, ticksOK1 := machineTicks()
	res.StealPct = -1
	if ticksOK0 && ticksOK1 {
		res.StealPct = ticks1.stealPctSince(ticks0)
	}
	var brokerCPU time.Duration
	if t.kfake != nil {
		brokerCPU = procCPU(t.kfake.cmd.Process.Pid) - brokerCPU0
	}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.ProcCPUSec = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
			res.ProcSysSec = float64(ru.Stime.Nano()) / 1e9
		}
	}
	res.MaxRSSMiB = float64(peak.Load()) / 1024
	if runErr != nil {
		switch {
		case o.ctx.Err() != nil:
			runErr = errors.New("interrupted")
		case rctx.Err() != nil:
			runErr = fmt.Errorf("stopped after -run-timeout %s", o.runTimeout)
		}
		if f, err := os.CreateTemp("", "bench-"+topic+"-*.log"); err == nil {
			_, _ = f.Write(stdout.Bytes())
			_, _ = f.Write(stderr.Bytes())
			_ = f.Close()
			runErr = fmt.Errorf("%w (output in %s)", runErr, f.Name())
		}
		return fail(fmt.Errorf("%v: %s", runErr, strings.TrimSpace(tail(stderr.Bytes(), 1500)+tail(stdout.Bytes(), 500))))
	}
	var wr *workerResult
	if client == "java" {
		var err error
		if wr, err = parseJava(stdout.Bytes(), o); err != nil {
			return fail(err)
		}
	} else {
		lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
		wr = new(workerResult)
		if err := json.Unmarshal(lines[len(lines)-1], wr); err != nil {
			return fail(fmt.Errorf("worker output: %v: %s", err, tail(stdout.Bytes(), 500)))
		}
	}
	res.workerResult = *wr
	res.MaxRSSMiB = max(res.MaxRSSMiB, float64(wr.PeakRSSKiB)/1024)
	sent := o.records + o.warmupOf(client)
	res.CPUPerMRec = res.ProcCPUSec / (float64(sent) / 1e6)
	res.SysPerMRec = res.ProcSysSec / (float64(sent) / 1e6)
	res.BrokerCPUPerMRec = brokerCPU.Seconds() / (float64(sent) / 1e6)
	vctx, vcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer vcancel()
	if n, err := topicRecords(vctx, t, topic); err == nil {
		res.OnBroker = n - int64(o.partitions) // less primeTopic's records
	}
	res.Err = deliveryErr(&res, client, sent)
	broker := ""
	if t.kfake != nil {
		broker = fmt.Sprintf("  kfake cpu %5.2f s/1M", res.BrokerCPUPerMRec)
	}
	logf("  run %d %-9s %9.0f rec/s %7.1f MiB/s  p50 %7.2f ms  p99 %7.2f ms  max %7.1f ms  cpu %5.2f s/1M (sys %4.2f)%s  rss %6.1f MiB  on broker %d  steal %4.1f%%%s",
		run+1, client, res.RecPerSec, res.MiBPerSec, res.P50Ms, res.P99Ms, res.MaxMs, res.CPUPerMRec, res.SysPerMRec, broker, res.MaxRSSMiB, res.OnBroker, res.StealPct, errSuffix(res.Err))
	return res
}

// deliveryErr is why a run that finished does not count: records whose
// send failed, or fewer records on the broker than were sent, all of them
// acknowledged (acks=all), so that the client's count cannot be trusted
// (the harness row sends none).
func deliveryErr(res *runResult, client string, sent int) string {
	switch {
	case res.Failed > 0:
		return fmt.Sprintf("%d records failed: %s", res.Failed, res.FirstError)
	case res.OnBroker >= 0 && res.OnBroker < int64(sent) && client != "harness":
		return fmt.Sprintf("the broker holds %d of the %d records sent", res.OnBroker, sent)
	}
	return ""
}

// procCPU is the user+sys CPU time of process pid so far (0 if it cannot
// be read), from /proc/PID/stat: utime and stime are its 14th and 15th
// fields, in clock ticks (USER_HZ, 100 on Linux).
// cpuTicks is the first line of /proc/stat: the machine's CPU time in
// clock ticks, all cores together.
type cpuTicks struct{ steal, total uint64 }

func machineTicks() (cpuTicks, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPUTicks(line)
}

// parseCPUTicks reads "cpu user nice system idle iowait irq softirq steal
// guest guest_nice" (proc(5)). guest and guest_nice are already counted
// in user and nice, so the total is the first eight.
func parseCPUTicks(line string) (cpuTicks, bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}, false
	}
	var t cpuTicks
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTicks{}, false
		}
		t.total += n
		if i == 7 {
			t.steal = n
		}
	}
	return t, true
}

// stealPctSince is the percentage of the CPU time between then and t
// that was stolen.
func (t cpuTicks) stealPctSince(then cpuTicks) float64 {
	if t.total <= then.total {
		return 0
	}
	return 100 * float64(t.steal-then.steal) / float64(t.total-then.total)
}

func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return statCPU(string(b))
}

func statCPU(stat string) time.Duration {
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields counted from after its closing parenthesis.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const userHZ = 100
	return time.Duration(utime+stime) * time.Second / userHZ
}

// watchHWM samples the child's VmHWM (its peak resident set) every 50 ms
// until stopped. ru_maxrss from wait4 cannot be used: Go starts a child
// with vfork semantics, so the child's ru_maxrss starts at the
// coordinator's own peak RSS and hides any client that uses less.
// VmHWM only grows, so the last sample misses at most the last 50 ms.
func watchHWM(pid int, peak *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kib := vmHWM(fmt.Sprintf("/proc/%d/status", pid)); kib > peak.Load() {
				peak.Store(kib)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// vmHWM reads VmHWM (KiB) from a /proc/PID/status file; 0 if unknown.
func vmHWM(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "  ERROR " + e
}

func createTopic(ctx context.Context, t *target, topic string, partitions int) error {
	resp, err := t.admin.CreateTopic(ctx, int32(partitions), t.rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	// Wait until every broker's metadata has a leader for every
	// partition: a client that asks a broker which has not caught up yet
	// gets UNKNOWN_TOPIC_OR_PARTITION, and kafka-go does not retry that.
	for _, id := range t.ids {
		for {
			if topicReady(ctx, t.cl.Broker(int(id)), topic, partitions) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("topic %s has no leaders on broker %d: %w", topic, id, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// primeTopic writes one record, acks=all, to each partition of a new
// topic and waits for them, so that no client's measured run pays for
// the brokers' start of a new partition: on the 3 real brokers the first
// write to one was acknowledged about a second later. With batch.size
// 1 MiB, where a sticky partitioner's 10,000 warm-up records reach only
// one or two partitions, that second fell into kprod's measured run in
// about a third of the runs (p99 about the run's length: the records of
// two partitions acknowledged only after it).
func primeTopic(ctx context.Context, t *target, topic string, partitions int) error {
	recs := make([]*kgo.Record, partitions)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i), Value: []byte("bench: first record of the partition")}
	}
	if err := t.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("write the first record of each partition of %s: %w", topic, err)
	}
	return nil
}

func topicReady(ctx context.Context, b *kgo.Broker, topic string, partitions int) bool {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, b)
	if err != nil || len(resp.Topics) != 1 {
		return false
	}
	td := resp.Topics[0]
	if td.ErrorCode != 0 || len(td.Partitions) != partitions {
		return false
	}
	for _, p := range td.Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return false
		}
	}
	return true
}

func topicRecords(ctx context.Context, t *target, topic string) (int64, error) {
	offs, err := t.admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	var ferr error
	offs.Each(func(lo kadm.ListedOffset) {
		if lo.Err != nil {
			ferr = lo.Err
		}
		n += lo.Offset
	})
	return n, ferr
}

func summarize(t *target, cfg config, client string, runs []runResult, sent int) summary {
	s := summary{Target: t.name, config: cfg, Client: client}
	var ok []runResult
	for _, r := range runs {
		if r.Err != "" {
			s.Failed++
			s.Errors = append(s.Errors, fmt.Sprintf("run %d: %s", r.Run, r.Err))
			continue
		}
		ok = append(ok, r)
	}
	s.Runs = len(ok)
	if len(ok) == 0 {
		return s
	}
	med := func(f func(runResult) float64) float64 {
		v := make([]float64, len(ok))
		for i, r := range ok {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	s.RecPerSec = med(func(r runResult) float64 { return r.RecPerSec })
	s.MiBPerSec = med(func(r runResult) float64 { return r.MiBPerSec })
	s.P50Ms = med(func(r runResult) float64 { return r.P50Ms })
	s.P99Ms = med(func(r runResult) float64 { return r.P99Ms })
	s.MaxMs = med(func(r runResult) float64 { return r.MaxMs })
	s.CPUPerMRec = med(func(r runResult) float64 { return r.CPUPerMRec })
	s.SysPerMRec = med(func(r runResult) float64 { return r.SysPerMRec })
	s.MaxRSSMiB = med(func(r runResult) float64 { return r.MaxRSSMiB })
	s.BrokerCPUPerMRec = med(func(r runResult) float64 { return r.BrokerCPUPerMRec })
	s.StealPct = med(func(r runResult) float64 { return r.StealPct })
	s.StealMaxPct = -1
	for _, r := range ok {
		s.StealMaxPct = max(s.StealMaxPct, r.StealPct)
	}
	last := ok[len(ok)-1]
	s.Idempotent, s.Notes, s.Version = last.Idempotent, last.Notes, last.Version
	for _, r := range ok {
		if r.OnBroker > int64(sent) {
			s.ExtraRecord = max(s.ExtraRecord, r.OnBroker-int64(sent))
		}
	}
	if cfg.Rate > 0 {
		s.KeptUp = yes(s.RecPerSec >= 0.95*cfg.Rate)
	}
	return s
}

func applyRatios(sums []summary) {
	var base *summary
	for i := range sums {
		if sums[i].Client == baseline && sums[i].Runs > 0 {
			base = &sums[i]
		}
	}
	if base == nil {
		return
	}
	var harness *summary
	for i := range sums {
		if sums[i].Client == "harness" && sums[i].Runs > 0 {
			harness = &sums[i]
		}
	}
	for i := range sums {
		s := &sums[i]
		if s.Runs == 0 {
			continue
		}
		s.RateRatio = s.RecPerSec / base.RecPerSec
		if base.CPUPerMRec > 0 {
			s.CPURatio = s.CPUPerMRec / base.CPUPerMRec
		}
		// The harness's work is the Go worker's, not the JVM's.
		if harness != nil && s.Client != "harness" && s.Client != "java" {
			if own, baseOwn := s.CPUPerMRec-harness.CPUPerMRec, base.CPUPerMRec-harness.CPUPerMRec; own > 0 && baseOwn > 0 {
				s.OwnCPURatio = own / baseOwn
			}
		}
	}
}

// rateToHalve is the median unthrottled rate of the named client or, with
// no name, of the slowest client, so that every client can keep up with
// half of it and the throttled pass compares latency below saturation.
func rateToHalve(sums []summary, client string) float64 {
	rate := 0.0
	for _, s := range sums {
		if s.Runs == 0 {
			continue
		}
		if client != "" {
			if s.Client == client {
				return s.RecPerSec
			}
			continue
		}
		if rate == 0 || s.RecPerSec < rate {
			rate = s.RecPerSec
		}
	}
	return rate
}

func rateText(r float64) string {
	if r <= 0 {
		return "unthrottled"
	}
	return fmt.Sprintf("throttled to %.0f records/s", r)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}
