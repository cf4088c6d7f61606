// Package kprom exports a kprod producer's metrics to Prometheus. It is a
// module of its own so that the producer library does not depend on the
// Prometheus client.
//
//	reg.MustRegister(kprom.NewCollector(p, "orders"))
//
// Every metric of kprod.Metrics is exported, under the Java producer's name
// with "-" (and any other character invalid in a Prometheus name) turned
// into "_":
//
//   - producer-level metrics (Java's producer-metrics group) as
//     kprod_producer_<name>{producer="<name given to NewCollector>"}, e.g.
//     kprod_producer_record_send_total, kprod_producer_request_latency_avg
//     (see MetricName);
//   - per-topic metrics (Java's producer-topic-metrics group) as
//     kprod_producer_topic_<name>{producer="...",topic="<topic>"}, e.g.
//     kprod_producer_topic_record_send_total (see TopicMetricName), in
//     families of their own, so that sum() over a producer-level family
//     does not count the topics twice.
//
// Metrics whose Java name ends in "-total" (record-send-total, byte-total,
// request-total, record-retry-total, record-error-total, batch-split-total,
// bufferpool-wait-time-ns-total, buffer-exhausted-total, and the call
// times flush-time-ns-total, txn-*-time-ns-total and
// metadata-wait-time-ns-total) are counters; all others (rates, ratios,
// averages, maxima, requests-in-flight, waiting-threads, buffer sizes,
// metadata-age) are gauges.
//
// The collector is a checked one: it describes its fixed set of metrics,
// so registering it twice, or two collectors with the same producer name,
// fails with prometheus.AlreadyRegisteredError. Give each producer a name
// of its own (two producers of a process may share a client.id); do not
// fall back on the error's ExistingCollector, which reads the other
// producer. Once a producer is closed its collector exports nothing
// (Java removes a closed producer's metrics); Unregister it to reuse its
// name. Label values that are not
// valid UTF-8 (a producer or topic name) have the invalid bytes replaced
// with U+FFFD; should two topics then share a label value, only the first
// of them in sorted order is exported.
package kprom

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/kprod/kprod"
	"github.com/prometheus/client_golang/prometheus"
)

// Source is what the collector reads; *kprod.Producer is one.
type Source interface {
	Metrics() kprod.Metrics
}

var _ Source = (*kprod.Producer)(nil)

// metricDesc is one exported family: its Java name, its Desc and its type.
type metricDesc struct {
	java string
	desc *prometheus.Desc
	typ  prometheus.ValueType
}

// Collector is a prometheus.Collector over a producer's metrics.
type Collector struct {
	src      Source
	producer []metricDesc // producer-level, const label producer
	topic    []metricDesc // per topic, const label producer, variable label topic
}

// Java names of the producer-level and per-topic metrics, sorted, taken
// from kprod's Map methods so that they follow metrics.go.
var (
	producerNames = slices.Sorted(maps.Keys(kprod.Metrics{}.Map()))
	topicNames    = slices.Sorted(maps.Keys(kprod.TopicMetrics{}.Map()))
)

// NewCollector returns a collector for src, whose series carry
// producer=name.
func NewCollector(src Source, name string) *Collector {
	name = validLabel(name)
	c := &Collector{src: src}
	for _, java := range producerNames {
		c.producer = append(c.producer, metricDesc{java, prometheus.NewDesc(
			MetricName(java),
			"kprod producer metric "+java+" (the Java producer's name, in producer-metrics)"+unit(java),
			nil, prometheus.Labels{"producer": name}), valueType(java)})
	}
	for _, java := range topicNames {
		c.topic = append(c.topic, metricDesc{java, prometheus.NewDesc(
			TopicMetricName(java),
			"kprod per-topic producer metric "+java+" (the Java producer's name, in producer-topic-metrics)"+unit(java),
			[]string{"topic"}, prometheus.Labels{"producer": name}), valueType(java)})
	}
	return c
}

var invalid = regexp.MustCompile(`[^a-zA-Z0-9_]`)

func promName(java string) string {
	return invalid.ReplaceAllString(strings.ReplaceAll(java, "-", "_"), "_")
}

// MetricName turns a Java producer-level metric name (producer-metrics)
// into a Prometheus one: kprod_producer_<name>.
func MetricName(java string) string {
	return "kprod_producer_" + promName(java)
}

// TopicMetricName turns a Java per-topic metric name
// (producer-topic-metrics) into a Prometheus one:
// kprod_producer_topic_<name>.
func TopicMetricName(java string) string {
	return "kprod_producer_topic_" + promName(java)
}

// unit says, for HELP, the unit of a Java metric, whose name often does
// not: Java's times are in ms (metadata-age in s), its rates per second.
func unit(java string) string {
	switch {
	case java == "metadata-age":
		return ", in seconds"
	case strings.HasSuffix(java, "-ns-total"):
		return ", in nanoseconds"
	case strings.Contains(java, "latency") || strings.Contains(java, "-time-"):
		return ", in milliseconds"
	case strings.HasPrefix(java, "compression-rate"):
		return ", compressed size over uncompressed size"
	case java == "bufferpool-wait-ratio":
		return ", share of time (waiting Sends added up)"
	case java == "byte-rate":
		return ", in bytes per second"
	case strings.HasSuffix(java, "-rate"):
		return ", per second"
	case java == "byte-total" || strings.HasSuffix(java, "-bytes") || strings.Contains(java, "size-"):
		return ", in bytes"
	}
	return ""
}

// valueType is CounterValue for the Java "-total" metrics, else GaugeValue.
func valueType(java string) prometheus.ValueType {
	if strings.HasSuffix(java, "-total") {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// validLabel makes s a valid label value: valid UTF-8.
func validLabel(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Describe sends the descriptions of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.producer {
		ch <- d.desc
	}
	for _, d := range c.topic {
		ch <- d.desc
	}
}

// Collect takes one snapshot and sends every metric. It never panics: a
// metric that cannot be built is left out. Once the producer is closed
// (Metrics().Closed) it sends nothing, as Java removes a closed
// producer's metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.src.Metrics()
	if m.Closed {
		return
	}
	all := m.Map()
	for _, d := range c.producer {
		if pm, err := prometheus.NewConstMetric(d.desc, d.typ, all[d.java]); err == nil {
			ch <- pm
		}
	}
	topics := slices.Sorted(maps.Keys(m.Topics))
	seen := make(map[string]bool, len(topics))
	for _, t := range topics {
		label := validLabel(t)
		if seen[label] {
			continue // another topic has the same label value once made valid
		}
		seen[label] = true
		vals := m.Topics[t].Map()
		for _, d := range c.topic {
			if pm, err := prometheus.NewConstMetric(d.desc, d.typ, vals[d.java], label); err == nil {
				ch <- pm
			}
		}
	}
}
