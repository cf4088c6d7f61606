package kprod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// faultRun produces a known sequence, reads everything back with an
// independent consumer (franz-go) and counts, per partition, what was
// lost (acknowledged but not in the log), duplicated (in the log more
// than once) and reordered (in the log before a record sent earlier).
type faultRun struct {
	name       string
	topic      string
	partitions int32
	perPart    int // records per partition

	mu       sync.Mutex
	acked    map[string]bool // "p:i" → acknowledged
	failed   map[string]error
	calls    map[string]int
	start    time.Time
	finished time.Time
}

type faultCounts struct {
	sent, acked, failed, inLog, lost, dup, reordered, extraCalls int
}

func (c faultCounts) String() string {
	return fmt.Sprintf("sent=%d acked=%d failed=%d in_log=%d lost=%d duplicated=%d reordered=%d callback_errors=%d",
		c.sent, c.acked, c.failed, c.inLog, c.lost, c.dup, c.reordered, c.extraCalls)
}

func newFaultRun(name, topic string, partitions int32, perPart int) *faultRun {
	return &faultRun{name: name, topic: topic, partitions: partitions, perPart: perPart,
		acked: map[string]bool{}, failed: map[string]error{}, calls: map[string]int{}}
}

func seqKey(p int32, i int) string { return strconv.Itoa(int(p)) + ":" + strconv.Itoa(i) }

// produce sends perPart records to each partition, round-robin, calling
// during(k) after every k-th record overall (for injecting faults
// mid-run), then flushes with the given bound.
func (f *faultRun) produce(t *testing.T, p *Producer, during func(sent int), flushWithin time.Duration) {
	t.Helper()
	f.start = time.Now()
	var wg sync.WaitGroup
	sent := 0
	for i := 0; i < f.perPart; i++ {
		for part := int32(0); part < f.partitions; part++ {
			k := seqKey(part, i)
			r := (&Record{Topic: f.topic, Value: []byte(k)}).ToPartition(part)
			wg.Add(1)
			p.Send(context.Background(), r, func(_ *Record, err error) {
				f.mu.Lock()
				f.calls[k]++
				if f.calls[k] == 1 {
					defer wg.Done()
				}
				if err == nil {
					f.acked[k] = true
				} else {
					f.failed[k] = err
				}
				f.mu.Unlock()
			})
			sent++
			if during != nil {
				during(sent)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushWithin)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("%s: flush: %v", f.name, err)
	}
	wg.Wait()
	f.finished = time.Now()
}

// check consumes the topic and returns the counts; it logs them so that
// the test output shows every scenario's numbers.
func (f *faultRun) check(t *testing.T, brokers []string) faultCounts {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(f.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	f.mu.Lock()
	c := faultCounts{sent: f.perPart * int(f.partitions), acked: len(f.acked), failed: len(f.failed)}
	for _, n := range f.calls {
		if n > 1 {
			c.extraCalls += n - 1
		}
	}
	f.mu.Unlock()

	seen := map[string]int{}
	last := map[int32]int{}
	next := map[int32]int64{} // per partition: the offset after the last record read
	var ends map[int32]int64  // the end offsets last listed
	caughtUp := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return ends != nil
	}
	deadline := time.Now().Add(60 * time.Second)
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		if ends == nil || caughtUp() {
			// Everything the log held when last asked has been read:
			// ask again, and stop once the end offsets stand still.
			// Records acknowledged with acks=0 or 1 may be lost, so
			// "every acknowledged record read" is not the only end;
			// then the read waits 2s of quiet for the replicas to move
			// the high watermark over records they had not copied yet.
			now, err := f.endOffsets(cl)
			if err != nil {
				t.Logf("%s: listing end offsets: %v", f.name, err)
			} else if ends != nil && maps.Equal(now, ends) && (f.allSeen(seen) || time.Since(quietSince) > 2*time.Second) {
				break
			} else {
				ends = now
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			quietSince = time.Now()
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			k := string(r.Value)
			seen[k]++
			parts := strings.SplitN(k, ":", 2)
			i, _ := strconv.Atoi(parts[1])
			if l, ok := last[r.Partition]; ok && i < l {
				c.reordered++
			}
			last[r.Partition] = max(last[r.Partition], i)
		})
	}
	for k, n := range seen {
		c.inLog++
		if n > 1 {
			c.dup += n - 1
		}
		_ = k
	}
	for k := range f.acked {
		if seen[k] == 0 {
			c.lost++
		}
	}
	line := fmt.Sprintf("%s: %s (produce took %v)", f.name, c, f.finished.Sub(f.start).Round(time.Millisecond))
	t.Log(line)
	reportFaultCounts(t, line)
	if c.failed > 0 {
		f.mu.Lock()
		byErr := map[string]int{}
		for _, err := range f.failed {
			byErr[err.Error()]++
		}
		keys := make([]string, 0, len(byErr))
		for k := range byErr {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("%s: %d records failed with: %s", f.name, byErr[k], k)
		}
		f.mu.Unlock()
	}
	return c
}

