package kprod

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine of ours behind: Close has to wait for
// all that the producer started (a leaky Close is the most common
// complaint about Go Kafka clients). kfake's own cluster loop can outlive
// Cluster.Close by a moment when a test's SleepControl was released just
// before; it is the test double's goroutine, not the producer's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).run"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).beginSleptControl"),
		goleak.IgnoreAnyFunction("github.com/twmb/franz-go/pkg/kfake.(*Cluster).runControl.func1"),
	)
}
