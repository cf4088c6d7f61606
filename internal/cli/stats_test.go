package cli

import (
	"testing"
	"time"
)

// TestPercentileAboveMax: HDR's ValueAtQuantile returns the top of a
// value's bucket, so a single 1234.567 ms record reported p50..p99.9 of
// 1235 ms, above its 1234.567 ms max.
func TestPercentileAboveMax(t *testing.T) {
	start := time.Now()
	s := newStats(start)
	s.record(1234567*time.Microsecond, 10)
	r := s.result(start.Add(2 * time.Second))
	if r.MaxLatencyMs != 1234.567 {
		t.Fatalf("max %v ms, want 1234.567", r.MaxLatencyMs)
	}
	for name, p := range map[string]float64{"p50": r.P50Ms, "p95": r.P95Ms, "p99": r.P99Ms, "p99.9": r.P999Ms} {
		if p > r.MaxLatencyMs {
			t.Errorf("%s %v ms is above the max %v ms", name, p, r.MaxLatencyMs)
		}
		if p < r.MaxLatencyMs*0.999 {
			t.Errorf("%s %v ms, want within 0.1%% of %v ms", name, p, r.MaxLatencyMs)
		}
	}
}
