package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// environment describes the machine and the software the numbers come from.
func environment(o *options) map[string]string {
	env := map[string]string{
		"nproc":  fmt.Sprint(runtime.NumCPU()),
		"go":     runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"cpu":    procField("/proc/cpuinfo", "model name"),
		"memory": procField("/proc/meminfo", "MemTotal"),
	}
	env["load average at start"] = loadAvg()
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		env["kernel"] = strings.TrimSpace(string(out))
	}
	if r := memoryNoise(pageReportingOrder, "/proc/sys/vm/dirty_expire_centisecs"); r != "" {
		env["vm memory"] = r
	}
	for _, c := range allClients {
		if c == "java" {
			continue
		}
		if v := moduleVersion(c); v != "" {
			env["module "+modulePath[c]] = v
		}
	}
	if slices.Contains(splitList(o.clients), "java") {
		env["java"] = javaVersion()
		env["kafka-clients (java)"] = javaKafkaVersion(o.javaLibs)
	}
	return env
}

const pageReportingOrder = "/sys/module/page_reporting/parameters/page_reporting_order"

// memoryNoise says whether the guest's free page reporting and the
// kernel's writeback delay are as scripts/quiet-memory.sh leaves them:
// with reporting on, runs on a real cluster fall into a slow state
// whenever they allocate memory the host took back (BENCHMARKS.md, "A
// check: what the real cluster's slow state is"). "" when neither file
// exists (not Linux).
func memoryNoise(orderFile, expireFile string) string {
	var parts []string
	if b, err := os.ReadFile(orderFile); err == nil {
		o := strings.TrimSpace(string(b))
		// Orders above the largest the buddy allocator has (10 on
		// x86-64) are never reported.
		if n, err := strconv.Atoi(o); err == nil && n > 10 {
			parts = append(parts, "free page reporting off (order "+o+")")
		} else {
			parts = append(parts, "free page reporting on (order "+o+"; bench/scripts/quiet-memory.sh on stops it)")
		}
	}
	if b, err := os.ReadFile(expireFile); err == nil {
		if cs, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			parts = append(parts, fmt.Sprintf("dirty data written back after %g s", float64(cs)/100))
		}
	}
	return strings.Join(parts, "; ")
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func (rep *report) writeHeader(o *options, clients []string) {
	md := &rep.md
	fmt.Fprintf(md, "<!-- %s -->\n\n", rep.Command)
	keyed := "no keys"
	if o.keys > 0 {
		keyed = fmt.Sprintf("keys: one of %d at random per record, partitioned by murmur2", o.keys)
	}
	vals := "values: windows of shared pre-made letters"
	if o.values == valuesWritten {
		vals = "values: written per record on the sending goroutine, into a new slice"
	}
	fmt.Fprintf(md, "%d records per client and run after %d warm-up records (the Java client: %d); %d partitions; %s; %s; medians of %d runs; clients: %s.\n\n",
		o.records, o.warmup, o.javaWarmup, o.partitions, keyed, vals, o.runs, strings.Join(clients, ", "))
	keys := make([]string, 0, len(rep.Env))
	for k := range rep.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(md, "- %s: %s\n", k, rep.Env[k])
	}
	for c, why := range rep.Skipped {
		fmt.Fprintf(md, "- skipped %s: %s\n", c, why)
	}
	md.WriteString("\n")
}

