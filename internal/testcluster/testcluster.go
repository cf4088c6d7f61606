// Package testcluster connects integration tests to the real 3-broker Kafka
// cluster that scripts/kafka-cluster.sh runs on 127.0.0.1, and lets them
// break it (kill, pause, restart a node) and create topics on it.
//
// Gating: Brokers skips the test unless KPROD_INTEGRATION=1 or CI=true; under
// either one an unreachable cluster fails the test instead (CI never skips).
// bash scripts/test.sh starts the cluster and sets everything.
//
// Node numbers: script node N has Kafka node.id N and broker port
// KPROD_KAFKA_PORT_BASE+N-1 (29092, 29093, 29094 by default), so the leader
// id in a Metadata response is the number to pass to Kill, Pause, Restart.
//
// Disruptive helpers (Kill, Pause, Resume, Restart) take a lock on the
// cluster that serializes such tests across test binaries, and undo what the
// test left broken when it ends: paused nodes are resumed, killed nodes are
// restarted.
package testcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NumNodes is the number of nodes (each a broker and a controller).
const NumNodes = 3

// DefaultPortBase is node 1's broker port unless KPROD_KAFKA_PORT_BASE is set.
const DefaultPortBase = 29092

// PortBase returns node 1's broker port.
func PortBase() int {
	if s := os.Getenv("KPROD_KAFKA_PORT_BASE"); s != "" {
		if p, err := strconv.Atoi(s); err == nil && p > 0 {
			return p
		}
	}
	return DefaultPortBase
}

// BrokerAddr returns node's broker address, e.g. 127.0.0.1:29093 for node 2.
func BrokerAddr(node int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(PortBase()+node-1))
}

// BootstrapAddrs returns KPROD_BROKERS split on commas if it is set, else the
// three default broker addresses. It does not check anything.
func BootstrapAddrs() []string {
	if s := os.Getenv("KPROD_BROKERS"); strings.TrimSpace(s) != "" {
		var out []string
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				out = append(out, a)
			}
		}
		return out
	}
	return ScriptAddrs()
}

// NodeForPort maps a broker address to its node number ("127.0.0.1:29093" ->
// 2 with the default ports). It returns 0 for an address that is not one of
// the cluster's broker ports.
func NodeForPort(addr string) int {
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(ps)
	if err != nil {
		return 0
	}
	if n := p - PortBase() + 1; n >= 1 && n <= NumNodes {
		return n
	}
	return 0
}

func integrationWanted() (wanted, mustNotSkip bool) {
	integ := os.Getenv("KPROD_INTEGRATION") == "1"
	ci := os.Getenv("CI")
	inCI := ci == "true" || ci == "1"
	return integ || inCI, inCI
}

// SkipIfShort skips a long test under go test -short, for a quick local
// run. Under CI (CI=true), which runs every test, -short is a mistake:
// the test fails and says so instead of skipping.
func SkipIfShort(t testing.TB, why string) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if _, inCI := integrationWanted(); inCI {
		t.Fatalf("%s: -short would skip it, but CI must run every test: drop -short", why)
	}
	t.Skip(why + "; skipped with -short")
}

// Brokers returns the cluster's bootstrap addresses after checking that every
// one of them answers ApiVersions. Without KPROD_INTEGRATION=1 or CI=true it
// skips the test.
//
// If a node does not answer and no test holds the fault lock (an earlier
// fault test died before undoing its faults, e.g. on a timeout), it heals the
// cluster first (kafka-cluster.sh heal). If another test holds the lock, that
// test is breaking the cluster on purpose, and one answering broker is enough.
func Brokers(t testing.TB) []string {
	t.Helper()
	if wanted, _ := integrationWanted(); !wanted {
		t.Skip("set KPROD_INTEGRATION=1 and run scripts/kafka-cluster.sh up")
	}
	addrs := BootstrapAddrs()
	fail := func(err error) {
		t.Helper()
		t.Fatalf("the Kafka test cluster at %s is not reachable: %v\n"+
			"start it with `bash scripts/kafka-cluster.sh up` (see its `status` and `logs N`), "+
			"or run everything with `bash scripts/test.sh`", strings.Join(addrs, ","), err)
	}
	ping := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return WaitFor(ctx, 250*time.Millisecond, func(ctx context.Context) error {
			return Ping(ctx, addrs)
		})
	}
	err := ping(10 * time.Second)
	if err == nil {
		return addrs
	}
	if os.Getenv("KPROD_BROKERS") != "" && !slices.Equal(addrs, ScriptAddrs()) {
		fail(err) // not our script's cluster: nothing to heal
	}
	lock, ok := tryFaultLock()
	if !ok {
		if anyAnswers(addrs) {
			t.Logf("testcluster: another test is breaking the cluster: %v", err)
			return addrs
		}
		fail(err)
	}
	t.Logf("testcluster: healing the cluster: %v", err)
	func() {
		defer lock.Close()
		Script(t, "heal")
	}()
	if err := ping(20 * time.Second); err != nil {
		fail(err)
	}
	return addrs
}

