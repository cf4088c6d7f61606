package kprod

import (
	"strconv"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
)

// TestIntegrationSplitTooLargeBatch: with batch.size (64 KiB) far above
// the topic's max.message.bytes (4 KiB), Kafka refuses the batches with
// MESSAGE_TOO_LARGE, the producer splits them, and every record is
// written once, at the offset its callback reported, in send order per
// partition.
func TestIntegrationSplitTooLargeBatch(t *testing.T) {
	brokers := testcluster.Brokers(t)
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 2, 3, map[string]string{"max.message.bytes": "4096"})
	cfg := DefaultConfig()
	cfg.BootstrapServers = brokers
	cfg.BatchSize = 64 << 10
	cfg.Linger = 100 * time.Millisecond
	p := newTestProducer(t, cfg)

	const n = 20_000
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = &Record{
			Topic:   topic,
			Key:     []byte("key-" + strconv.Itoa(i%101)),
			Value:   []byte("value-" + strconv.Itoa(i) + "-padding-padding-padding-padding-padding-padding-padding"),
			Headers: []Header{{Key: "seq", Value: []byte(strconv.Itoa(i))}},
		}
	}
	sendAllOK(t, p, recs)
	if m := p.Metrics(); m.BatchSplitTotal == 0 {
		t.Fatal("batch-split-total is 0: the 64 KiB batches were not refused, so the test proves nothing")
	}

	got := consumeAll(t, brokers, topic, n)
	if len(got) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
	seen := make([]bool, n)
	lastSeq := map[int32]int{}
	for _, kr := range got {
		seq, err := strconv.Atoi(string(kr.Headers[0].Value))
		if err != nil || seq < 0 || seq >= n {
			t.Fatalf("bad seq header %q", kr.Headers[0].Value)
		}
		if seen[seq] {
			t.Fatalf("record %d appears twice", seq)
		}
		seen[seq] = true
		if last, ok := lastSeq[kr.Partition]; ok && seq < last {
			t.Fatalf("partition %d: record %d after %d: out of send order", kr.Partition, seq, last)
		}
		lastSeq[kr.Partition] = seq
		r := recs[seq]
		if kr.Partition != r.Partition || kr.Offset != r.Offset || string(kr.Value) != string(r.Value) {
			t.Fatalf("record %d: callback said %d@%d, log has %d@%d (value %q)", seq, r.Partition, r.Offset, kr.Partition, kr.Offset, kr.Value)
		}
	}
}
