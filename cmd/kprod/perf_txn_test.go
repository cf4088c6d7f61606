package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kprod/kprod/internal/testcluster"
)

// kprod perf --transaction-duration-ms sends in transactions, as Java's
// ProducerPerformance does: every record is visible to read_committed
// consumers once, and the cluster saw several commits.
func TestPerfTransactions(t *testing.T) {
	c := newCluster(t, 3, "txn")
	commits, aborts := testcluster.CountEndTxn(c)
	const n = 4000
	code, stdout, stderr := run(t, 30*time.Second, nil, "perf", "--bootstrap-server", strings.Join(c.ListenAddrs(), ","),
		"--topic", "txn", "--num-records", strconv.Itoa(n), "--payload-monotonic", "--throughput", "20000",
		"--transaction-duration-ms", "50", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if r := parsePerfJSON(t, stdout); r.Records != n {
		t.Errorf("records %d, want %d", r.Records, n)
	}
	// 4000 records at 20000/s take 200 ms: about 4 transactions of 50 ms.
	// (Records sent without a transaction are read_committed too, so the
	// read below alone would not show that transactions were used.)
	if got := commits.Load(); got < 2 || aborts.Load() != 0 {
		t.Errorf("%d commits and %d aborts, want several commits and no abort", got, aborts.Load())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("txn"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := make([]bool, n)
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records read_committed", got, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Value))
			if err != nil || i < 0 || i >= n || seen[i] {
				t.Fatalf("unexpected or repeated value %q", r.Value)
			}
			seen[i] = true
			got++
		})
	}
}

func TestPerfTransactionFlags(t *testing.T) {
	code, _, stderr := run(t, 10*time.Second, nil, "perf", "--transaction-duration-ms", "0")
	if code != 2 || !strings.Contains(stderr, "--transaction-duration-ms should be greater than zero") {
		t.Errorf("--transaction-duration-ms 0: exit %d, stderr %s", code, stderr)
	}
	code, _, stderr = run(t, 10*time.Second, nil, "perf", "--transactional-id", "x", "--producer-props", "acks=1")
	if code != 2 || !strings.Contains(stderr, "transactional.id") {
		t.Errorf("--transactional-id with acks=1: exit %d, stderr %s", code, stderr)
	}
}
