package kprom

import (
	"errors"
	"strings"
	"testing"

	"github.com/kprod/kprod"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

type fake struct{ m kprod.Metrics }

func (f fake) Metrics() kprod.Metrics { return f.m }

func gather(t *testing.T, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}

func TestCollector(t *testing.T) {
	src := fake{kprod.Metrics{RecordSendTotal: 42, RequestLatencyAvg: 1.5,
		Topics: map[string]kprod.TopicMetrics{"orders": {RecordSendTotal: 40, ByteRate: 7.5}}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src, "p1"))
	want := `
# HELP kprod_producer_record_send_total kprod producer metric record-send-total (the Java producer's name, in producer-metrics)
# TYPE kprod_producer_record_send_total counter
kprod_producer_record_send_total{producer="p1"} 42
# HELP kprod_producer_request_latency_avg kprod producer metric request-latency-avg (the Java producer's name, in producer-metrics), in milliseconds
# TYPE kprod_producer_request_latency_avg gauge
kprod_producer_request_latency_avg{producer="p1"} 1.5
# HELP kprod_producer_topic_record_send_total kprod per-topic producer metric record-send-total (the Java producer's name, in producer-topic-metrics)
# TYPE kprod_producer_topic_record_send_total counter
kprod_producer_topic_record_send_total{producer="p1",topic="orders"} 40
# HELP kprod_producer_topic_byte_rate kprod per-topic producer metric byte-rate (the Java producer's name, in producer-topic-metrics), in bytes per second
# TYPE kprod_producer_topic_byte_rate gauge
kprod_producer_topic_byte_rate{producer="p1",topic="orders"} 7.5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kprod_producer_record_send_total", "kprod_producer_request_latency_avg",
		"kprod_producer_topic_record_send_total", "kprod_producer_topic_byte_rate"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(kprod.Metrics{}.Map()) + 9; n != want {
		t.Fatalf("%d series, want %d (every metric of kprod.Metrics, and 9 for the topic)", n, want)
	}
}

// TestFamilies checks that the exported families follow metrics.go: one
// producer-level family per key of a zero Metrics' Map, one per-topic
// family per per-topic key, counters exactly for the "-total" names, and
// the labels of each.
func TestFamilies(t *testing.T) {
	const topic = "orders"
	m := kprod.Metrics{Topics: map[string]kprod.TopicMetrics{topic: {}}}
	want := map[string]dto.MetricType{} // family -> type
	for k := range m.Map() {
		java, perTopic := strings.CutSuffix(k, "{topic="+topic+"}")
		name := MetricName(java)
		if perTopic {
			name = TopicMetricName(java)
		}
		typ := dto.MetricType_GAUGE
		if strings.HasSuffix(java, "-total") {
			typ = dto.MetricType_COUNTER
		}
		want[name] = typ
	}
	if len(want) != len(m.Map()) {
		t.Fatalf("%d family names for %d metrics: names collide", len(want), len(m.Map()))
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(fake{m}, "p1"))
	got := gather(t, reg)
	if len(got) != len(want) {
		t.Errorf("%d families, want %d", len(got), len(want))
	}
	counters := 0
	for name, typ := range want {
		mf := got[name]
		if mf == nil {
			t.Errorf("no family %s", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s is %v, want %v", name, mf.GetType(), typ)
		}
		if typ == dto.MetricType_COUNTER {
			counters++
		}
		if len(mf.GetMetric()) != 1 {
			t.Errorf("%s has %d series, want 1", name, len(mf.GetMetric()))
			continue
		}
		l := labels(mf.GetMetric()[0])
		wantLabels := map[string]string{"producer": "p1"}
		if strings.HasPrefix(name, "kprod_producer_topic_") {
			wantLabels["topic"] = topic
		}
		if len(l) != len(wantLabels) || l["producer"] != "p1" || l["topic"] != wantLabels["topic"] {
			t.Errorf("%s has labels %v, want %v", name, l, wantLabels)
		}
	}
	// 15 producer-level totals (bufferpool-wait-time-ns-total,
	// buffer-exhausted-total and the call times such as
	// flush-time-ns-total among them) and 4 per-topic ones.
	if counters != 19 {
		t.Errorf("%d counters, want 19", counters)
	}
	if got["kprod_producer_bufferpool_wait_time_ns_total"].GetType() != dto.MetricType_COUNTER {
		t.Error("bufferpool-wait-time-ns-total is not a counter")
	}
}

func TestNonUTF8Labels(t *testing.T) {
	src := fake{kprod.Metrics{Topics: map[string]kprod.TopicMetrics{
		"\xff":       {RecordSendTotal: 1},
		"ok\xfe\xfd": {RecordSendTotal: 2},
	}}}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(src, "p\xff")); err != nil {
		t.Fatalf("Register: %v", err)
	}
	got := gather(t, reg)
	mf := got["kprod_producer_topic_record_send_total"]
	if mf == nil {
		t.Fatal("no kprod_producer_topic_record_send_total")
	}
	values := map[string]float64{}
	for _, m := range mf.GetMetric() {
		l := labels(m)
		if l["producer"] != "p\uFFFD" {
			t.Errorf("producer=%q, want %q", l["producer"], "p\uFFFD")
		}
		values[l["topic"]] = m.GetCounter().GetValue()
	}
	if values["\uFFFD"] != 1 || values["ok\uFFFD"] != 2 || len(values) != 2 {
		t.Errorf("topics %v, want \\uFFFD=1 and ok\\uFFFD=2", values)
	}
}

// Two topics whose names become the same label value are exported once,
// rather than failing the scrape.
func TestNonUTF8TopicsCollide(t *testing.T) {
	src := fake{kprod.Metrics{Topics: map[string]kprod.TopicMetrics{
		"\xfe": {RecordSendTotal: 1},
		"\xff": {RecordSendTotal: 2},
	}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src, "p1"))
	mf := gather(t, reg)["kprod_producer_topic_record_send_total"]
	if n := len(mf.GetMetric()); n != 1 {
		t.Fatalf("%d series, want 1", n)
	}
	if v := mf.GetMetric()[0].GetCounter().GetValue(); v != 1 {
		t.Errorf("value %v, want 1 (the first topic in sorted order)", v)
	}
}

func TestTopicWithBraces(t *testing.T) {
	const topic = "x{topic=y"
	src := fake{kprod.Metrics{RecordSendTotal: 5,
		Topics: map[string]kprod.TopicMetrics{topic: {RecordSendTotal: 3}}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src, "p1"))
	want := `
# HELP kprod_producer_record_send_total kprod producer metric record-send-total (the Java producer's name, in producer-metrics)
# TYPE kprod_producer_record_send_total counter
kprod_producer_record_send_total{producer="p1"} 5
# HELP kprod_producer_topic_record_send_total kprod per-topic producer metric record-send-total (the Java producer's name, in producer-topic-metrics)
# TYPE kprod_producer_topic_record_send_total counter
kprod_producer_topic_record_send_total{producer="p1",topic="x{topic=y"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"kprod_producer_record_send_total", "kprod_producer_topic_record_send_total"); err != nil {
		t.Fatal(err)
	}
	for name := range gather(t, reg) {
		if !strings.HasPrefix(name, "kprod_producer_") || strings.Contains(name, "topic_y") || strings.Contains(name, "x_") {
			t.Errorf("unexpected family %s", name)
		}
	}
}

func TestDuplicateRegistration(t *testing.T) {
	src := fake{kprod.Metrics{Topics: map[string]kprod.TopicMetrics{"orders": {}}}}
	reg := prometheus.NewPedanticRegistry()
	c := NewCollector(src, "p1")
	reg.MustRegister(c)

	var are prometheus.AlreadyRegisteredError
	if err := reg.Register(c); !errors.As(err, &are) {
		t.Errorf("registering the same collector again: %v, want AlreadyRegisteredError", err)
	}
	if err := reg.Register(NewCollector(src, "p1")); err == nil {
		t.Error("registering a second collector with producer=p1 succeeded")
	}
	if err := reg.Register(NewCollector(src, "p2")); err != nil {
		t.Errorf("registering a collector with producer=p2: %v", err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	if want := 2 * (len(kprod.Metrics{}.Map()) + 9); n != want {
		t.Errorf("%d series, want %d", n, want)
	}
}

func TestPedanticSeveralTopics(t *testing.T) {
	topics := map[string]kprod.TopicMetrics{}
	for i, name := range []string{"orders", "payments", "a.b-c_d", "", "x{topic=y", "\xff", "ünïcode"} {
		topics[name] = kprod.TopicMetrics{RecordSendTotal: int64(i), RecordSendRate: float64(i) / 2,
			ByteTotal: int64(100 * i), CompressionRateAvg: 0.5, RecordErrorTotal: 1}
	}
	src := fake{kprod.Metrics{RecordSendTotal: 21, ByteRate: 3, BufferTotalBytes: 32 << 20, Topics: topics}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src, "p1"), NewCollector(src, "p2"))
	for range 3 { // every scrape succeeds, not just the first
		n, err := testutil.GatherAndCount(reg)
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		if want := 2 * (len(kprod.Metrics{}.Map()) + 9*len(topics)); n != want {
			t.Fatalf("%d series, want %d", n, want)
		}
	}
	got := gather(t, reg)
	mf := got["kprod_producer_topic_record_send_total"]
	if n := len(mf.GetMetric()); n != 2*len(topics) {
		t.Errorf("kprod_producer_topic_record_send_total has %d series, want %d", n, 2*len(topics))
	}
	if n := len(got["kprod_producer_record_send_total"].GetMetric()); n != 2 {
		t.Errorf("kprod_producer_record_send_total has %d series, want 2 (one per producer, no topics)", n)
	}
}

func TestMetricNames(t *testing.T) {
	for java, want := range map[string]string{
		"record-send-total":             "kprod_producer_record_send_total",
		"bufferpool-wait-time-ns-total": "kprod_producer_bufferpool_wait_time_ns_total",
		"a.b{c}":                        "kprod_producer_a_b_c_",
	} {
		if got := MetricName(java); got != want {
			t.Errorf("MetricName(%q) = %q, want %q", java, got, want)
		}
	}
	if got := TopicMetricName("compression-rate"); got != "kprod_producer_topic_compression_rate" {
		t.Errorf("TopicMetricName(compression-rate) = %q", got)
	}
}
