package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/pierrec/lz4/v4"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// summarize takes medians over the successful runs only (the middle one
// of an odd count, the mean of the middle two of an even count), counts
// the failed runs, and says whether a throttled client kept up.
func TestSummarizeMedians(t *testing.T) {
	run := func(rate, cpu, broker float64, err string) runResult {
		r := runResult{Err: err, CPUPerMRec: cpu, BrokerCPUPerMRec: broker}
		r.RecPerSec = rate
		return r
	}
	tgt := &target{name: "kfake"}
	odd := summarize(tgt, config{}, "kprod", []runResult{
		run(3, 0.3, 1, ""), run(1, 0.9, 3, ""), run(100, 9, 9, "boom"), run(2, 0.5, 2, ""),
	}, 10)
	if odd.Runs != 3 || odd.Failed != 1 || len(odd.Errors) != 1 {
		t.Fatalf("runs %d failed %d errors %v", odd.Runs, odd.Failed, odd.Errors)
	}
	if odd.RecPerSec != 2 || odd.CPUPerMRec != 0.5 || odd.BrokerCPUPerMRec != 2 {
		t.Errorf("medians of 3: rate %v cpu %v broker %v, want 2, 0.5, 2", odd.RecPerSec, odd.CPUPerMRec, odd.BrokerCPUPerMRec)
	}
	even := summarize(tgt, config{}, "kprod", []runResult{run(1, 1, 0, ""), run(4, 2, 0, ""), run(2, 8, 0, ""), run(3, 4, 0, "")}, 10)
	if even.RecPerSec != 2.5 || even.CPUPerMRec != 3 {
		t.Errorf("medians of 4: rate %v cpu %v, want 2.5 and 3", even.RecPerSec, even.CPUPerMRec)
	}
	if none := summarize(tgt, config{}, "kprod", []runResult{run(1, 1, 0, "x")}, 10); none.Runs != 0 || none.RecPerSec != 0 {
		t.Errorf("no successful run: %+v", none)
	}
	kept := summarize(tgt, config{Rate: 100}, "kprod", []runResult{run(95, 1, 0, "")}, 10)
	behind := summarize(tgt, config{Rate: 100}, "kprod", []runResult{run(94.9, 1, 0, "")}, 10)
	if kept.KeptUp == nil || !*kept.KeptUp || behind.KeptUp == nil || *behind.KeptUp {
		t.Errorf("kept up at 95%% of the rate: %v; at 94.9%%: %v", kept.KeptUp, behind.KeptUp)
	}
}

// The ratios are against franz-go's row: records/s over franz-go's, CPU
// per record over franz-go's; rateToHalve picks the named client's rate,
// or the slowest client's.
func TestRatiosAndRateToHalve(t *testing.T) {
	sums := []summary{
		{Client: "kprod", Runs: 3, RecPerSec: 3e6, CPUPerMRec: 0.4},
		{Client: "franz-go", Runs: 3, RecPerSec: 2e6, CPUPerMRec: 0.8},
		{Client: "sarama", Runs: 3, RecPerSec: 5e5, CPUPerMRec: 2},
		{Client: "java", Runs: 0},
	}
	applyRatios(sums)
	if !near(sums[0].RateRatio, 1.5) || !near(sums[0].CPURatio, 0.5) || !near(sums[1].RateRatio, 1) || !near(sums[2].CPURatio, 2.5) {
		t.Errorf("ratios: kprod %v/%v, franz-go %v, sarama cpu %v", sums[0].RateRatio, sums[0].CPURatio, sums[1].RateRatio, sums[2].CPURatio)
	}
	if sums[3].RateRatio != 0 {
		t.Errorf("a client without a successful run got a ratio")
	}
	if r := rateToHalve(sums, "kprod"); r != 3e6 {
		t.Errorf("rateToHalve(kprod) = %v", r)
	}
	if r := rateToHalve(sums, ""); r != 5e5 {
		t.Errorf("rateToHalve(slowest) = %v, want sarama's", r)
	}
	// Without franz-go's row there is nothing to compare with.
	solo := []summary{{Client: "kprod", Runs: 1, RecPerSec: 1, CPUPerMRec: 1}}
	applyRatios(solo)
	if solo[0].RateRatio != 0 || solo[0].CPURatio != 0 {
		t.Errorf("ratios without franz-go: %+v", solo[0])
	}
}

// ProducerPerformance's summary line: the steady-state one when there is
// one; MB/s is its MiB; percentiles in whole ms.
func TestParseJava(t *testing.T) {
	out := []byte("10000 records sent, 5000.0 records/sec (0.48 MB/sec), 3.10 ms avg latency, 50.00 ms max latency, 2 ms 50th, 9 ms 95th, 12 ms 99th, 20 ms 99.9th.\n" +
		"1000000 steady state records sent, 250000.5 records/sec (23.84 MB/sec), 4.20 ms avg latency, 80.00 ms max latency, 3 ms 50th, 10 ms 95th, 15 ms 99th, 30 ms 99.9th.\n")
	wr, err := parseJava(out, &options{})
	if err != nil {
		t.Fatal(err)
	}
	if wr.Records != 1000000 || wr.RecPerSec != 250000.5 || wr.MiBPerSec != 23.84 || wr.P50Ms != 3 || wr.P99Ms != 15 || wr.MaxMs != 80 {
		t.Errorf("parsed %+v", wr)
	}
	if !near(wr.ElapsedSec, 1000000/250000.5) {
		t.Errorf("elapsed %v", wr.ElapsedSec)
	}
	if _, err := parseJava([]byte("nothing here"), &options{}); err == nil {
		t.Error("output without a summary line parsed")
	}
}

