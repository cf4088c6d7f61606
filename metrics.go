package kprod

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/recbatch"
)

// Metrics is a snapshot of the producer's metrics, with the Java
// producer's names and meanings (its producer-metrics and
// producer-topic-metrics groups). Rates, averages and maxima are over
// samples of 30 s, as Java's (3.8 on) with its defaults
// (metrics.sample.window.ms 30 s, metrics.num.samples 2): events go into
// the current sample, a sample counts until 60 s after its last event,
// and three are kept, so a stat covers the last 60 to 90 s while events
// keep coming. A rate divides by the time since the oldest sample still
// counted began, and by 30 s at least (Java's Rate). Averages and
// maxima are 0 when nothing happened in that time (Java: NaN). Metrics
// only reads: how often it is called changes nothing. Times are in
// milliseconds (metadata-age in seconds), as in Java. Map gives them by
// their Java names.
type Metrics struct {
	RecordSendRate       float64 // record-send-rate: records sent (drained into requests) per second
	RecordSendTotal      int64   // record-send-total
	ByteRate             float64 // byte-rate: bytes of record batches sent per second, as sent (after compression); kprod's sum of the topics' (Java has it per topic only)
	ByteTotal            int64   // byte-total
	RecordSizeAvg        float64 // record-size-avg: encoded record size (without the batch header)
	RecordSizeMax        float64 // record-size-max
	BatchSizeAvg         float64 // batch-size-avg: bytes per batch on the wire (after compression)
	BatchSizeMax         float64 // batch-size-max
	CompressionRateAvg   float64 // compression-rate-avg: the records' compressed / uncompressed size (batch header left out, as Java)
	RecordsPerRequestAvg float64 // records-per-request-avg
	RequestRate          float64 // request-rate: produce requests per second (Java's counts every request; kprod's only Produce)
	RequestTotal         int64   // request-total
	RequestLatencyAvg    float64 // request-latency-avg (ms): produce request to response
	RequestLatencyMax    float64 // request-latency-max (ms)
	RecordQueueTimeAvg   float64 // record-queue-time-avg (ms): batch creation to drain
	RecordQueueTimeMax   float64 // record-queue-time-max (ms)
	RecordRetryRate      float64 // record-retry-rate: records retried per second
	RecordRetryTotal     int64   // record-retry-total
	RecordErrorRate      float64 // record-error-rate: records failed per second (not those a transaction abort, a fatal error or a forced Close aborted, nor Sends refused by a closed producer or outside a transaction, as in Java)
	RecordErrorTotal     int64   // record-error-total
	BatchSplitRate       float64 // batch-split-rate: batches split after MESSAGE_TOO_LARGE, per second
	BatchSplitTotal      int64   // batch-split-total
	RequestsInFlight     int64   // requests-in-flight: produce requests awaiting a response
	BufferAvailableBytes int64   // buffer-available-bytes
	BufferTotalBytes     int64   // buffer-total-bytes (buffer.memory)
	BufferPoolWaitTimeNs int64   // bufferpool-wait-time-ns-total: time Sends spent blocked on memory
	BufferPoolWaitRatio  float64 // bufferpool-wait-ratio: the fraction of time Sends spent blocked on memory (over 1 when several wait at once, as in Java)
	WaitingThreads       int64   // waiting-threads: Sends blocked on memory now
	BufferExhaustedRate  float64 // buffer-exhausted-rate: Sends failed for want of memory (ErrBufferFull) per second
	BufferExhaustedTotal int64   // buffer-exhausted-total
	MetadataAge          float64 // metadata-age (s): age of the metadata in use (0 before the first)
	ProduceThrottleAvg   float64 // produce-throttle-time-avg (ms)
	ProduceThrottleMax   float64 // produce-throttle-time-max (ms)

	// Time spent in calls, in nanoseconds, as Java's KafkaProducerMetrics:
	// Flush always; the transaction calls only when they succeed; the
	// metadata wait when a Send or PartitionsFor had to wait for a
	// topic's metadata and got it.
	FlushTimeNsTotal          int64 // flush-time-ns-total
	TxnInitTimeNsTotal        int64 // txn-init-time-ns-total
	TxnBeginTimeNsTotal       int64 // txn-begin-time-ns-total
	TxnSendOffsetsTimeNsTotal int64 // txn-send-offsets-time-ns-total
	TxnCommitTimeNsTotal      int64 // txn-commit-time-ns-total
	TxnAbortTimeNsTotal       int64 // txn-abort-time-ns-total
	MetadataWaitTimeNsTotal   int64 // metadata-wait-time-ns-total

	// Topics holds the per-topic metrics (producer-topic-metrics) of the
	// topics a batch was sent to, as Java registers them at the first
	// produce request.
	Topics map[string]TopicMetrics

	// Closed: Close has returned, so the metrics no longer change (the
	// rates still fall as their samples age, and metadata-age grows).
	// Java removes a producer's metrics when it closes; an exporter
	// should stop exporting them (kprom's collector does). Not in Map.
	Closed bool
}

