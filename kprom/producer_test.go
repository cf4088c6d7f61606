package kprom

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kprod/kprod"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A real producer, against kfake: scrapes while it produces and while it
// closes pass the pedantic registry's checks and never see a counter go
// down; once Close has returned nothing is exported (Java removes a
// closed producer's metrics), and the name can be reused after
// Unregister.
func TestCollectorOfAProducer(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	newProducer := func() *kprod.Producer {
		cfg := kprod.DefaultConfig()
		cfg.BootstrapServers = c.ListenAddrs()
		cfg.Linger = time.Millisecond
		p, err := kprod.NewProducer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	p := newProducer()
	col := NewCollector(p, "app")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := map[string]float64{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			mfs, err := reg.Gather()
			if err != nil {
				scrapeErr = err
				return
			}
			for _, mf := range mfs {
				if mf.GetType() != dto.MetricType_COUNTER {
					continue
				}
				for _, m := range mf.GetMetric() {
					k := mf.GetName() + labels(m)["topic"]
					if v := m.GetCounter().GetValue(); v < last[k] {
						scrapeErr = fmt.Errorf("counter %s went from %v to %v", k, last[k], v)
						return
					}
					last[k] = m.GetCounter().GetValue()
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range 2000 {
		p.Send(ctx, &kprod.Record{Topic: "t", Value: []byte(strings.Repeat("v", i%100))}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, reg)["kprod_producer_record_send_total"]; got == nil || got.GetMetric()[0].GetCounter().GetValue() < 2000 {
		t.Fatalf("record_send_total after 2000 records: %v", got)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if scrapeErr != nil {
		t.Fatal(scrapeErr)
	}
	if got := gather(t, reg); len(got) != 0 {
		t.Fatalf("a closed producer's collector exported %d families", len(got))
	}

	if !reg.Unregister(col) {
		t.Fatal("Unregister of the closed producer's collector")
	}
	p2 := newProducer()
	defer p2.Close(ctx)
	reg.MustRegister(NewCollector(p2, "app"))
	if got := gather(t, reg)["kprod_producer_buffer_total_bytes"]; got == nil {
		t.Fatal("the new producer under the reused name is not exported")
	}
}

// HELP says the unit that a Java name often does not.
func TestHelpSaysTheUnit(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(fake{kprod.Metrics{Topics: map[string]kprod.TopicMetrics{"t": {}}}}, "p"))
	got := gather(t, reg)
	for name, want := range map[string]string{
		"kprod_producer_request_latency_avg":           "in milliseconds",
		"kprod_producer_metadata_age":                  "in seconds",
		"kprod_producer_topic_byte_rate":               "in bytes per second",
		"kprod_producer_byte_total":                    "in bytes",
		"kprod_producer_flush_time_ns_total":           "in nanoseconds",
		"kprod_producer_record_send_rate":              "per second",
		"kprod_producer_compression_rate_avg":          "compressed size over uncompressed size",
		"kprod_producer_bufferpool_wait_time_ns_total": "in nanoseconds",
		"kprod_producer_record_queue_time_max":         "in milliseconds",
		"kprod_producer_topic_record_send_total":       "",
	} {
		mf := got[name]
		if mf == nil {
			t.Errorf("%s not exported", name)
			continue
		}
		if help := mf.GetHelp(); want != "" && !strings.HasSuffix(help, ", "+want) || want == "" && !strings.HasSuffix(help, ")") {
			t.Errorf("%s HELP %q, want it to end with %q (no unit: with the name's parenthesis)", name, help, want)
		}
	}
}