func (rep *report) writeTable(t *target, cfg config, sums []summary) {
	md := &rep.md
	fmt.Fprintf(md, "### %s — %d B values, batch.size %d, compression %s, %s\n\n", t.desc, cfg.Size, cfg.Batch, cfg.Compression, rateText(cfg.Rate))
	// With the harness row, a column for the clients' own CPU (without
	// the worker's share, which the harness row measures) against
	// franz-go's.
	own := slices.ContainsFunc(sums, func(s summary) bool { return s.OwnCPURatio > 0 })
	ownHead, ownSep, ownEmpty := "", "", ""
	if own {
		ownHead, ownSep, ownEmpty = " own CPU/record vs franz-go (less harness) |", "--:|", " |"
	}
	// Against kfake, the broker's CPU while each client ran: the two
	// share the cores.
	broker := slices.ContainsFunc(sums, func(s summary) bool { return s.BrokerCPUPerMRec > 0 })
	brokerHead, brokerSep, brokerEmpty := "", "", ""
	if broker {
		brokerHead, brokerSep, brokerEmpty = " kfake CPU s / 1M records |", "--:|", " |"
	}
	md.WriteString("| client | records/s | MiB/s | p50 ms | p99 ms | max ms | CPU s / 1M records | of which sys |" + brokerHead + " peak RSS MiB | records/s vs franz-go | CPU/record vs franz-go |" + ownHead + " idempotent | runs |\n")
	md.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|" + brokerSep + "--:|--:|--:|" + ownSep + ":-:|--:|\n")
	for _, s := range sums {
		if s.Runs == 0 {
			// Empty: MiB/s to CPU and sys, [kfake CPU], RSS and the two
			// ratios, [own CPU], idempotent.
			fmt.Fprintf(md, "| %s | failed |%s%s%s%s |%s\n", s.Client, strings.Repeat(" |", 6), brokerEmpty,
				strings.Repeat(" |", 3), ownEmpty, fmt.Sprintf(" 0/%d |", s.Failed))
			continue
		}
		name := s.Client
		if s.KeptUp != nil && !*s.KeptUp {
			name += " (fell behind the rate)"
		}
		ownCol, brokerCol := "", ""
		if own {
			ownCol = " " + ratio(s.OwnCPURatio) + " |"
		}
		if broker {
			brokerCol = fmt.Sprintf(" %.2f |", s.BrokerCPUPerMRec)
		}
		fmt.Fprintf(md, "| %s | %.0f | %.1f | %s | %s | %s | %.2f | %.2f |%s %.0f | %s | %s |%s %s | %d/%d |\n",
			name, s.RecPerSec, s.MiBPerSec, msText(s.P50Ms), msText(s.P99Ms), msText(s.MaxMs),
			s.CPUPerMRec, s.SysPerMRec, brokerCol, s.MaxRSSMiB, ratio(s.RateRatio), ratio(s.CPURatio), ownCol, yesNo(s.Idempotent), s.Runs, s.Runs+s.Failed)
	}
	fmt.Fprintf(md, "\nLoad average when this table was done: %s. %s\n\n", loadAvg(), stealText(sums))
	for _, s := range sums {
		var notes []string
		if s.Notes != "" {
			notes = append(notes, s.Notes)
		}
		if s.ExtraRecord > 0 {
			notes = append(notes, fmt.Sprintf("up to %d more records on the broker than were sent (duplicates from retries)", s.ExtraRecord))
		}
		notes = append(notes, s.Errors...)
		if len(notes) > 0 {
			fmt.Fprintf(md, "- %s: %s\n", s.Client, strings.Join(notes, "; "))
		}
	}
	md.WriteString("\n")
}

// stealText sums up the CPU time the hypervisor took from the machine
// during a table's runs: figures taken under steal are lower than the
// machine's and vary from run to run.
func stealText(sums []summary) string {
	lo, hi, most := -1.0, -1.0, -1.0
	for _, s := range sums {
		if s.Runs == 0 || s.StealPct < 0 {
			continue
		}
		if lo < 0 || s.StealPct < lo {
			lo = s.StealPct
		}
		hi, most = max(hi, s.StealPct), max(most, s.StealMaxPct)
	}
	if most < 0 {
		return "CPU time stolen by the hypervisor: unknown (no /proc/stat)."
	}
	return fmt.Sprintf("CPU time stolen by the hypervisor during the runs (/proc/stat steal, all cores): %.1f–%.1f%% (the clients' medians), at most %.1f%% in one run.", lo, hi, most)
}

func (rep *report) writeFooter() {
	values := "Each record's value is random upper-case letters, a window at a random place in 4 MiB of them (read only, shared), as ProducerPerformance makes a fresh random value per record. "
	if rep.Values == valuesWritten {
		values = "Each record's value is random upper-case letters, copied from a random place in 4 MiB of them into a new slice on the sending goroutine just before the send (-values written), as ProducerPerformance makes a fresh random value per record; the Java client makes its own. "
	}
	rep.Env["load average at end"] = loadAvg()
	fmt.Fprintf(&rep.md, "Load average (1, 5, 15 min) at the start: %s; at the end: %s.\n\n", rep.Env["load average at start"], rep.Env["load average at end"])
	rep.md.WriteString("records/s and MiB/s: measured records (value bytes, MiB = 2^20) over the time from the first send to the last acknowledgement. " +
		"Latency: from each record's send call to its acknowledgement callback. CPU: user+sys seconds of the client's whole process " +
		"(start-up and warm-up included) per million records sent, and of it the sys seconds (in the kernel: system calls and, on loopback, much of the TCP work of both ends); kfake CPU: the same for the kfake process while the client's process ran " +
		"(client and broker share the cores); peak RSS: the highest VmHWM of that process. " +
		"Steal: the share of all cores' time that the hypervisor gave to other guests while a run's process ran (/proc/stat); a client's rate falls and its figures scatter with it, so tables with more than a few percent are not comparable with tables without. " +
		values +
		"The Java client's (ProducerPerformance's) records/s is its own: timed from the end of its warm-up (-java-warmup records, for its JIT), as handed to send, to close; its CPU column includes the JVM's start, the JIT and the warm-up.\n")
}

func msText(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func ratio(v float64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", v)
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "?"
	case *b:
		return "yes"
	default:
		return "no"
	}
}
