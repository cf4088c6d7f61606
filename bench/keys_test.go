package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/murmur"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The keys are ProducerPerformance's --key-distribution random ones: the
// decimal text of an integer in [0, n), every one of them drawn.
func TestKeySet(t *testing.T) {
	if k := newKeySet(0).next(); k != nil {
		t.Fatalf("no -keys: key %q, want nil", k)
	}
	ks := newKeySet(20)
	seen := map[string]bool{}
	for range 2000 {
		k := string(ks.next())
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n >= 20 || strconv.Itoa(n) != k {
			t.Fatalf("key %q is not the decimal text of an integer in [0, 20)", k)
		}
		seen[k] = true
	}
	if len(seen) != 20 {
		t.Errorf("2,000 draws of 20 keys gave %d distinct ones", len(seen))
	}
}

// With -keys the Java client is asked for the same keys.
func TestJavaCommandKeys(t *testing.T) {
	o := &options{records: 10, javaLibs: "/nowhere"}
	w := &workload{brokers: []string{"b:9092"}, topic: "t", size: 100, batch: 16384, compression: "none"}
	if args := javaCommand(context.Background(), o, w, 0, "l").Args; slices.Contains(args, "--key-distribution") {
		t.Errorf("unkeyed workload: %v", args)
	}
	w.keys = 60
	args := strings.Join(javaCommand(context.Background(), o, w, 0, "l").Args, " ")
	if !strings.Contains(args, "--key-distribution random --record-key-range 60") {
		t.Errorf("keyed workload (60 keys): %s", args)
	}
}

// Every Go client puts a keyed record where Java's default partitioner
// would, murmur2 of the key modulo the partitions, so that a keyed
// workload spreads the same records over the same partitions for all of
// them.
func TestKeyedClientsPartitionByMurmur2(t *testing.T) {
	const partitions, records = 6, 300
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for _, name := range goClientNames() {
		mk := goClients[name]
		if name == "harness" || mk == nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// Created first, as the coordinator does: not every client
			// asks for a topic to be created when it is missing.
			topic := "keyed-" + name
			if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			w := &workload{brokers: c.ListenAddrs(), topic: topic, size: 10, batch: 16384, compression: "none", clientID: "test-" + name, keys: 50}
			a := newAcker()
			p, _, err := mk(w, a)
			if err != nil {
				t.Fatal(err)
			}
			keys, vals := newKeySet(w.keys), newPayloads(w.size, false)
			for range records {
				a.sent++
				if err := p.produce(ctx, keys.next(), vals.next(), time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.wait(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.close(); err != nil {
				t.Fatal(err)
			}
			if a.failed > 0 {
				t.Fatalf("%d of %d records failed: %v", a.failed, records, a.firstErr)
			}

			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(w.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			got, used := 0, map[int32]bool{}
			for got < records {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("read back %d of %d records: %v", got, records, err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					got++
					used[r.Partition] = true
					if want := (murmur.Murmur2(r.Key) & 0x7fffffff) % partitions; r.Partition != want {
						t.Errorf("key %q in partition %d, Java's partitioner: %d", r.Key, r.Partition, want)
					}
				})
			}
			if len(used) != partitions {
				t.Errorf("%d keys over %d partitions used only %d", w.keys, partitions, len(used))
			}
		})
	}
}
