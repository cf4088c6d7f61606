// Command bench runs one producer workload through several Kafka clients
// (kprod, franz-go, sarama, kafka-go, confluent-kafka-go and the Java
// client's ProducerPerformance) against the same cluster, one after
// another, and prints a Markdown table of throughput, latency, CPU and
// memory side by side. See BENCHMARKS.md at the repository root.
//
// The command has three modes:
//
//   - coordinator (the default): creates topics, starts one worker process
//     per client and run, reads the child's resource usage when it exits,
//     and reports medians;
//   - worker (-worker -client NAME): produces the workload with one client
//     and prints one JSON line with its measurements;
//   - kfake server (-kfake-serve): an in-memory franz-go kfake cluster in
//     its own process, so that the broker's CPU is not the client's.
//
// Each client runs in a separate process so that CPU seconds (user+sys)
// and peak RSS (VmHWM) belong to that client alone.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var o options
	o.register(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: bench [flags]\n\n"+
			"Runs one producer workload through each client against the same cluster\n"+
			"and prints a Markdown table. Targets: -target kfake (default: an in-memory\n"+
			"3-broker franz-go kfake cluster in its own process), -target NAME=host:port,...\n"+
			"or -brokers host:port,... for a real cluster.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	var err error
	switch {
	case o.kfakeServe:
		err = serveKfake(o.kfakeBrokers)
	case o.worker:
		err = runWorker(&o)
	default:
		err = coordinate(&o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}
