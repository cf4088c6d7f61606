package kprod

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIntegrationAcks produces 100,000 keyed records over 6 partitions
// with each acks setting to the real cluster and reads them back with an
// independent client (franz-go): every acknowledged record is there once,
// at the offset its callback reported, in send order per partition, with
// key, value, headers and timestamp intact.
func TestIntegrationAcks(t *testing.T) {
	brokers := testcluster.Brokers(t)
	for _, acks := range []Acks{AcksNone, AcksLeader, AcksAll} {
		t.Run("acks="+acks.String(), func(t *testing.T) {
			topic := testcluster.UniqueTopic(t)
			testcluster.CreateTopic(t, brokers, topic, 6, 3, nil)
			cfg := DefaultConfig()
			cfg.BootstrapServers = brokers
			cfg.Acks = acks
			p := newTestProducer(t, cfg)

			const n = 100_000
			recs := make([]*Record, n)
			base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			for i := range recs {
				recs[i] = &Record{
					Topic:     topic,
					Key:       []byte("key-" + strconv.Itoa(i%997)),
					Value:     []byte("value-" + strconv.Itoa(i)),
					Headers:   []Header{{Key: "seq", Value: []byte(strconv.Itoa(i))}, {Key: "nil"}},
					Timestamp: base.Add(time.Duration(i) * time.Millisecond),
				}
			}
			sendAllOK(t, p, recs)

			got := consumeAll(t, brokers, topic, n)
			bySeq := make(map[int]*kgo.Record, n)
			lastSeq := map[int32]int{}
			for _, kr := range got {
				seq, err := strconv.Atoi(string(kr.Headers[0].Value))
				if err != nil {
					t.Fatalf("bad seq header %q", kr.Headers[0].Value)
				}
				if bySeq[seq] != nil {
					t.Fatalf("record %d appears twice", seq)
				}
				bySeq[seq] = kr
				if last, ok := lastSeq[kr.Partition]; ok && seq < last {
					t.Fatalf("partition %d: record %d after %d: out of send order", kr.Partition, seq, last)
				}
				lastSeq[kr.Partition] = seq
			}
			for i, r := range recs {
				kr := bySeq[i]
				if kr == nil {
					t.Fatalf("record %d was acknowledged but is not in the log", i)
				}
				if string(kr.Key) != string(r.Key) || string(kr.Value) != string(r.Value) ||
					len(kr.Headers) != 2 || kr.Headers[1].Key != "nil" || kr.Headers[1].Value != nil ||
					!kr.Timestamp.Equal(r.Timestamp) {
					t.Fatalf("record %d differs: got key %q value %q headers %v ts %v", i, kr.Key, kr.Value, kr.Headers, kr.Timestamp)
				}
				if kr.Partition != r.Partition {
					t.Fatalf("record %d: callback said partition %d, log has it in %d", i, r.Partition, kr.Partition)
				}
				if acks == AcksNone {
					if r.Offset != -1 {
						t.Fatalf("acks=0 record %d: offset %d, want -1", i, r.Offset)
					}
				} else if kr.Offset != r.Offset {
					t.Fatalf("record %d: callback said offset %d, log has it at %d", i, r.Offset, kr.Offset)
				}
			}
		})
	}
}

// sendAllOK sends every record, flushes, waits for every callback, and
// fails the test if any record failed.
func sendAllOK(t *testing.T, p *Producer, recs []*Record) {
	t.Helper()
	var mu sync.Mutex
	var failed []error
	var wg sync.WaitGroup
	wg.Add(len(recs))
	for _, r := range recs {
		p.Send(context.Background(), r, func(_ *Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
			}
		})
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of %d records failed, first: %v", len(failed), len(recs), failed[0])
	}
}

// consumeAll reads topic from the start until n records arrived (or 60 s).
func consumeAll(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := testcluster.Client(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d records within 60s", len(out), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s[%d]: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestIntegrationRecordTooLarge(t *testing.T) {
	brokers := testcluster.Brokers(t)
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 1, 3, nil)
	cfg := DefaultConfig()
	cfg.BootstrapServers = brokers
	p := newTestProducer(t, cfg)
	err := p.SendSync(context.Background(), &Record{Topic: topic, Value: make([]byte, 2<<20)})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("2 MiB record with max.request.size 1 MiB: got %v, want ErrRecordTooLarge", err)
	}
	ok := &Record{Topic: topic, Value: []byte("fits")}
	if err := p.SendSync(context.Background(), ok); err != nil {
		t.Fatalf("a record after the oversized one: %v", err)
	}
}

func TestIntegrationUnknownTopic(t *testing.T) {
	brokers := testcluster.Brokers(t)
	cfg := DefaultConfig()
	cfg.BootstrapServers = brokers
	cfg.AllowAutoCreateTopics = false
	cfg.MaxBlock = 2 * time.Second
	p := newTestProducer(t, cfg)
	topic := testcluster.UniqueTopic(t)
	start := time.Now()
	err := p.SendSync(context.Background(), &Record{Topic: topic, Value: []byte("x")})
	if !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("got %v, want ErrUnknownTopic", err)
	}
	if msg := err.Error(); !strings.Contains(msg, topic) {
		t.Fatalf("error %q does not name the topic", msg)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("reported after %v with max.block.ms 2s", el)
	}
}