// ScriptAddrs returns the broker addresses of the cluster that
// scripts/kafka-cluster.sh runs, ignoring KPROD_BROKERS.
func ScriptAddrs() []string {
	out := make([]string, NumNodes)
	for i := range out {
		out[i] = BrokerAddr(i + 1)
	}
	return out
}

func anyAnswers(addrs []string) bool {
	for _, a := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := Ping(ctx, []string{a})
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------- faults --

var (
	repoRootOnce sync.Once
	repoRoot     string
	repoRootErr  error
)

func findRepoRoot() (string, error) {
	repoRootOnce.Do(func() {
		if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
			root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
			if _, err := os.Stat(filepath.Join(root, "scripts", "kafka-cluster.sh")); err == nil {
				repoRoot = root
				return
			}
		}
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			repoRootErr = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			repoRootErr = fmt.Errorf("not inside the kprod module")
			return
		}
		repoRoot = filepath.Dir(gomod)
	})
	return repoRoot, repoRootErr
}

func stateDir() string {
	if s := os.Getenv("KPROD_STATE"); s != "" {
		return s
	}
	return "/tmp/kprod-kafka"
}

// Script runs scripts/kafka-cluster.sh with args and fails the test if it
// fails.
func Script(t testing.TB, args ...string) string {
	t.Helper()
	root, err := findRepoRoot()
	if err != nil {
		t.Fatalf("testcluster: finding the repository root: %v", err)
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "scripts", "kafka-cluster.sh")}, args...)...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka-cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// faultState is what one test has broken, to undo at its end.
type faultState struct {
	lock   *os.File
	killed map[int]bool
	paused map[int]bool
}

var (
	faultsMu sync.Mutex
	faults   = map[testing.TB]*faultState{}
)

func openFaultLock() (*os.File, error) {
	if err := os.MkdirAll(stateDir(), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(stateDir(), ".fault.lock"), os.O_CREATE|os.O_RDWR, 0o644)
}

// tryFaultLock takes the fault lock if no test holds it; closing the file
// releases it.
func tryFaultLock() (*os.File, bool) {
	f, err := openFaultLock()
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// faultsFor takes the cross-process fault lock for t (once per test) and
// registers the cleanup that heals the cluster and releases the lock.
func faultsFor(t testing.TB) *faultState {
	t.Helper()
	faultsMu.Lock()
	fs := faults[t]
	faultsMu.Unlock()
	if fs != nil {
		return fs
	}
	deletePassedTopics(t)
	f, err := openFaultLock()
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	// Blocks while another test (in this or another test binary) is
	// breaking the cluster.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("testcluster: locking %s: %v", f.Name(), err)
	}
	fs = &faultState{lock: f, killed: map[int]bool{}, paused: map[int]bool{}}
	faultsMu.Lock()
	faults[t] = fs
	faultsMu.Unlock()
	t.Cleanup(func() {
		defer func() {
			faultsMu.Lock()
			delete(faults, t)
			faultsMu.Unlock()
			f.Close() // releases the flock
		}()
		for n := range fs.paused {
			Script(t, "resume", strconv.Itoa(n))
		}
		for n := range fs.killed {
			Script(t, "restart", strconv.Itoa(n))
		}
	})
	return fs
}