// /proc/PID/stat: utime and stime (fields 14 and 15, in ticks of 1/100 s)
// counted after the command name, which may hold spaces and parentheses.
func TestStatCPU(t *testing.T) {
	stat := "1234 (bench (kfake) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 100 0 0"
	if got := statCPU(stat); got != 3250*time.Millisecond {
		t.Errorf("statCPU = %v, want 3.25s", got)
	}
	if got := statCPU("garbage"); got != 0 {
		t.Errorf("statCPU(garbage) = %v", got)
	}
}

// Every record gets its own value: upper-case letters, of the size asked
// for, from varying places; and lz4 finds about nothing to compress in a
// batch of them (one repeated value compressed about 80:1). With -values
// written each value is, in addition, a slice of its own, outside the
// shared letters and apart from every other value.
func TestPayloadsVaryAndDoNotCompress(t *testing.T) {
	for _, written := range []bool{false, true} {
		p := newPayloads(100, written)
		seen := map[string]bool{}
		var batch []byte
		var vals [][]byte
		for range 160 { // a 16 KiB batch of 100 B values
			v := p.next()
			if len(v) != 100 || cap(v) != 100 {
				t.Fatalf("written %v: value of len %d cap %d", written, len(v), cap(v))
			}
			if bytes.IndexFunc(v, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
				t.Fatalf("written %v: value %q is not upper-case letters", written, v)
			}
			seen[string(v)] = true
			batch = append(batch, v...)
			vals = append(vals, v)
		}
		if len(seen) < 159 {
			t.Errorf("written %v: %d distinct values of 160", written, len(seen))
		}
		inPool := 0
		lo, hi := uintptr(unsafe.Pointer(&p.pool[0])), uintptr(unsafe.Pointer(&p.pool[len(p.pool)-1]))
		for _, v := range vals {
			if a := uintptr(unsafe.Pointer(&v[0])); a >= lo && a <= hi {
				inPool++
			}
		}
		if want := map[bool]int{false: len(vals), true: 0}[written]; inPool != want {
			t.Errorf("written %v: %d of %d values point into the shared letters, want %d", written, inPool, len(vals), want)
		}
		if written {
			v := vals[0]
			before := string(vals[1])
			v[0] ^= 0x20 // a value's own memory: writing it changes no other
			if string(vals[1]) != before {
				t.Errorf("values share memory")
			}
		}
		var z bytes.Buffer
		w := lz4.NewWriter(&z)
		if _, err := w.Write(batch); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if ratio := float64(z.Len()) / float64(len(batch)); ratio < 0.9 {
			t.Errorf("written %v: lz4 compresses a batch of values to %.0f%%: the values repeat", written, 100*ratio)
		}
	}
}

// Against kfake the table has a column for the broker's CPU; every row,
// a failed client's too, has as many cells as the header.
func TestTableColumns(t *testing.T) {
	for _, harness := range []bool{false, true} {
		sums := []summary{
			{Client: "kprod", Runs: 3, RecPerSec: 2e6, CPUPerMRec: 0.5, BrokerCPUPerMRec: 0.61},
			{Client: "franz-go", Runs: 3, RecPerSec: 1e6, CPUPerMRec: 0.7, BrokerCPUPerMRec: 0.83},
			{Client: "sarama", Failed: 3},
		}
		if harness {
			sums = append(sums, summary{Client: "harness", Runs: 3, RecPerSec: 6e6, CPUPerMRec: 0.3})
		}
		applyRatios(sums)
		var rep report
		rep.writeTable(&target{desc: "kfake"}, config{Size: 100, Batch: 16384, Compression: "none"}, sums)
		lines := strings.Split(rep.md.String(), "\n")
		var rows []string
		for _, l := range lines {
			if strings.HasPrefix(l, "|") {
				rows = append(rows, l)
			}
		}
		if len(rows) != 2+len(sums) || !strings.Contains(rows[0], "kfake CPU s / 1M records") {
			t.Fatalf("table:\n%s", rep.md.String())
		}
		for _, r := range rows[1:] {
			if strings.Count(r, "|") != strings.Count(rows[0], "|") {
				t.Errorf("row %q has %d cells' bars, the header %d", r, strings.Count(r, "|"), strings.Count(rows[0], "|"))
			}
		}
		if !strings.Contains(rows[2], "| 0.61 |") {
			t.Errorf("kprod's row lacks its kfake CPU: %s", rows[2])
		}
	}
}
