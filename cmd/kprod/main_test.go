package main

import (
	"testing"

	"go.uber.org/goleak"
)

// Run must leave nothing behind: the producer, the embedded cluster, the
// reporter and the stdin reader all end before it returns. kfake's cluster
// loop can outlive Cluster.Close by a moment; it is the test double's
// goroutine, not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).beginSleptControl"),
	)
}
