package main

import (
	"math"
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
