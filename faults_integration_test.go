package kprod

import (
	"testing"
	"time"

	"github.com/kprod/kprod/internal/testcluster"
)

// The fault suite on the real cluster (replication factor 3,
// min.insync.replicas=2). Each scenario produces a known sequence while a
// broker is killed, paused or restarted, reads everything back with
// franz-go, and prints lost / duplicated / reordered counts. The
// idempotent producer must show 0 lost, 0 duplicated, 0 reordered, and
// every callback exactly once; at-least-once (acks=all, idempotence off)
// must lose nothing; acks=1 and acks=0 only report their counts: they may
// lose acknowledged records when a leader dies (see docs/guarantees.md).

const faultRecords = 200_000

type faultMode struct {
	name  string
	setup func(*Config)
	check func(faultCounts, *testing.T, string)
}

var (
	modeIdempotent = faultMode{"idempotent", func(*Config) {}, faultCounts.assertExactlyOnceT}
	modeAtLeast    = faultMode{"at-least-once", func(c *Config) { off := false; c.EnableIdempotence = &off },
		faultCounts.assertAtLeastOnceT}
	modeAcks1 = faultMode{"acks=1", func(c *Config) { c.Acks = AcksLeader }, nil}
	modeAcks0 = faultMode{"acks=0", func(c *Config) { c.Acks = AcksNone }, nil}
)

func (c faultCounts) assertExactlyOnceT(t *testing.T, name string) { c.assertExactlyOnce(t, name) }
func (c faultCounts) assertAtLeastOnceT(t *testing.T, name string) { c.assertAtLeastOnce(t, name) }

// runFault creates a topic, produces faultRecords records over 6
// partitions with mode's settings, calling inject as records go out, and
// checks the mode's promise.
func runFault(t *testing.T, brokers []string, scenario string, mode faultMode, inject func(t *testing.T, topic string, sent int)) {
	t.Helper()
	topic := testcluster.UniqueTopic(t)
	testcluster.CreateTopic(t, brokers, topic, 6, 3, map[string]string{"min.insync.replicas": "2"})
	cfg := DefaultConfig()
	cfg.BootstrapServers = brokers
	cfg.RequestTimeout = 5 * time.Second
	cfg.DeliveryTimeout = 120 * time.Second
	cfg.Logger = testLogger(t)
	mode.setup(&cfg)
	p := newTestProducer(t, cfg)
	name := scenario + " / " + mode.name
	f := newFaultRun(name, topic, 6, faultRecords/6)
	f.produce(t, p, func(sent int) { inject(t, topic, sent) }, 3*time.Minute)
	counts := f.check(t, brokers)
	if mode.check != nil {
		mode.check(counts, t, name)
	} else if counts.extraCalls != 0 || counts.acked+counts.failed != counts.sent {
		t.Fatalf("%s: every callback must run exactly once: %s", name, counts)
	}
	// Leave the cluster whole for the next scenario.
	testcluster.WaitISR(t, brokers, topic, 3, 90*time.Second)
}

func TestIntegrationFaultKillLeader(t *testing.T) {
	brokers := testcluster.Brokers(t)
	for _, mode := range []faultMode{modeIdempotent, modeAtLeast, modeAcks1, modeAcks0} {
		t.Run(mode.name, func(t *testing.T) {
			var victim int
			runFault(t, brokers, "kill -9 of a partition leader", mode, func(t *testing.T, topic string, sent int) {
				switch sent {
				case faultRecords / 4:
					victim = int(testcluster.Leaders(t, brokers, topic)[0])
					t.Logf("kill -9 node %d (leader of partition 0) after %d records", victim, sent)
					testcluster.Kill(t, victim)
				case faultRecords * 3 / 4:
					t.Logf("restarting node %d", victim)
					testcluster.Restart(t, victim)
				}
			})
		})
	}
}

func TestIntegrationFaultPauseBroker(t *testing.T) {
	brokers := testcluster.Brokers(t)
	t.Run(modeIdempotent.name, func(t *testing.T) {
		runFault(t, brokers, "SIGSTOP longer than request.timeout.ms", modeIdempotent, func(t *testing.T, topic string, sent int) {
			if sent == faultRecords/4 {
				victim := int(testcluster.Leaders(t, brokers, topic)[0])
				t.Logf("SIGSTOP node %d for 8s (request.timeout.ms is 5s)", victim)
				testcluster.Pause(t, victim)
				time.Sleep(8 * time.Second)
				testcluster.Resume(t, victim)
			}
		})
	})
}

func TestIntegrationFaultRollingRestart(t *testing.T) {
	brokers := testcluster.Brokers(t)
	t.Run(modeIdempotent.name, func(t *testing.T) {
		runFault(t, brokers, "rolling restart of all three brokers", modeIdempotent, func(t *testing.T, topic string, sent int) {
			for i, node := range []int{1, 2, 3} {
				if sent == faultRecords*(i+1)/5 {
					t.Logf("restarting node %d after %d records", node, sent)
					testcluster.Kill(t, node)
					testcluster.Restart(t, node)
					testcluster.WaitISR(t, brokers, topic, 3, 90*time.Second)
				}
			}
		})
	})
}