func checkNode(t testing.TB, node int) {
	t.Helper()
	if node < 1 || node > NumNodes {
		t.Fatalf("testcluster: node %d out of range 1..%d", node, NumNodes)
	}
}

// Kill SIGKILLs node (1..3). The node is restarted when the test ends unless
// the test calls Restart itself.
func Kill(t testing.TB, node int) {
	t.Helper()
	checkNode(t, node)
	fs := faultsFor(t)
	Script(t, "kill", strconv.Itoa(node))
	fs.killed[node] = true
	delete(fs.paused, node)
}

// Pause SIGSTOPs node: its sockets stay open but it answers nothing. The node
// is resumed when the test ends unless the test calls Resume itself.
func Pause(t testing.TB, node int) {
	t.Helper()
	checkNode(t, node)
	fs := faultsFor(t)
	Script(t, "pause", strconv.Itoa(node))
	fs.paused[node] = true
}

// Resume SIGCONTs a paused node.
func Resume(t testing.TB, node int) {
	t.Helper()
	checkNode(t, node)
	fs := faultsFor(t)
	Script(t, "resume", strconv.Itoa(node))
	delete(fs.paused, node)
}

// Restart starts node again (stopping it gracefully first if it runs) and
// returns once it answers metadata and is registered with the controller.
// It does not wait for the node's replicas to catch up; use WaitISR for that.
func Restart(t testing.TB, node int) {
	t.Helper()
	checkNode(t, node)
	fs := faultsFor(t)
	Script(t, "restart", strconv.Itoa(node))
	delete(fs.killed, node)
	delete(fs.paused, node)
}

// ---------------------------------------------------------------- topics --

// UniqueTopic returns a topic name made from the test name and random bytes.
// If the test passes, the topic is deleted before the next fault test (see
// passedTopics).
func UniqueTopic(t testing.TB) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	name := []byte(t.Name())
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			name[i] = '-'
		}
	}
	if len(name) > 150 {
		name = name[:150]
	}
	topic := "kprod-" + string(name) + "-" + hex.EncodeToString(b[:])
	if wanted, _ := integrationWanted(); wanted {
		t.Cleanup(func() {
			if !t.Failed() {
				passedMu.Lock()
				passedTopics = append(passedTopics, topic)
				passedMu.Unlock()
			}
		})
	}
	return topic
}

// The topics of tests that passed, deleted before the next fault test
// breaks the cluster: a restarted node loads (and after a kill -9
// recovers) every partition it holds, so the topics a suite leaves
// behind slow each restart (5s for 250 partitions here). A failed test's
// topic stays, to be looked at. One request for all of them: each
// deletion takes the controllers a round of their quorum.
var (
	passedMu     sync.Mutex
	passedTopics []string
)

// deletePassedTopics deletes passedTopics; a failure is only logged.
func deletePassedTopics(t testing.TB) {
	passedMu.Lock()
	topics := passedTopics
	passedTopics = nil
	passedMu.Unlock()
	if len(topics) == 0 {
		return
	}
	cl, err := newClient(BootstrapAddrs()...)
	if err != nil {
		t.Logf("testcluster: deleting %d topics: %v", len(topics), err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 15000
	for _, topic := range topics {
		req.TopicNames = append(req.TopicNames, topic)
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Logf("testcluster: deleting %d topics: %v", len(topics), err)
		return
	}
	for _, rt := range resp.Topics {
		if err := fkerr.ErrorForCode(rt.ErrorCode); err != nil && !errors.Is(err, fkerr.UnknownTopicOrPartition) {
			name := "a topic"
			if rt.Topic != nil {
				name = *rt.Topic
			}
			t.Logf("testcluster: deleting %s: %v", name, err)
		}
	}
}

// Client returns a franz-go client for brokers, closed when the test ends;
// for admin requests (kmsg ... RequestWith), not for the code under test.
func Client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates topic name and waits (up to 60s) until every broker's
// metadata shows all its partitions with a leader and a full ISR. configs may
// be nil (e.g. {"min.insync.replicas": "2"}).
func CreateTopic(t testing.TB, brokers []string, name string, partitions int32, rf int16, configs map[string]string) {
	t.Helper()
	cl := Client(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name = k
		c.Value = kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("testcluster: CreateTopics %s: %v", name, err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("testcluster: CreateTopics %s: %d topics in response", name, len(resp.Topics))
	}
	if err := fkerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = ": " + *m
		}
		t.Fatalf("testcluster: CreateTopics %s: %v%s", name, err, msg)
	}
	if err := WaitFor(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		return topicReady(ctx, cl, name, partitions, int(rf))
	}); err != nil {
		t.Fatalf("testcluster: topic %s not ready: %v", name, err)
	}
}

