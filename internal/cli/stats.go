package cli

import (
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// stats accumulates the outcome of acknowledged records as
// ProducerPerformance's Stats does: totals for the final line and a
// window for the periodic lines. Unlike Java, which samples at most
// 500,000 latencies into an array, every latency goes into an HDR
// histogram (microseconds, 3 significant digits), so percentiles cover
// every record and memory stays fixed.
//
// Callbacks record from the producer's goroutines; the reporter reads.
type stats struct {
	mu    sync.Mutex
	start time.Time
	hist  *hdrhistogram.Histogram

	count   int64
	bytes   int64
	latSum  time.Duration
	latMax  time.Duration
	winFrom time.Time
	winN    int64
	winB    int64
	winSum  time.Duration
	winMax  time.Duration
}

// maxTrackable bounds the histogram: a latency beyond it (the record
// waited over an hour) is recorded as an hour.
const maxTrackable = time.Hour

func newStats(start time.Time) *stats {
	return &stats{
		start:   start,
		winFrom: start,
		hist:    hdrhistogram.New(1, int64(maxTrackable/time.Microsecond), 3),
	}
}

func (s *stats) record(lat time.Duration, size int) {
	us := max(int64(lat/time.Microsecond), 1)
	us = min(us, int64(maxTrackable/time.Microsecond))
	s.mu.Lock()
	_ = s.hist.RecordValue(us) // in range by construction
	s.count++
	s.bytes += int64(size)
	s.latSum += lat
	s.latMax = max(s.latMax, lat)
	s.winN++
	s.winB += int64(size)
	s.winSum += lat
	s.winMax = max(s.winMax, lat)
	s.mu.Unlock()
}

func (s *stats) acked() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// windowLine returns ProducerPerformance's periodic line for the records
// acknowledged since the last call, and starts a new window; "" when none
// were.
func (s *stats) windowLine(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, b, sum, mx, from := s.winN, s.winB, s.winSum, s.winMax, s.winFrom
	s.winN, s.winB, s.winSum, s.winMax, s.winFrom = 0, 0, 0, 0, now
	if n == 0 {
		return ""
	}
	el := now.Sub(from).Seconds()
	return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.",
		n, float64(n)/el, float64(b)/el/(1024*1024), ms(sum)/float64(n), ms(mx))
}

// result is the final summary of one stats; its JSON names are stable.
type result struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	AvgLatencyMs  float64 `json:"avg_latency_ms"`
	MaxLatencyMs  float64 `json:"max_latency_ms"`
	P50Ms         float64 `json:"p50_ms"`
	P95Ms         float64 `json:"p95_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
	ElapsedSec    float64 `json:"elapsed_sec"`
	rate          float64 // RecordsPerSec unrounded, for the text line's %f
}

func (s *stats) result(end time.Time) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := end.Sub(s.start).Seconds()
	r := result{Records: s.count, Bytes: s.bytes, ElapsedSec: round3(el)}
	if s.count == 0 || el <= 0 {
		return r // no NaN: JSON cannot carry it
	}
	r.rate = float64(s.count) / el
	r.RecordsPerSec = round3(r.rate)
	r.MBPerSec = round3(float64(s.bytes) / el / (1024 * 1024))
	r.AvgLatencyMs = round3(ms(s.latSum) / float64(s.count))
	r.MaxLatencyMs = round3(ms(s.latMax))
	// ValueAtQuantile returns the top of the value's bucket (up to 0.1%
	// above it at 3 significant digits): without the cap, the percentiles
	// of a single record of 1234.567 ms read 1234.943 ms, above the max.
	pct := func(p float64) float64 {
		return min(round3(float64(s.hist.ValueAtQuantile(p))/1000), r.MaxLatencyMs)
	}
	r.P50Ms, r.P95Ms, r.P99Ms, r.P999Ms = pct(50), pct(95), pct(99), pct(99.9)
	return r
}

// printTotal writes ProducerPerformance's final line (Kafka 4.4: records/sec
// with Java's %f, six decimals; its window lines have one). Java measures in
// whole milliseconds and prints the percentiles as integers; so does this
// line, so that scripts parsing Java's output parse it too (the JSON
// output keeps microsecond precision).
func (r result) printTotal(w io.Writer, label string) {
	fmt.Fprintf(w, "%d%s records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.\n",
		r.Records, label, r.rate, r.MBPerSec, r.AvgLatencyMs, r.MaxLatencyMs,
		int64(r.P50Ms), int64(r.P95Ms), int64(r.P99Ms), int64(r.P999Ms))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
