package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

// With the harness row, each Go client's CPU less the harness's is set
// against franz-go's, and the table gets a column for it; Java's is not
// the Go worker's and gets none. Without the harness row the table keeps
// its columns.
func TestOwnCPURatio(t *testing.T) {
	sums := func(harness bool) []summary {
		s := []summary{
			{Client: "kprod", Runs: 3, RecPerSec: 2e6, CPUPerMRec: 0.5},
			{Client: "franz-go", Runs: 3, RecPerSec: 1e6, CPUPerMRec: 0.7},
			{Client: "java", Runs: 3, RecPerSec: 5e5, CPUPerMRec: 5},
		}
		if harness {
			s = append(s, summary{Client: "harness", Runs: 3, RecPerSec: 6e6, CPUPerMRec: 0.3})
		}
		applyRatios(s)
		return s
	}
	with := sums(true)
	if got := with[0].OwnCPURatio; math.Abs(got-0.5) > 1e-9 { // (0.5-0.3)/(0.7-0.3)
		t.Errorf("kprod's own CPU ratio %v, want 0.5", got)
	}
	if with[0].CPURatio == 0 || with[2].OwnCPURatio != 0 || with[3].OwnCPURatio != 0 {
		t.Errorf("ratios: kprod %v, java own %v, harness own %v", with[0].CPURatio, with[2].OwnCPURatio, with[3].OwnCPURatio)
	}
	tgt := &target{desc: "kfake"}
	var rep report
	rep.writeTable(tgt, config{Size: 100, Batch: 16384, Compression: "none"}, with)
	table := rep.md.String()
	if !strings.Contains(table, "own CPU/record vs franz-go") || !strings.Contains(table, "| 0.71× | 0.50× |") {
		t.Errorf("table with the harness row:\n%s", table)
	}
	rep = report{}
	rep.writeTable(tgt, config{Size: 100, Batch: 16384, Compression: "none"}, sums(false))
	if table := rep.md.String(); strings.Contains(table, "own CPU") || strings.Count(strings.Split(table, "\n")[2], "|") != 14 {
		t.Errorf("table without the harness row:\n%s", table)
	}
}

// The machine's steal is read from /proc/stat's first line (the eighth
// number), and a table says how much of its runs' CPU time was stolen.
func TestSteal(t *testing.T) {
	then, ok := parseCPUTicks("cpu  100 5 50 800 10 0 5 30 7 0")
	if !ok || then.steal != 30 || then.total != 1000 {
		t.Fatalf("parsed %+v, %v; want steal 30 of 1000", then, ok)
	}
	now, _ := parseCPUTicks("cpu  160 5 70 920 10 0 5 80 9 0")
	if got := now.stealPctSince(then); math.Abs(got-20) > 1e-9 { // 50 of 250
		t.Errorf("steal %v%%, want 20%%", got)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x"} {
		if _, ok := parseCPUTicks(bad); ok {
			t.Errorf("parseCPUTicks(%q) accepted", bad)
		}
	}
	sums := []summary{
		{Client: "kprod", Runs: 3, StealPct: 1.5, StealMaxPct: 4},
		{Client: "franz-go", Runs: 3, StealPct: 0.5, StealMaxPct: 2},
		{Client: "sarama", Runs: 0, StealPct: 90, StealMaxPct: 90}, // failed: not counted
	}
	if got, want := stealText(sums), "0.5–1.5% (the clients' medians), at most 4.0% in one run"; !strings.Contains(got, want) {
		t.Errorf("stealText = %q, want it to contain %q", got, want)
	}
	if got := stealText([]summary{{Client: "kprod", Runs: 3, StealPct: -1, StealMaxPct: -1}}); !strings.Contains(got, "unknown") {
		t.Errorf("stealText without /proc/stat = %q", got)
	}
}

// The table's machine section says whether the VM's free page reporting
// is on, with the script that stops it, and the writeback delay.
func TestMemoryNoise(t *testing.T) {
	dir := t.TempDir()
	order, expire := dir+"/order", dir+"/expire"
	for _, c := range []struct{ order, want string }{
		{"9\n", "free page reporting on (order 9; bench/scripts/quiet-memory.sh on stops it); dirty data written back after 30 s"},
		{"11\n", "free page reporting off (order 11); dirty data written back after 30 s"},
	} {
		if err := os.WriteFile(order, []byte(c.order), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(expire, []byte("3000\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := memoryNoise(order, expire); got != c.want {
			t.Errorf("order %q: %q, want %q", c.order, got, c.want)
		}
	}
	if got := memoryNoise(dir+"/none", dir+"/none"); got != "" {
		t.Errorf("without the files: %q, want none", got)
	}
}

// A table says where its values came from, in its first line and in the
// legend under it, so that tables of the two -values modes are not mixed up.
func TestReportSaysWhichValues(t *testing.T) {
	for mode, want := range map[string]string{valuesShared: "windows of shared pre-made letters", valuesWritten: "written per record on the sending goroutine"} {
		o := &options{records: 10, warmup: 1, javaWarmup: 1, partitions: 6, runs: 1, values: mode}
		rep := &report{Env: map[string]string{}, Values: mode}
		rep.writeHeader(o, []string{"kprod"})
		rep.writeFooter()
		md := rep.md.String()
		if !strings.Contains(md, "values: "+want) {
			t.Errorf("-values %s: the first line does not say %q:\n%s", mode, want, md)
		}
		legend := "new slice on the sending goroutine"
		if got, want := strings.Contains(md, legend), mode == valuesWritten; got != want {
			t.Errorf("-values %s: the legend mentions %q: %v, want %v", mode, legend, got, want)
		}
	}
}

// -values takes its two modes only, in the coordinator and in a worker.
func TestValuesModes(t *testing.T) {
	for _, mode := range []string{valuesShared, valuesWritten} {
		if err := checkValues(mode); err != nil {
			t.Errorf("-values %s: %v", mode, err)
		}
	}
	for _, mode := range []string{"", "fresh", "Written"} {
		if err := checkValues(mode); err == nil || !strings.Contains(err.Error(), "-values") {
			t.Errorf("-values %q: err %v, want one naming -values", mode, err)
		}
	}
	o := &options{worker: true, client: "kprod", topic: "t", brokers: "127.0.0.1:1", values: "fresh"}
	if err := runWorker(o); err == nil || !strings.Contains(err.Error(), "-values") {
		t.Errorf("a worker given -values fresh: err %v, want one naming -values", err)
	}
}
