package kprod_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kprod/kprod"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The minimal library use: create, send, flush, close. (The example runs
// against an in-process cluster; give your brokers instead.)
func Example() {
	cluster, err := kfake.NewCluster(kfake.SeedTopics(3, "events"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	cfg := kprod.DefaultConfig()
	cfg.BootstrapServers = cluster.ListenAddrs() // e.g. []string{"127.0.0.1:9092"}
	p, err := kprod.NewProducer(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// Asynchronous: the callback runs once the broker has the record.
	p.Send(ctx, &kprod.Record{Topic: "events", Key: []byte("user-1"), Value: []byte("signed up")},
		func(r *kprod.Record, err error) {
			if err != nil {
				log.Printf("not delivered: %v", err)
				return
			}
			fmt.Printf("delivered to partition %d at offset %d\n", r.Partition, r.Offset)
		})
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}

	// Synchronous: wait for the outcome.
	r := &kprod.Record{Topic: "events", Key: []byte("user-1"), Value: []byte("logged in")}
	if err := p.SendSync(ctx, r); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("delivered to partition %d at offset %d\n", r.Partition, r.Offset)

	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Close(closeCtx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// delivered to partition 2 at offset 0
	// delivered to partition 2 at offset 1
}

// Java property names work as they are, from a map or a
// producer.properties file (ConfigFromFile).
func ExampleConfig_Set() {
	cfg := kprod.DefaultConfig()
	for k, v := range map[string]string{"linger.ms": "20", "compression.type": "lz4", "acks": "all"} {
		if err := cfg.Set(k, v); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(cfg.Linger, cfg.CompressionType, cfg.Acks)
	err := cfg.Set("linger.ms", "soon")
	fmt.Println(err)
	// Output:
	// 20ms lz4 all
	// kprod: invalid configuration: linger.ms=soon: must be a whole number of milliseconds (a Java long)
}