// TopicMetrics are the per-topic metrics (producer-topic-metrics).
type TopicMetrics struct {
	RecordSendRate     float64 // record-send-rate
	RecordSendTotal    int64   // record-send-total
	ByteRate           float64 // byte-rate
	ByteTotal          int64   // byte-total
	CompressionRateAvg float64 // compression-rate
	RecordRetryRate    float64 // record-retry-rate
	RecordRetryTotal   int64   // record-retry-total
	RecordErrorRate    float64 // record-error-rate
	RecordErrorTotal   int64   // record-error-total
}

// Map returns every metric by its Java name; per-topic metrics are named
// "<name>{topic=<topic>}".
func (m Metrics) Map() map[string]float64 {
	out := map[string]float64{
		"record-send-rate": m.RecordSendRate, "record-send-total": float64(m.RecordSendTotal),
		"byte-rate": m.ByteRate, "byte-total": float64(m.ByteTotal),
		"record-size-avg": m.RecordSizeAvg, "record-size-max": m.RecordSizeMax,
		"batch-size-avg": m.BatchSizeAvg, "batch-size-max": m.BatchSizeMax,
		"compression-rate-avg":    m.CompressionRateAvg,
		"records-per-request-avg": m.RecordsPerRequestAvg,
		"request-rate":            m.RequestRate, "request-total": float64(m.RequestTotal),
		"request-latency-avg": m.RequestLatencyAvg, "request-latency-max": m.RequestLatencyMax,
		"record-queue-time-avg": m.RecordQueueTimeAvg, "record-queue-time-max": m.RecordQueueTimeMax,
		"record-retry-rate": m.RecordRetryRate, "record-retry-total": float64(m.RecordRetryTotal),
		"record-error-rate": m.RecordErrorRate, "record-error-total": float64(m.RecordErrorTotal),
		"batch-split-rate": m.BatchSplitRate, "batch-split-total": float64(m.BatchSplitTotal),
		"requests-in-flight":             float64(m.RequestsInFlight),
		"buffer-available-bytes":         float64(m.BufferAvailableBytes),
		"buffer-total-bytes":             float64(m.BufferTotalBytes),
		"bufferpool-wait-time-ns-total":  float64(m.BufferPoolWaitTimeNs),
		"bufferpool-wait-ratio":          m.BufferPoolWaitRatio,
		"flush-time-ns-total":            float64(m.FlushTimeNsTotal),
		"txn-init-time-ns-total":         float64(m.TxnInitTimeNsTotal),
		"txn-begin-time-ns-total":        float64(m.TxnBeginTimeNsTotal),
		"txn-send-offsets-time-ns-total": float64(m.TxnSendOffsetsTimeNsTotal),
		"txn-commit-time-ns-total":       float64(m.TxnCommitTimeNsTotal),
		"txn-abort-time-ns-total":        float64(m.TxnAbortTimeNsTotal),
		"metadata-wait-time-ns-total":    float64(m.MetadataWaitTimeNsTotal),
		"produce-throttle-time-avg":      m.ProduceThrottleAvg, "produce-throttle-time-max": m.ProduceThrottleMax,
		"waiting-threads":       float64(m.WaitingThreads),
		"buffer-exhausted-rate": m.BufferExhaustedRate, "buffer-exhausted-total": float64(m.BufferExhaustedTotal),
		"metadata-age": m.MetadataAge,
	}
	for t, tm := range m.Topics {
		for k, v := range tm.Map() {
			out[k+"{topic="+t+"}"] = v
		}
	}
	return out
}

