package kprom

import (
	"strings"
	"testing"

	"github.com/kprod/kprod"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fake struct{ m kprod.Metrics }

func (f fake) Metrics() kprod.Metrics { return f.m }

func TestCollector(t *testing.T) {
	src := fake{kprod.Metrics{RecordSendTotal: 42, RequestLatencyAvg: 1.5,
		Topics: map[string]kprod.TopicMetrics{"orders": {RecordSendTotal: 40}}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(src, "p1"))
	want := `
# HELP kprod_producer_record_send_total kprod producer metric record-send-total (the Java producer's name)
# TYPE kprod_producer_record_send_total gauge
kprod_producer_record_send_total{producer="p1"} 42
kprod_producer_record_send_total{producer="p1",topic="orders"} 40
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kprod_producer_record_send_total"); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if n < 30 {
		t.Fatalf("%d series, want every metric of kprod.Metrics", n)
	}
}