// topicReady checks, on every broker in the cluster's metadata, that topic
// has n partitions, each with a leader and an ISR of at least isr replicas.
func topicReady(ctx context.Context, cl *kgo.Client, topic string, n int32, isr int) error {
	all := kmsg.NewPtrMetadataRequest()
	all.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := all.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, br := range resp.Brokers {
		md := metadataRequest(topic)
		raw, err := cl.Broker(int(br.NodeID)).Request(ctx, md)
		if err != nil {
			return fmt.Errorf("broker %d: %w", br.NodeID, err)
		}
		if err := partitionsReady(raw.(*kmsg.MetadataResponse), topic, n, isr); err != nil {
			return fmt.Errorf("broker %d: %w", br.NodeID, err)
		}
	}
	return nil
}

func metadataRequest(topics ...string) *kmsg.MetadataRequest {
	md := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(tp)
		md.Topics = append(md.Topics, mt)
	}
	return md
}

func partitionsReady(resp *kmsg.MetadataResponse, topic string, n int32, isr int) error {
	if len(resp.Topics) != 1 {
		return fmt.Errorf("%d topics in metadata", len(resp.Topics))
	}
	tp := resp.Topics[0]
	if err := fkerr.ErrorForCode(tp.ErrorCode); err != nil {
		return fmt.Errorf("topic %s: %w", topic, err)
	}
	if int32(len(tp.Partitions)) != n {
		return fmt.Errorf("topic %s: %d of %d partitions", topic, len(tp.Partitions), n)
	}
	for _, p := range tp.Partitions {
		if err := fkerr.ErrorForCode(p.ErrorCode); err != nil {
			return fmt.Errorf("%s/%d: %w", topic, p.Partition, err)
		}
		if p.Leader < 0 {
			return fmt.Errorf("%s/%d: no leader", topic, p.Partition)
		}
		if len(p.ISR) < isr {
			return fmt.Errorf("%s/%d: ISR %v, want %d replicas", topic, p.Partition, p.ISR, isr)
		}
	}
	return nil
}

// Leaders returns partition -> leader node id (== script node number) for
// topic, as the cluster's metadata says now; -1 for a partition without one.
func Leaders(t testing.TB, brokers []string, topic string) map[int32]int32 {
	t.Helper()
	cl := Client(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := metadataRequest(topic).RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("testcluster: metadata for %s: %v", topic, err)
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("testcluster: metadata for %s: %d topics", topic, len(resp.Topics))
	}
	if err := fkerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("testcluster: metadata for %s: %v", topic, err)
	}
	out := make(map[int32]int32, len(resp.Topics[0].Partitions))
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.Leader
	}
	return out
}

// WaitISR waits (up to timeout) until every partition of topic has a leader
// and at least isr in-sync replicas on every live broker, e.g. after Restart
// to know the restarted node has caught up.
func WaitISR(t testing.TB, brokers []string, topic string, isr int, timeout time.Duration) {
	t.Helper()
	cl := Client(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := WaitFor(ctx, 200*time.Millisecond, func(ctx context.Context) error {
		resp, err := metadataRequest(topic).RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("%d topics in metadata", len(resp.Topics))
		}
		return topicReady(ctx, cl, topic, int32(len(resp.Topics[0].Partitions)), isr)
	}); err != nil {
		t.Fatalf("testcluster: %s: ISR never reached %d: %v", topic, isr, err)
	}
}

// FreeAddr returns a loopback address on which nothing listens (a port
// that was free a moment ago), for tests of unreachable brokers.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