// Map returns the topic's metrics by their Java names.
func (tm TopicMetrics) Map() map[string]float64 {
	return map[string]float64{
		"record-send-rate": tm.RecordSendRate, "record-send-total": float64(tm.RecordSendTotal),
		"byte-rate": tm.ByteRate, "byte-total": float64(tm.ByteTotal),
		"compression-rate":  tm.CompressionRateAvg,
		"record-retry-rate": tm.RecordRetryRate, "record-retry-total": float64(tm.RecordRetryTotal),
		"record-error-rate": tm.RecordErrorRate, "record-error-total": float64(tm.RecordErrorTotal),
	}
}

// MetricNames returns the keys of Map in a stable order, for printing.
func (m Metrics) MetricNames() []string {
	mm := m.Map()
	names := make([]string, 0, len(mm))
	for k := range mm {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Metrics returns a snapshot of the producer's metrics. It is cheap
// enough to call every second.
func (p *Producer) Metrics() Metrics {
	now := time.Now()
	mt := &p.metrics
	m := Metrics{
		RecordSendTotal:      mt.records.total.Load(),
		ByteTotal:            mt.bytes.total.Load(),
		RequestTotal:         mt.requests.total.Load(),
		RecordRetryTotal:     mt.retries.total.Load(),
		RecordErrorTotal:     mt.errors.total.Load(),
		BatchSplitTotal:      mt.batchSplits.total.Load(),
		RequestsInFlight:     mt.inFlight.Load(),
		BufferAvailableBytes: p.pool.availableBytes(),
		BufferTotalBytes:     p.cfg.BufferMemory,
		BufferPoolWaitTimeNs: p.pool.waitNs.total.Load(),
		BufferPoolWaitRatio:  p.pool.waitNs.win.rate(now) / float64(time.Second),
		WaitingThreads:       p.pool.waiting(),
		BufferExhaustedTotal: p.pool.exhausted.total.Load(),
		BufferExhaustedRate:  p.pool.exhausted.win.rate(now),
		Topics:               map[string]TopicMetrics{},
		Closed:               isClosed(p.closeDone),

		FlushTimeNsTotal:          mt.flushNs.Load(),
		TxnInitTimeNsTotal:        mt.txnInitNs.Load(),
		TxnBeginTimeNsTotal:       mt.txnBeginNs.Load(),
		TxnSendOffsetsTimeNsTotal: mt.txnSendOffsetsNs.Load(),
		TxnCommitTimeNsTotal:      mt.txnCommitNs.Load(),
		TxnAbortTimeNsTotal:       mt.txnAbortNs.Load(),
		MetadataWaitTimeNsTotal:   mt.metadataWaitNs.Load(),
	}
	m.RecordSizeAvg, m.RecordSizeMax = mt.recSize.read(now)
	m.BatchSizeAvg, m.BatchSizeMax = mt.batchSize.read(now)
	m.CompressionRateAvg, _ = mt.compression.read(now)
	m.RecordsPerRequestAvg, _ = mt.recsPerReq.read(now)
	m.RequestLatencyAvg, m.RequestLatencyMax = mt.latency.read(now)
	m.RecordQueueTimeAvg, m.RecordQueueTimeMax = mt.queueTime.read(now)
	m.ProduceThrottleAvg, m.ProduceThrottleMax = mt.throttle.read(now)
	m.RecordSendRate = mt.records.win.rate(now)
	m.ByteRate = mt.bytes.win.rate(now)
	m.RequestRate = mt.requests.win.rate(now)
	m.RecordRetryRate = mt.retries.win.rate(now)
	m.RecordErrorRate = mt.errors.win.rate(now)
	m.BatchSplitRate = mt.batchSplits.win.rate(now)
	if s := p.cl.Snapshot(); s != nil && !s.At.IsZero() {
		m.MetadataAge = now.Sub(s.At).Seconds()
	}
	for name, t := range *p.acc.topics.Load() {
		if !t.metrics.registered.Load() {
			continue
		}
		tm := TopicMetrics{
			RecordSendTotal:  t.metrics.records.total.Load(),
			ByteTotal:        t.metrics.bytes.total.Load(),
			RecordRetryTotal: t.metrics.retries.total.Load(),
			RecordErrorTotal: t.metrics.errors.total.Load(),
			RecordSendRate:   t.metrics.records.win.rate(now),
			ByteRate:         t.metrics.bytes.win.rate(now),
			RecordRetryRate:  t.metrics.retries.win.rate(now),
			RecordErrorRate:  t.metrics.errors.win.rate(now),
		}
		tm.CompressionRateAvg, _ = t.metrics.compression.read(now)
		m.Topics[name] = tm
	}
	return m
}

// producerMetrics is written by the sender goroutine (and, for errors,
// by Sends that fail) and read by Metrics from any goroutine. Nothing in
// it is written per record: per batch, per request, per failed Send.
type producerMetrics struct {
	records, bytes, requests, retries, errors, batchSplits counter
	inFlight                                               atomic.Int64

	recSize, batchSize, compression, recsPerReq, latency, queueTime, throttle stat

	// Nanoseconds spent in calls (KafkaProducerMetrics); see Metrics.
	flushNs, txnInitNs, txnBeginNs, txnSendOffsetsNs, txnCommitNs, txnAbortNs, metadataWaitNs atomic.Int64
}

// timeSince adds the time since start to the call-time total c.
func timeSince(c *atomic.Int64, start time.Time) { c.Add(int64(time.Since(start))) }

// timeCall, deferred, adds a transaction call's time to c if it
// succeeded (*err nil): Java records it after the call's result came.
func timeCall(c *atomic.Int64, start time.Time, err *error) {
	if *err == nil {
		timeSince(c, start)
	}
}

// counter is a Java total and its rate: the total counts for good, the
// rate (stat.rate) is over the samples still in the window (see stat).
type counter struct {
	total atomic.Int64
	win   stat
}

func (c *counter) add(now time.Time, n int64) {
	c.total.Add(n)
	c.win.recordN(now, float64(n), 1, 0)
}

type topicMetrics struct {
	// registered: a batch of the topic was sent. As Java registers its
	// topic sensors at the first produce request, a topic appears in
	// Metrics from then on, not for every name ever given to Send
	// (a typo, a topic that does not exist).
	registered                      atomic.Bool
	records, bytes, retries, errors counter
	compression                     stat
}

// stat is an average, a maximum and a rate over samples of 30 s, as
// Java's SampledStat with its defaults (metrics.sample.window.ms 30 s,
// metrics.num.samples 2) since Kafka 3.8 (apache/kafka#15889, a fix of rate
// spikes): a ring of three samples (two, and one for the sample that
// overlaps the start of the window); values go into the current sample,
// or into the next once the current is 30 s old; a sample counts until
// 60 s after its last value. So while values keep coming, a stat covers
// the last 60 to 90 s, and a value leaves it at most 60 s after its
// sample's last one (one slow request leaves request-latency-max within
// 90 s). Java empties a sample found out of date when it is read; stat
// only skips it, so that reading changes nothing. Written by the sender
// goroutine, read by Metrics; neither is per record.
type stat struct {
	mu  sync.Mutex
	s   [statRing]statSample // s[cur] takes new values; one with n == 0 is unused; guarded by mu
	cur int                  // guarded by mu
}

type statSample struct {
	start, last time.Time // the sample's start, and its last value's time
	sum, max    float64
	n           int64
}

const (
	statSampleSpan = 30 * time.Second
	statSamples    = 2
	statRing       = statSamples + 1
	statExpiry     = statSamples * statSampleSpan
)

func (s *stat) record(now time.Time, v float64) { s.recordN(now, v, 1, v) }

// liveLocked reports whether sample c still counts at now.
func liveLocked(c *statSample, now time.Time) bool {
	return c.n > 0 && now.Sub(c.last) < statExpiry
}

// read returns the average and the maximum of the values recorded in the
// samples still in the window, or zeros if there are none.
func (s *stat) read(now time.Time) (avg, maxV float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum float64
	var n int64
	for i := range s.s {
		c := &s.s[i]
		if !liveLocked(c, now) {
			continue
		}
		if n == 0 || c.max > maxV {
			maxV = c.max
		}
		sum += c.sum
		n += c.n
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), maxV
}

// rate is the sum of the values recorded in the samples still in the
// window, per second of the time since the oldest of them began, and of
// 30 s at least: Java's Rate (Rate.windowSize adds whole sample spans
// until the window covers all samples but the current one).
func (s *stat) rate(now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum float64
	oldest := now
	for i := range s.s {
		c := &s.s[i]
		if !liveLocked(c, now) {
			continue
		}
		sum += c.sum
		if c.start.Before(oldest) {
			oldest = c.start
		}
	}
	elapsed := now.Sub(oldest)
	if full := int(elapsed / statSampleSpan); full < statSamples-1 {
		elapsed += time.Duration(statSamples-1-full) * statSampleSpan
	}
	return sum / max(elapsed, time.Millisecond).Seconds()
}

// onSent records a batch handed to a connection in a produce request
// (again for each retry, as in Java).
func (m *producerMetrics) onSent(b *batch, now time.Time) {
	n := int64(len(b.recs))
	wire := int64(len(b.wire))
	m.records.add(now, n)
	m.bytes.add(now, wire)
	m.batchSize.record(now, float64(wire))
	// Java's compression ratio: the records' bytes as sent over their
	// bytes uncompressed, both without the batch header (so 1 when the
	// batch is not compressed).
	ratio := 1.0
	if raw := b.bld.UncompressedSize() - recbatch.HeaderSize; raw > 0 {
		ratio = float64(wire-recbatch.HeaderSize) / float64(raw)
	}
	m.compression.record(now, ratio)
	m.queueTime.record(now, float64(now.Sub(b.created))/float64(time.Millisecond))
	// The average and the largest of the records' encoded sizes, as the
	// names say. (Java records, once per batch, an upper bound of the
	// batch's largest record with the batch header, so its average is
	// of per-batch maxima and about 61 bytes higher; kprod reports what
	// the records are.)
	m.recSize.recordN(now, float64(b.sumRecSize), n, float64(b.maxRecSize))
	tm := &b.q.topic.metrics
	if !tm.registered.Load() {
		tm.registered.Store(true)
	}
	tm.records.add(now, n)
	tm.bytes.add(now, wire)
	tm.compression.record(now, ratio)
}

// recordN records n values that sum to sum, the largest of them maxV.
func (s *stat) recordN(now time.Time, sum float64, n int64, maxV float64) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	c := &s.s[s.cur]
	if c.n == 0 || now.Sub(c.start) >= statSampleSpan {
		if c.n > 0 {
			s.cur = (s.cur + 1) % statRing
			c = &s.s[s.cur]
		}
		*c = statSample{start: now}
	}
	if c.n == 0 || maxV > c.max {
		c.max = maxV
	}
	c.sum += sum
	c.n += n
	c.last = now
	s.mu.Unlock()
}
