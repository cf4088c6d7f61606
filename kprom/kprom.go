// Package kprom exports a kprod producer's metrics to Prometheus. It is a
// module of its own so that the producer library does not depend on the
// Prometheus client.
//
//	reg.MustRegister(kprom.NewCollector(p, "orders"))
//
// Every metric of kprod.Metrics is exported as a gauge named
// kprod_producer_<java name with _ for ->, with a "producer" label; the
// per-topic ones also carry a "topic" label. Totals are gauges too, as they
// come from a snapshot (use rate() on the *_total ones).
package kprom

import (
	"regexp"
	"strings"

	"github.com/kprod/kprod"
	"github.com/prometheus/client_golang/prometheus"
)

// Source is what the collector reads; *kprod.Producer is one.
type Source interface {
	Metrics() kprod.Metrics
}

// Collector is a prometheus.Collector over a producer's metrics.
type Collector struct {
	src  Source
	name string
}

// NewCollector returns a collector for src, whose series carry
// producer=name.
func NewCollector(src Source, name string) *Collector {
	return &Collector{src: src, name: name}
}

var (
	invalid  = regexp.MustCompile(`[^a-zA-Z0-9_]`)
	topicKey = regexp.MustCompile(`^(.*)\{topic=(.*)\}$`)
)

// MetricName turns a Java metric name into a Prometheus one.
func MetricName(java string) string {
	return "kprod_producer_" + invalid.ReplaceAllString(strings.ReplaceAll(java, "-", "_"), "_")
}

// Describe sends no descriptions: the set of series depends on the topics
// in use (an "unchecked" collector, in Prometheus' terms).
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect takes one snapshot and sends every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.src.Metrics()
	all := m.Map()
	for _, k := range m.MetricNames() {
		labels := prometheus.Labels{"producer": c.name}
		name := k
		if g := topicKey.FindStringSubmatch(k); g != nil {
			name = g[1]
			labels["topic"] = g[2]
		}
		desc := prometheus.NewDesc(MetricName(name), "kprod producer metric "+name+" (the Java producer's name)", nil, labels)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, all[k])
	}
}
