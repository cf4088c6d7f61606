package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// producer is what a worker needs from a client: an asynchronous send of
// one record whose acknowledgement (or failure) the client reports with
// acker.ack, passing back the send time the record carried through it.
type producer interface {
	// produce buffers one record; it may block on the client's own
	// back-pressure (buffer memory), never on the acknowledgement.
	// key is nil unless the workload is keyed (-keys); it and value are
	// read-only and the client may keep them.
	produce(ctx context.Context, key, value []byte, sent time.Time) error
	// flush asks the client to send what it buffers now, if it can; the
	// harness then waits for every acknowledgement itself.
	flush(ctx context.Context) error
	close() error
}

// clientInfo describes how a client is configured, for the table notes.
type clientInfo struct {
	// Idempotent is nil when the worker cannot tell.
	Idempotent *bool  `json:"idempotent,omitempty"`
	Notes      string `json:"notes,omitempty"`
	Version    string `json:"version,omitempty"`
}

type newProducerFunc func(w *workload, a *acker) (producer, clientInfo, error)

// workload is what every client is asked to do; the same for all of them.
type workload struct {
	brokers     []string
	topic       string
	size        int
	batch       int
	compression string // none or lz4
	clientID    string
	// keys > 0: records carry keys (keySet), which every client is set
	// to partition by murmur2, Java's hash; 0: no keys.
	keys int
}

// bufferMemory is Java's buffer.memory default, used as the buffering
// bound of every client that has one in bytes.
const bufferMemory = 32 << 20

// acker collects acknowledgements: latency from the record's send to its
// acknowledgement into an HDR histogram (microseconds), and counts.
//
// The sending loop counts what it sent in a field of its own (sent) and
// only wait, on the same goroutine, hands that count over: no cache line
// is written per record by both the sending goroutine and the client's
// acknowledging one, which would charge every client for the harness's
// bookkeeping (the harness row, which acknowledges on the sending
// goroutine, could not show that cost).
type acker struct {
	sent int64 // records handed to the client; the sending goroutine's only

	mu       sync.Mutex
	hist     *hdrhistogram.Histogram
	firstErr error
	failed   int64
	acked    int64 // acknowledged or failed
	target   int64 // wait's sent count while it waits, else noTarget
	idle     chan struct{}
}

const noTarget = math.MaxInt64

func newAcker() *acker {
	return &acker{
		hist:   hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3),
		target: noTarget,
		idle:   make(chan struct{}, 1),
	}
}

func (a *acker) ack(sent time.Time, err error) {
	lat := time.Since(sent).Microseconds()
	a.mu.Lock()
	if err != nil {
		a.failed++
		if a.firstErr == nil {
			a.firstErr = err
		}
	} else {
		_ = a.hist.RecordValue(max(lat, 1))
	}
	a.acked++
	done := a.acked == a.target
	a.mu.Unlock()
	if done {
		select {
		case a.idle <- struct{}{}:
		default:
		}
	}
}

// wait returns once every record sent so far is acknowledged. Only the
// sending goroutine calls it. No wake-up is lost: the acknowledgement that
// reaches the target either comes before a check of left, which then
// sees it, or signals idle after; a signal left over from an earlier wait
// only costs one more check.
func (a *acker) wait(ctx context.Context) error {
	a.mu.Lock()
	a.target = a.sent
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.target = noTarget
		a.mu.Unlock()
	}()
	for a.left() > 0 {
		select {
		case <-a.idle:
		case <-ctx.Done():
			return fmt.Errorf("%d records still unacknowledged: %w", a.left(), ctx.Err())
		}
	}
	return nil
}

// left is how many of the records sent are not acknowledged yet.
func (a *acker) left() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sent - a.acked
}

func (a *acker) reset() {
	a.mu.Lock()
	a.hist.Reset()
	a.failed = 0
	a.firstErr = nil
	a.mu.Unlock()
}

