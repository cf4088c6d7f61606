package testcluster

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestNodeForPort(t *testing.T) {
	t.Setenv("KPROD_KAFKA_PORT_BASE", "")
	for addr, want := range map[string]int{
		"127.0.0.1:29092": 1,
		"127.0.0.1:29093": 2,
		"127.0.0.1:29094": 3,
		"localhost:29094": 3,
		"127.0.0.1:29095": 0,
		"127.0.0.1:29091": 0,
		"127.0.0.1":       0,
		"":                0,
	} {
		if got := NodeForPort(addr); got != want {
			t.Errorf("NodeForPort(%q) = %d, want %d", addr, got, want)
		}
	}
	t.Setenv("KPROD_KAFKA_PORT_BASE", "40000")
	if got := NodeForPort("127.0.0.1:40002"); got != 3 {
		t.Errorf("with base 40000: NodeForPort(127.0.0.1:40002) = %d, want 3", got)
	}
	if got := BrokerAddr(2); got != "127.0.0.1:40001" {
		t.Errorf("BrokerAddr(2) = %q", got)
	}
}

func TestUniqueTopic(t *testing.T) {
	a, b := UniqueTopic(t), UniqueTopic(t)
	if a == b {
		t.Fatalf("two calls gave %q", a)
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			t.Fatalf("illegal character %q in %q", c, a)
		}
	}
}

// TestCluster checks the real cluster: three registered brokers whose ids
// match their ports, and a 6-partition rf=3 topic whose partitions all get a
// leader and a full ISR.
func TestCluster(t *testing.T) {
	brokers := Brokers(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, addr := range brokers {
		ids, err := ProbeBroker(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, []int32{1, 2, 3}) {
			t.Fatalf("%s lists brokers %v, want [1 2 3]", addr, ids)
		}
	}

	cl := Client(t, brokers)
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := md.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.Brokers {
		addr := BrokerAddr(int(b.NodeID))
		if got := NodeForPort(addr); got != int(b.NodeID) || b.Host != "127.0.0.1" || int(b.Port) != PortBase()+int(b.NodeID)-1 {
			t.Errorf("broker %d advertises %s:%d (NodeForPort %d)", b.NodeID, b.Host, b.Port, got)
		}
	}

	topic := UniqueTopic(t)
	CreateTopic(t, brokers, topic, 6, 3, map[string]string{"min.insync.replicas": "2"})
	leaders := Leaders(t, brokers, topic)
	if len(leaders) != 6 {
		t.Fatalf("%d partitions, want 6: %v", len(leaders), leaders)
	}
	for p, l := range leaders {
		if l < 1 || l > NumNodes {
			t.Errorf("partition %d: leader %d", p, l)
		}
	}
	t.Logf("topic %s leaders: %v", topic, leaders)

	// A passing test's topic is deleted before the next fault test.
	var sub string
	t.Run("deleted", func(t *testing.T) {
		sub = UniqueTopic(t)
		CreateTopic(t, brokers, sub, 1, 3, nil)
	})
	deletePassedTopics(t)
	if err := WaitFor(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		resp, err := metadataRequest(sub).RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != fkerr.UnknownTopicOrPartition.Code {
			return fmt.Errorf("topic %s still exists after its test passed", sub)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFaults kills the leader of a partition, checks that another node takes
// over, restarts it, and pauses/resumes a node: the helpers other packages'
// fault tests rely on.
func TestFaults(t *testing.T) {
	brokers := Brokers(t)
	SkipIfShort(t, "kills and restarts a broker")
	topic := UniqueTopic(t)
	CreateTopic(t, brokers, topic, 1, 3, nil)
	old := int(Leaders(t, brokers, topic)[0])

	Kill(t, old)
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := int(Leaders(t, brokers, topic)[0])
		if l > 0 && l != old {
			t.Logf("partition 0: leader %d killed, new leader %d", old, l)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 still led by %d 30s after killing it", l)
		}
		time.Sleep(200 * time.Millisecond)
	}
	Restart(t, old)
	WaitISR(t, brokers, topic, 3, 60*time.Second)

	Pause(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := Ping(ctx, []string{BrokerAddr(3)})
	cancel()
	if err == nil {
		// Say which process answered: a flake seen once in CI, cause
		// unknown (see scripts/kafka-cluster.sh, wait_stopped).
		ps, _ := exec.Command("bash", "-c", "ps -eo pid,stat,lstart,args | grep '[k]afka[.]Kafka' | cut -c1-200; ss -ltnp 2>/dev/null | grep ':"+strconv.Itoa(PortBase()+2)+" '").CombinedOutput()
		t.Errorf("paused node 3 answered ApiVersions; the brokers' processes:\n%s", ps)
	}
	Resume(t, 3)
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := WaitFor(ctx, 200*time.Millisecond, func(ctx context.Context) error {
		return Probe(ctx, brokers, []int32{1, 2, 3})
	}); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}
