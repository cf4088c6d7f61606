// Command waitkafka waits until every given Kafka broker answers ApiVersions
// and Metadata and lists the expected brokers as registered. It is the
// readiness check of scripts/kafka-cluster.sh ("up" and "restart N").
//
//	waitkafka -brokers 127.0.0.1:29092,127.0.0.1:29093 -expect 1,2,3 -timeout 120s
//
// It exits 0 when ready, 1 on timeout, and early with 1 if one of -pids dies.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
)

func main() {
	brokers := flag.String("brokers", "", "comma-separated host:port list; each one must answer")
	expect := flag.String("expect", "", "comma-separated node ids every broker's metadata must list")
	timeout := flag.Duration("timeout", 120*time.Second, "give up after this long")
	pids := flag.String("pids", "", "comma-separated pids; fail at once if one of them exits")
	quiet := flag.Bool("quiet", false, "print nothing on failure")
	flag.Parse()

	addrs := split(*brokers)
	if len(addrs) == 0 {
		fmt.Fprintln(os.Stderr, "waitkafka: -brokers is required")
		os.Exit(2)
	}
	var want []int32
	for _, s := range split(*expect) {
		id, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "waitkafka: bad node id %q\n", s)
			os.Exit(2)
		}
		want = append(want, int32(id))
	}
	var watch []int
	for _, s := range split(*pids) {
		pid, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "waitkafka: bad pid %q\n", s)
			os.Exit(2)
		}
		watch = append(watch, pid)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	err := testcluster.WaitFor(ctx, 250*time.Millisecond, func(ctx context.Context) error {
		for _, pid := range watch {
			if syscall.Kill(pid, 0) != nil {
				cancel() // no point waiting for a dead process
				return fmt.Errorf("process %d exited", pid)
			}
		}
		return testcluster.Probe(ctx, addrs, want)
	})
	if err != nil {
		if !*quiet {
			fmt.Fprintf(os.Stderr, "waitkafka: not ready after %v: %v\n", time.Since(start).Round(time.Millisecond), err)
		}
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