// workerResult is the one JSON line a worker prints.
type workerResult struct {
	Client     string  `json:"client"`
	Records    int     `json:"records"`
	Failed     int64   `json:"failed"`
	FirstError string  `json:"first_error,omitempty"`
	ElapsedSec float64 `json:"elapsed_s"`
	RecPerSec  float64 `json:"records_per_s"`
	MiBPerSec  float64 `json:"mib_per_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	// LoopCPUSec is the worker's own user+sys CPU over the measured part
	// only; the coordinator adds the whole process's from wait4.
	LoopCPUSec float64 `json:"loop_cpu_s"`
	// PeakRSSKiB is the worker's VmHWM when it is done.
	PeakRSSKiB int64 `json:"peak_rss_kib"`
	clientInfo
}

// payloads gives each record its own value of random upper-case letters,
// as ProducerPerformance makes a fresh one for every record (Java
// serializes it at send, so it can reuse its array; the Go clients keep a
// record's slice until it is in a batch, so values are never rewritten
// here). A value is a window at a random place in payloadPool bytes of
// letters: two records' windows in one 64 KiB lz4 block rarely overlap
// (about 1% of a batch's bytes with 100 B values), so compression sees
// data about as incompressible as Java's, and no client gets a value it
// saw before. One value repeated for every record, as this tool used to
// send, compressed about 80:1 with lz4, which measured the data, not the
// clients.
//
// Shared windows are read-only memory that every core may hold in its
// cache, which is kind to a client that reads a value on another goroutine
// after Send (franz-go, sarama and kafka-go encode at drain); a client that
// copies it at Send (kprod, confluent) reads it from memory or the shared
// cache the same way, on the sending goroutine. With written set
// (-values written) each value is a new slice that the sending goroutine
// fills just before the send, as an application that serializes each
// record makes its value: then a client that copies it at Send reads it
// from its own cache, and one that reads it later on another goroutine
// fetches it from the sending core's cache or from memory.
type payloads struct {
	pool    []byte
	size    int
	r       *rand.Rand
	written bool
}

const (
	payloadPool = 4 << 20

	valuesShared  = "shared"
	valuesWritten = "written"
)

// checkValues refuses a -values that is neither mode, in the coordinator
// and in a worker alike.
func checkValues(mode string) error {
	if mode != valuesShared && mode != valuesWritten {
		return fmt.Errorf("-values: %q is not %s or %s", mode, valuesShared, valuesWritten)
	}
	return nil
}

func newPayloads(size int, written bool) *payloads {
	r := rand.New(rand.NewPCG(1, 2))
	pool := make([]byte, max(payloadPool, 2*size))
	for i := range pool {
		pool[i] = byte('A' + r.IntN(26))
	}
	return &payloads{pool: pool, size: size, r: r, written: written}
}

// next is the value of the next record: a window of the pool (read-only,
// shared with nobody else at the same offset only by chance), or with
// written a copy of one in a slice of its own, never written again.
func (p *payloads) next() []byte {
	off := p.r.IntN(len(p.pool) - p.size + 1)
	w := p.pool[off : off+p.size : off+p.size]
	if !p.written {
		return w
	}
	v := make([]byte, p.size)
	copy(v, w)
	return v
}

// keySet gives each record a key as ProducerPerformance's
// --key-distribution random does: the decimal text of a uniformly random
// integer in [0, n). The n keys are made once, so that choosing one costs
// every client the same and allocates nothing.
type keySet struct {
	keys [][]byte
	r    *rand.Rand
}

func newKeySet(n int) *keySet {
	ks := &keySet{r: rand.New(rand.NewPCG(3, 4))}
	for i := range n {
		ks.keys = append(ks.keys, []byte(strconv.Itoa(i)))
	}
	return ks
}

// next is the next record's key, nil when the set is empty (no -keys).
func (ks *keySet) next() []byte {
	if len(ks.keys) == 0 {
		return nil
	}
	return ks.keys[ks.r.IntN(len(ks.keys))]
}

func runWorker(o *options) error {
	mk, ok := goClients[o.client]
	if !ok {
		return fmt.Errorf("-client %q: no such Go client (have %v)", o.client, goClientNames())
	}
	if mk == nil {
		return fmt.Errorf("-client %q: %s", o.client, unavailable[o.client])
	}
	if o.topic == "" || o.brokers == "" {
		return errors.New("worker mode needs -topic and -brokers")
	}
	if err := checkValues(o.values); err != nil {
		return err
	}
	w := &workload{
		brokers:     splitList(o.brokers),
		topic:       o.topic,
		size:        o.size,
		batch:       o.batch,
		compression: o.compression,
		clientID:    "bench-" + o.client,
		keys:        o.keys,
	}
	a := newAcker()
	p, info, err := mk(w, a)
	if err != nil {
		return fmt.Errorf("%s: %w", o.client, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	vals := newPayloads(o.size, o.values == valuesWritten)
	keys := newKeySet(o.keys)

	send := func(n int, rate float64) error {
		start := time.Now()
		interval := time.Duration(0)
		if rate > 0 {
			interval = time.Duration(float64(time.Second) / rate)
		}
		for i := range n {
			// start plus the time since: one read of the monotonic
			// clock, where time.Now reads the wall clock as well.
			sent := start.Add(time.Since(start))
			if interval > 0 {
				// Pace against the schedule, sleeping only when a whole
				// millisecond ahead: sleeping per record is too coarse.
				if ahead := start.Add(time.Duration(i) * interval).Sub(sent); ahead > time.Millisecond {
					time.Sleep(ahead)
					sent = start.Add(time.Since(start))
				}
			}
			a.sent++
			if err := p.produce(ctx, keys.next(), vals.next(), sent); err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
		}
		if err := p.flush(ctx); err != nil {
			return err
		}
		return a.wait(ctx)
	}

	// Warm-up: connections, metadata, producer id, pooled buffers.
	if o.warmup > 0 {
		if err := send(o.warmup, o.rateN); err != nil {
			return fmt.Errorf("%s warm-up: %w", o.client, err)
		}
		a.mu.Lock()
		werr := a.firstErr
		a.mu.Unlock()
		if werr != nil {
			return fmt.Errorf("%s warm-up: %w", o.client, werr)
		}
	}
	if f, ok := p.(interface{ afterWarmup() }); ok {
		f.afterWarmup()
	}
	a.reset()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpu0 := selfCPU()
	t0 := time.Now()
	if err := send(o.records, o.rateN); err != nil {
		return fmt.Errorf("%s: %w", o.client, err)
	}
	elapsed := time.Since(t0)
	cpu := selfCPU() - cpu0
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if f, ok := p.(interface{ info() clientInfo }); ok {
		info = f.info()
	}
	if err := p.close(); err != nil {
		fmt.Fprintf(os.Stderr, "bench worker %s: close: %v\n", o.client, err)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	res := workerResult{
		Client:     o.client,
		Records:    o.records,
		Failed:     a.failed,
		ElapsedSec: elapsed.Seconds(),
		RecPerSec:  float64(o.records) / elapsed.Seconds(),
		MiBPerSec:  float64(o.records) * float64(o.size) / elapsed.Seconds() / (1 << 20),
		P50Ms:      float64(a.hist.ValueAtQuantile(50)) / 1000,
		P99Ms:      float64(a.hist.ValueAtQuantile(99)) / 1000,
		MaxMs:      float64(a.hist.Max()) / 1000,
		LoopCPUSec: cpu.Seconds(),
		PeakRSSKiB: vmHWM("/proc/self/status"),
		clientInfo: info,
	}
	if a.firstErr != nil {
		res.FirstError = a.firstErr.Error()
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
