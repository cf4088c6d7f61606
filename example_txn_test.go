package kprod_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"strings"
	"time"

	"github.com/kprod/kprod"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exactly-once consume-transform-produce: records are read from "in",
// transformed and written to "out", and the consumer's offsets are
// committed in the same transaction as the output. Either both happen or
// neither does, so after a crash the input is processed again only if its
// output is not visible. kprod is only a producer; the consumer here is
// franz-go (any Kafka consumer that reads read_committed and reports its
// group generation and member id will do). The cluster is an in-process
// one (kfake), standing in for Kafka.
func Example_transactions() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "in", "out"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	// Some input.
	cfg := kprod.DefaultConfig()
	cfg.BootstrapServers = brokers
	seed, err := kprod.NewProducer(cfg)
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range []string{"exactly", "once", "across", "partitions"} {
		if err := seed.SendSync(ctx, kprod.StringRecord("in", w, w)); err != nil {
			log.Fatal(err)
		}
	}
	seed.Close(ctx)

	// The consumer: in a group, reading committed records only, and not
	// committing offsets itself: the transactions do.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("uppercaser"), kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()

	// The transactional producer. Its transactional.id must stay the same
	// across restarts of this instance: InitTransactions then fences the
	// instance's previous incarnation and aborts what it left open.
	cfg.TransactionalID = "uppercaser-0"
	p, err := kprod.NewProducer(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		log.Fatal(err)
	}

	for done := 0; done < 4; {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			log.Fatal(ctx.Err())
		}
		if fetches.Empty() {
			continue
		}
		if err := p.BeginTransaction(); err != nil {
			log.Fatal(err)
		}
		offsets := map[string]map[int32]kprod.Offset{}
		fetches.EachRecord(func(r *kgo.Record) {
			// With no callback, any record that fails makes the
			// commit fail, so the callback can be nil here.
			p.Send(ctx, kprod.StringRecord("out", string(r.Key), strings.ToUpper(string(r.Value))), nil)
			if offsets[r.Topic] == nil {
				offsets[r.Topic] = map[int32]kprod.Offset{}
			}
			offsets[r.Topic][r.Partition] = kprod.Offset{Offset: r.Offset + 1, LeaderEpoch: r.LeaderEpoch}
			done++
		})
		member, generation := consumer.GroupMetadata()
		group := kprod.GroupMetadata{GroupID: "uppercaser", GenerationID: generation, MemberID: member}
		err := p.SendOffsetsToTransaction(ctx, offsets, group)
		if err == nil {
			err = p.CommitTransaction(ctx)
			for errors.Is(err, kprod.ErrTransactionTimeout) && ctx.Err() == nil {
				err = p.CommitTransaction(ctx) // the outcome was not known yet
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, kprod.ErrFatal): // fenced by a newer incarnation: stop
			log.Fatal(err)
		default: // e.g. kprod.ErrTransactionAbortable
			if err := p.AbortTransaction(ctx); err != nil {
				log.Fatal(err)
			}
			// A real application now rewinds the consumer to the
			// group's committed offsets and processes the records again.
			log.Fatal(err)
		}
	}

	// What read_committed consumers of "out" see.
	reader, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer reader.Close()
	var out []string
	for len(out) < 4 {
		fetches := reader.PollFetches(ctx)
		if ctx.Err() != nil {
			log.Fatal(ctx.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	sort.Strings(out)
	fmt.Println(strings.Join(out, " "))
	// Output:
	// ACROSS EXACTLY ONCE PARTITIONS
}