// allSeen says whether every acknowledged record is among seen.
func (f *faultRun) allSeen(seen map[string]int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.acked {
		if seen[k] == 0 {
			return false
		}
	}
	return true
}

// endOffsets lists the high watermark of each of the run's partitions.
func (f *faultRun) endOffsets(cl *kgo.Client) (map[int32]int64, error) {
	ends, err := topicEndOffsets(cl, f.topic, false)
	if err == nil && len(ends) != int(f.partitions) {
		err = fmt.Errorf("%d of %d partitions answered", len(ends), f.partitions)
	}
	return ends, err
}

// topicEndOffsets lists the end offset of each partition of topic: its
// last stable offset if committed (the end of what read_committed
// consumers may read: no transaction open below it), else its high
// watermark.
func topicEndOffsets(cl *kgo.Client, topic string, committed bool) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("metadata: %d topics", len(mresp.Topics))
	}
	if err := fkerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, mp := range mresp.Topics[0].Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = mp.Partition, -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := fkerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	if len(ends) != len(mresp.Topics[0].Partitions) {
		return nil, fmt.Errorf("%d of %d partitions answered", len(ends), len(mresp.Topics[0].Partitions))
	}
	return ends, nil
}

// excuse takes the failed records whose error matches target out of c:
// for a failure that a test knows to be kfake's and not the producer's.
// Failures with other errors stay counted. At most limit records are
// excused (what the known cause can fail): more fail the test, as a
// producer that kept failing records that way would.
func (f *faultRun) excuse(t *testing.T, c faultCounts, target error, limit int) faultCounts {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, err := range f.failed {
		if errors.Is(err, target) {
			n++
			c.failed--
			c.sent--
		}
	}
	if n > limit {
		t.Errorf("%d records failed with %v; at most %d may, for the known cause", n, target, limit)
	}
	return c
}

// assertExactlyOnce is the idempotent producer's promise: nothing
// acknowledged is lost, nothing duplicated or reordered, every callback
// once. Every scenario gives the records far more than the fault lasts
// (delivery.timeout.ms, unlimited retries), so every record must also
// have been acknowledged: failing them all would keep the other promises.
func (c faultCounts) assertExactlyOnce(t *testing.T, name string) {
	t.Helper()
	if c.lost != 0 || c.dup != 0 || c.reordered != 0 || c.extraCalls != 0 || c.failed != 0 || c.acked != c.sent {
		t.Fatalf("%s: idempotent producer broke its promise: %s", name, c)
	}
}

// assertAtLeastOnce: nothing acknowledged lost, every callback once, and
// (as for assertExactlyOnce) every record acknowledged; duplicates
// allowed.
func (c faultCounts) assertAtLeastOnce(t *testing.T, name string) {
	t.Helper()
	if c.lost != 0 || c.extraCalls != 0 || c.failed != 0 || c.acked != c.sent {
		t.Fatalf("%s: at-least-once broke its promise: %s", name, c)
	}
}

// reportFaultCounts appends a scenario's counts to $KPROD_FAULT_REPORT,
// which scripts/test.sh prints after the tests: go test shows the logs of
// passing tests only with -v, and the counts belong in CI's output.
func reportFaultCounts(t *testing.T, line string) {
	path := os.Getenv("KPROD_FAULT_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("cannot write the fault report: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", t.Name(), line)
}

// testLogger sends the producer's warnings and errors to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
