package broker

import (
	"context"
	"errors"
	"github.com/kprod/kprod/internal/live"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The embedded cluster advertises Produce v3-13, Metadata v0-13 and
// InitProducerId v0-5; kmsg implements up to 13, 13 and 5. The handshake
// must pick the highest common version of each, and requests must go out
// at it.
func TestNegotiatedVersions(t *testing.T) {
	kc := newCluster(t)
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())

	for key, want := range map[int16]int16{
		int16(kmsg.Produce):        13,
		int16(kmsg.Metadata):       13,
		int16(kmsg.InitProducerID): 5,
		int16(kmsg.ApiVersions):    5,
	} {
		got, ok := c.Version(key)
		if !ok || got != want {
			t.Errorf("%s: negotiated v%d (ok=%v), want v%d", kmsg.NameForKey(key), got, ok, want)
		}
	}
	if v, ok := c.Version(9999); ok {
		t.Errorf("key 9999 has version %d; want none", v)
	}

	resp, err := c.Do(context.Background(), metadataReq())
	if err != nil {
		t.Fatal(err)
	}
	if v := resp.GetVersion(); v != 13 {
		t.Errorf("Metadata went out at v%d, want v13", v)
	}
	mr := resp.(*kmsg.MetadataResponse)
	if len(mr.Brokers) != 1 {
		t.Errorf("metadata lists %d brokers, want 1", len(mr.Brokers))
	}
}

// Config.MaxVersions caps what we use below what both sides support.
func TestNegotiatedVersionsCapped(t *testing.T) {
	kc := newCluster(t)
	cfg := testConfig()
	cfg.MaxVersions = map[int16]int16{int16(kmsg.Produce): 11}
	c := dialTest(t, kc.ListenAddrs()[0], cfg)
	if v, _ := c.Version(int16(kmsg.Produce)); v != 11 {
		t.Errorf("Produce capped at 11 negotiated v%d", v)
	}
	if v, _ := c.Version(int16(kmsg.Metadata)); v != 13 {
		t.Errorf("uncapped Metadata negotiated v%d, want 13", v)
	}
}

// An ApiVersions answer may list keys kmsg does not know, up to 32767
// (a broken broker or proxy): they get no version, and the table is not
// sized by them (32767+1 wrapped to a negative length and panicked).
func TestNegotiateUnknownKeys(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, key := range []int16{32767, 20000, int16(kmsg.Produce)} {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, 0, 9
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	v := negotiate(resp, nil)
	if got, ok := v.get(int16(kmsg.Produce)); !ok || got != 9 {
		t.Errorf("Produce: v%d (ok=%v), want v9", got, ok)
	}
	for _, key := range []int16{32767, 20000} {
		if got, ok := v.get(key); ok {
			t.Errorf("key %d unknown to kmsg negotiated v%d", key, got)
		}
	}
	if len(v) > int(kmsg.Produce)+1 {
		t.Errorf("table of %d entries for keys up to %d", len(v), kmsg.Produce)
	}
}

// A request that cannot go out below some version (broker.MinVersioned:
// kprod's Produce of v2 record batches needs v3, of zstd ones v7) fails
// with ErrUnsupportedVersion, saying why, against a broker whose highest
// version is lower, and the connection stays usable.
func TestMinVersionedRequest(t *testing.T) {
	kc := newCluster(t)
	cfg := testConfig()
	cfg.MaxVersions = map[int16]int16{int16(kmsg.Produce): 6}
	c := dialTest(t, kc.ListenAddrs()[0], cfg)
	_, err := c.Do(context.Background(), minProduce{kmsg.NewPtrProduceRequest()})
	if !errors.Is(err, kerr.ErrUnsupportedVersion) || !strings.Contains(err.Error(), "up to v6, and zstd needs v7") {
		t.Fatalf("Produce needing v7 against v6: %v, want ErrUnsupportedVersion saying why", err)
	}
	if c.InFlight() != 0 {
		t.Errorf("the refused request kept its in-flight slot: InFlight() = %d", c.InFlight())
	}
	if _, err := c.Do(context.Background(), metadataReq()); err != nil {
		t.Fatalf("the connection after the refused request: %v", err)
	}
}

type minProduce struct{ *kmsg.ProduceRequest }

func (minProduce) MinVersion() (int16, string) { return 7, "zstd needs v7" }

// Against an older broker the broker's maximum wins. Kafka 3.0 knows
// ApiVersions only up to v3, so it answers our first ApiVersions (v5) with
// UNSUPPORTED_VERSION by itself: this is also the fallback against a real
// broker implementation rather than a hand-written response.
func TestNegotiatedVersionsOlderBroker(t *testing.T) {
	old := kversion.V3_0_0()
	kc := newCluster(t, kfake.MaxVersions(old))
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())

	for _, key := range []kmsg.Key{kmsg.Produce, kmsg.Metadata, kmsg.InitProducerID, kmsg.ApiVersions} {
		want, _ := old.LookupMaxKeyVersion(int16(key))
		if got, ok := c.Version(int16(key)); !ok || got != want {
			t.Errorf("%s: negotiated v%d (ok=%v), want Kafka 3.0's v%d", key.Name(), got, ok, want)
		}
	}
	// DescribeTopicPartitions (KIP-966) came after 3.0: no version in
	// common, and a request for it fails with a typed error.
	if v, ok := c.Version(int16(kmsg.DescribeTopicPartitions)); ok {
		t.Errorf("DescribeTopicPartitions negotiated v%d against Kafka 3.0", v)
	}
	_, err := c.Do(context.Background(), kmsg.NewPtrDescribeTopicPartitionsRequest())
	if !errors.Is(err, kerr.ErrUnsupportedVersion) {
		t.Errorf("request unknown to the broker: err = %v, want ErrUnsupportedVersion", err)
	}
	if c.InFlight() != 0 {
		t.Errorf("an unsupported request kept its in-flight slot: InFlight() = %d", c.InFlight())
	}
	// The connection is still fine.
	if _, err := c.Do(context.Background(), metadataReq()); err != nil {
		t.Fatal(err)
	}
}

// KIP-511: a broker that does not know our ApiVersions version answers in
// the v0 layout with UNSUPPORTED_VERSION and its own ApiVersions range; we
// must retry at its maximum and then succeed.
func TestApiVersionsFallback(t *testing.T) {
	kc := newCluster(t)
	var mu sync.Mutex
	var seen []int16
	kc.ControlKey(int16(kmsg.ApiVersions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, kreq.GetVersion())
		if len(seen) > 1 {
			return nil, nil, false // let kfake answer the retry
		}
		resp := kreq.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.Version = 0 // kfake writes the response at the version it carries
		resp.ErrorCode = 35
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey = int16(kmsg.ApiVersions)
		k.MinVersion, k.MaxVersion = 0, 3
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
		return resp, nil, true
	})

	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	mu.Lock()
	got := append([]int16(nil), seen...)
	mu.Unlock()
	if len(got) != 2 || got[0] != 5 || got[1] != 3 {
		t.Fatalf("ApiVersions versions sent: %v, want [5 3]", got)
	}
	if v, ok := c.Version(int16(kmsg.Produce)); !ok || v != 13 {
		t.Errorf("after the fallback Produce negotiated v%d (ok=%v), want 13", v, ok)
	}
	if _, err := c.Do(context.Background(), metadataReq()); err != nil {
		t.Fatal(err)
	}
}

// A broker that keeps answering UNSUPPORTED_VERSION must not be retried
// forever; the dial fails with a typed error.
func TestApiVersionsAlwaysUnsupported(t *testing.T) {
	kc := newCluster(t)
	var calls atomic.Int32
	kc.ControlKey(int16(kmsg.ApiVersions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		calls.Add(1)
		resp := kreq.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.Version = 0
		resp.ErrorCode = 35
		return resp, nil, true
	})
	_, err := dialConn(context.Background(), 0, kc.ListenAddrs()[0], testConfig(), 5*time.Second)
	if !errors.Is(err, kerr.ErrDial) || !errors.Is(err, kerr.ErrUnsupportedVersion) {
		t.Fatalf("err = %v, want ErrDial wrapping ErrUnsupportedVersion", err)
	}
	if n := calls.Load(); n < 2 || n > 5 {
		t.Errorf("ApiVersions sent %d times, want a few retries then give up", n)
	}
}

// A request without a response within request.timeout.ms fails with
// ErrRequestTimeout (retriable), and the connection is closed, failing
// the other requests in flight on it with ErrConnectionLost.
func TestRequestTimeout(t *testing.T) {
	kc := newCluster(t)
	holdMetadata(t, kc)
	cfg := testConfig()
	cfg.RequestTimeout = 800 * time.Millisecond
	c := dialTest(t, kc.ListenAddrs()[0], cfg)

	// The second request goes out 400ms after the first, so its own
	// timer cannot fire before the first one's closes the connection
	// (unless the machine stalls for 400ms right then).
	start := time.Now()
	errA := make(chan error, 1)
	deadAtDone := make(chan bool, 1)
	// By the time a timed-out request's done runs, the connection is
	// closed, so no write of it can still be in progress: its caller may
	// then reuse the request's memory (a produce request's batches).
	if !c.TrySend(metadataReq(), false, func(_ kmsg.Response, err error) {
		deadAtDone <- c.Dead()
		errA <- err
	}) {
		t.Fatal("TrySend refused the first request")
	}
	time.Sleep(400 * time.Millisecond)
	errB := make(chan error, 2)
	if !c.TrySend(metadataReq(), false, func(_ kmsg.Response, err error) { errB <- err }) {
		t.Fatal("TrySend refused a second request")
	}

	err := <-errA
	elapsed := time.Since(start)
	if !errors.Is(err, kerr.ErrRequestTimeout) || !kerr.IsRetriable(err) {
		t.Fatalf("err = %v, want a retriable ErrRequestTimeout", err)
	}
	if elapsed < 800*time.Millisecond || elapsed > 3*time.Second {
		t.Errorf("timed out after %v, want about 800ms", elapsed)
	}
	if !strings.Contains(err.Error(), "Metadata") {
		t.Errorf("timeout error does not name the request: %v", err)
	}
	if !<-deadAtDone {
		t.Error("the timed-out request's done ran before its connection was closed")
	}
	select {
	case err := <-errB:
		if !errors.Is(err, kerr.ErrConnectionLost) || !kerr.IsRetriable(err) {
			t.Errorf("other in-flight request: err = %v, want ErrConnectionLost", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the other in-flight request was not failed")
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Fatal("connection not closed after a request timeout")
	}
	if !errors.Is(c.Err(), kerr.ErrConnectionLost) {
		t.Errorf("Err() = %v, want ErrConnectionLost", c.Err())
	}
	if c.TrySend(metadataReq(), false, func(kmsg.Response, error) { t.Error("done called for a refused request") }) {
		t.Error("TrySend accepted a request on a dead connection")
	}
	if _, err := c.Do(context.Background(), metadataReq()); !errors.Is(err, kerr.ErrConnectionLost) {
		t.Errorf("Do on a dead connection: err = %v, want ErrConnectionLost", err)
	}
	select {
	case err := <-errB:
		t.Errorf("second completion of a request: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
}

// With max.in.flight = 2 and the broker holding responses back, a third
// request is refused until one completes.
func TestInFlightCap(t *testing.T) {
	kc := newCluster(t)
	rel := make(chan struct{})
	var relOnce sync.Once
	releaseAll := func() { relOnce.Do(func() { close(rel) }) }
	t.Cleanup(releaseAll)
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		hold(rel)
		return nil, nil, false
	})
	cfg := testConfig()
	cfg.MaxInFlight = 2
	c := dialTest(t, kc.ListenAddrs()[0], cfg)

	results := make(chan error, 3)
	done := func(resp kmsg.Response, err error) {
		if err == nil && resp == nil {
			err = errors.New("nil response without an error")
		}
		results <- err
	}
	if !c.TrySend(metadataReq(), false, done) || !c.TrySend(metadataReq(), false, done) {
		t.Fatal("TrySend refused one of the first two requests")
	}
	if c.TrySend(metadataReq(), false, func(kmsg.Response, error) { t.Error("done called for a refused request") }) {
		t.Fatal("TrySend accepted a third request with MaxInFlight = 2")
	}
	if n := c.InFlight(); n != 2 {
		t.Errorf("InFlight() = %d, want 2", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, metadataReq()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Do with the table full: err = %v, want to wait for a slot until ctx ends", err)
	}

	releaseAll()
	for range 2 {
		select {
		case err := <-results:
			if err != nil {
				t.Errorf("held request failed: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("held requests did not complete")
		}
	}
	eventually(t, time.Second, "in-flight slots freed", func() bool { return c.InFlight() == 0 })
	if !c.TrySend(metadataReq(), false, done) {
		t.Fatal("TrySend refused a request after the table drained")
	}
	if err := <-results; err != nil {
		t.Error(err)
	}
}

// When the broker drops the connection with requests in flight, every
// request's callback fires exactly once, with ErrConnectionLost.
func TestConnectionLost(t *testing.T) {
	kc := newCluster(t)
	const n = 4
	cfg := testConfig()
	cfg.MaxInFlight = n + 1
	c := dialTest(t, kc.ListenAddrs()[0], cfg)

	allSent := make(chan struct{})
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-allSent:
		case <-time.After(5 * time.Second):
		}
		return nil, errors.New("test: drop the connection"), true
	})

	var calls [n]atomic.Int32
	errs := make([]atomic.Value, n)
	for i := range n {
		ok := c.TrySend(metadataReq(), false, func(_ kmsg.Response, err error) {
			if calls[i].Add(1) == 1 {
				errs[i].Store(err)
			}
		})
		if !ok {
			t.Fatalf("TrySend %d refused", i)
		}
	}
	eventually(t, time.Second, "all requests in flight", func() bool { return c.InFlight() == n })
	close(allSent)

	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection not noticed as lost")
	}
	eventually(t, time.Second, "every callback called", func() bool {
		for i := range n {
			if calls[i].Load() == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(100 * time.Millisecond) // a second call would come now
	for i := range n {
		if got := calls[i].Load(); got != 1 {
			t.Errorf("request %d: callback called %d times", i, got)
		}
		err, _ := errs[i].Load().(error)
		if !errors.Is(err, kerr.ErrConnectionLost) || !kerr.IsRetriable(err) {
			t.Errorf("request %d: err = %v, want ErrConnectionLost", i, err)
		}
	}
	if c.InFlight() != 0 {
		t.Errorf("InFlight() = %d after the connection died", c.InFlight())
	}
}

// acks=0: the callback runs once the request is written, with no response,
// and the connection stays in step (the next request gets its own answer).
func TestNoResponseRequest(t *testing.T) {
	kc := newCluster(t)
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 0
	req.TimeoutMillis = 1000
	type result struct {
		resp kmsg.Response
		err  error
	}
	ch := make(chan result, 2)
	if !c.TrySend(req, true, func(r kmsg.Response, err error) { ch <- result{r, err} }) {
		t.Fatal("TrySend refused")
	}
	select {
	case r := <-ch:
		if r.resp != nil || r.err != nil {
			t.Errorf("acks=0 completion: resp=%v err=%v, want nil, nil", r.resp, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("acks=0 request never completed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Do(ctx, metadataReq()); err != nil {
		t.Fatalf("request after acks=0: %v", err)
	}
	if c.InFlight() != 0 {
		t.Errorf("InFlight() = %d", c.InFlight())
	}
}

// A caller whose ctx ends while waiting gives up, but the connection and
// the in-flight accounting stay correct.
func TestDoContextEnds(t *testing.T) {
	kc := newCluster(t)
	rel := make(chan struct{})
	var relOnce sync.Once
	releaseAll := func() { relOnce.Do(func() { close(rel) }) }
	t.Cleanup(releaseAll)
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		hold(rel) // only the first Metadata request
		return nil, nil, false
	})
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, metadataReq()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	releaseAll()
	eventually(t, 2*time.Second, "abandoned request completed", func() bool { return c.InFlight() == 0 })
	if _, err := c.Do(context.Background(), metadataReq()); err != nil {
		t.Fatal(err)
	}
	if c.Dead() {
		t.Fatal("connection died")
	}
}

// Close fails what is in flight (ErrConnectionLost wrapping ErrClosed)
// and returns only once the reader and writer goroutines are gone.
func TestConnCloseFailsInFlightAndWaits(t *testing.T) {
	before := live.Count()
	kc := newCluster(t)
	holdMetadata(t, kc)
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	var calls atomic.Int32
	var got atomic.Pointer[error]
	for range 2 {
		c.TrySend(metadataReq(), false, func(_ kmsg.Response, err error) {
			calls.Add(1)
			got.Store(&err)
		})
	}
	if len(ourGoroutinesNow()) == 0 {
		buf := make([]byte, 1<<20)
		t.Fatalf("no connection goroutines found; the goroutine check is broken (conn err: %v)\n%s", c.Err(), buf[:runtime.Stack(buf, true)])
	}
	c.Close()
	checkEnded(t, before, "Close")
	if n := calls.Load(); n != 2 {
		t.Errorf("%d callbacks called by the time Close returned, want 2", n)
	}
	var err error
	if p := got.Load(); p != nil {
		err = *p
	}
	if !errors.Is(err, kerr.ErrConnectionLost) || !errors.Is(err, kerr.ErrClosed) {
		t.Errorf("err = %v, want ErrConnectionLost wrapping ErrClosed", err)
	}
	c.Close() // idempotent
}

// A listener that is not Kafka (here: one answering HTTP) fails the
// handshake with a clear error instead of allocating a garbage length.
func TestHandshakeNotKafka(t *testing.T) {
	l, err := netListen(t)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_, _ = nc.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		buf := make([]byte, 512)
		_, _ = nc.Read(buf)
	}()
	defer wg.Wait()
	defer l.Close()
	_, err = dialConn(context.Background(), 7, l.Addr().String(), testConfig(), 5*time.Second)
	if !errors.Is(err, kerr.ErrDial) || !strings.Contains(err.Error(), "not a Kafka response") {
		t.Fatalf("err = %v, want ErrDial saying it is not Kafka", err)
	}
}

// TrySend never runs done itself, even for a request that fails at once
// (no version in common): the sender calls TrySend under its own lock, and
// a done that takes that lock must not deadlock.
func TestTrySendDoneNotInline(t *testing.T) {
	kc := newCluster(t, kfake.MaxVersions(kversion.V3_0_0()))
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	var mu sync.Mutex
	got := make(chan error, 1)
	returned := make(chan bool, 1)
	go func() {
		mu.Lock()
		defer mu.Unlock()
		returned <- c.TrySend(kmsg.NewPtrDescribeTopicPartitionsRequest(), false, func(_ kmsg.Response, err error) {
			mu.Lock() // the caller's lock
			defer mu.Unlock()
			got <- err
		})
	}()
	select {
	case ok := <-returned:
		if !ok {
			t.Fatal("TrySend refused instead of failing the request through done")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("TrySend called done inline: deadlock on the caller's lock")
	}
	select {
	case err := <-got:
		if !errors.Is(err, kerr.ErrUnsupportedVersion) {
			t.Errorf("err = %v, want ErrUnsupportedVersion", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("done never called")
	}
	eventually(t, time.Second, "slot released", func() bool { return c.InFlight() == 0 })
}

// Regression: the handshake built its ApiVersions request as a struct
// literal, skipping kmsg's Default, so v5 went out with NodeID 0 and no
// ClusterID, which brokers implementing KIP-1242 (Kafka 4.4, kfake) reject
// with INVALID_REQUEST: no connection could be set up at all.
func TestApiVersionsV5NodeIDUnset(t *testing.T) {
	kc := newCluster(t)
	got := make(chan *kmsg.ApiVersionsRequest, 1)
	kc.ControlKey(int16(kmsg.ApiVersions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		got <- kreq.(*kmsg.ApiVersionsRequest)
		return nil, nil, false
	})
	dialTest(t, kc.ListenAddrs()[0], testConfig())
	req := <-got
	if req.Version != 5 || req.NodeID != -1 || req.ClusterID != nil {
		t.Errorf("ApiVersions v%d NodeID %d ClusterID %v, want v5, -1, nil", req.Version, req.NodeID, req.ClusterID)
	}
	if req.ClientSoftwareName != "kprod" || req.ClientSoftwareVersion != Version {
		t.Errorf("client software %q %q", req.ClientSoftwareName, req.ClientSoftwareVersion)
	}
}

// A response kprod cannot decode fails its request as a lost connection
// does (retriable: the broker may have acted on it), and closes the
// connection, which can no longer be trusted; the next request dials anew.
func TestUndecodableResponse(t *testing.T) {
	kc := newCluster(t)
	var bad atomic.Bool
	bad.Store(true)
	kc.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if !bad.Load() {
			return nil, nil, false
		}
		resp := kreq.ResponseKind()
		resp.SetVersion(0) // the v0 layout where v13 was asked: unreadable
		return resp, nil, true
	})
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	_, err := c.Do(context.Background(), metadataReq())
	if !errors.Is(err, kerr.ErrConnectionLost) || !kerr.IsRetriable(err) || !strings.Contains(err.Error(), "cannot decode") {
		t.Fatalf("undecodable response: err = %v, want a retriable ErrConnectionLost that says it could not be decoded", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection stayed open after an undecodable response")
	}
}

// An undecodable response fails its request and everything after it on
// the connection oldest first, as a timeout does, so that what they carry
// (a partition's batches) fails in the order it was sent.
func TestUndecodableResponseFailsOldestFirst(t *testing.T) {
	kc := newCluster(t)
	written := make(chan struct{})
	var n atomic.Int32
	kc.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if n.Add(1) != 1 {
			return nil, nil, false
		}
		hold(written) // until the second request is on the wire behind it
		resp := kreq.ResponseKind()
		resp.SetVersion(0) // unreadable, as above
		return resp, nil, true
	})
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	order := sendInOrder(t, c, 2, nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		both := len(c.inflight) == 2
		c.mu.Unlock()
		if both {
			break
		}
		if time.Now().After(deadline) {
			close(written)
			t.Fatal("the second request never got in flight behind the first: the test would not test the order")
		}
		time.Sleep(time.Millisecond)
	}
	close(written)
	if order := order(); !slices.Equal(order, []int{0, 1}) {
		t.Errorf("requests failed in the order %v, want oldest first [0 1]", order)
	}
}

// blockingConn lets writes through until the test arms it; the armed
// write after the first blocks until Close, as on a peer that stopped
// reading with the socket buffers full.
type blockingConn struct {
	net.Conn
	armed  atomic.Bool
	writes atomic.Int32
	closed chan struct{}
	once   sync.Once
}

func (b *blockingConn) Write(p []byte) (int, error) {
	if b.armed.Load() && b.writes.Add(1) > 1 {
		<-b.closed
		return 0, net.ErrClosed
	}
	return b.Conn.Write(p)
}

func (b *blockingConn) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.Conn.Close()
}

// Requests still waiting to be written when the connection dies are newer
// than those on the wire: they fail after them, so that what the requests
// carry (a partition's batches) fails in the order it was sent.
func TestConnCloseFailsQueuedAfterInFlight(t *testing.T) {
	kc := newCluster(t)
	holdMetadata(t, kc)
	cfg := testConfig()
	var bc *blockingConn
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		bc = &blockingConn{Conn: nc, closed: make(chan struct{})}
		return bc, nil
	}
	c := dialTest(t, kc.ListenAddrs()[0], cfg)
	bc.armed.Store(true)
	// 0 written, 1 blocked in its write, 2..4 waiting for the writer.
	order := sendInOrder(t, c, 5, func(i int) {
		if i == 0 {
			// The oldest takes a while to handle: the others must wait
			// for it, not overtake it.
			time.Sleep(100 * time.Millisecond)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for bc.writes.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second request's write did not start")
		}
		time.Sleep(time.Millisecond)
	}
	c.Close()
	if order := order(); !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Errorf("requests failed in the order %v, want the order they were sent [0 1 2 3 4]", order)
	}
}

// A response being completed when the connection dies completes before
// the failures of the requests sent after it.
func TestConnCloseFailsAfterResponseBeingCompleted(t *testing.T) {
	kc := newCluster(t)
	rel := release(t)
	var n atomic.Int32
	kc.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if n.Add(1) > 1 {
			hold(rel) // the second and third: never answered
		}
		return nil, nil, false
	})
	c := dialTest(t, kc.ListenAddrs()[0], testConfig())
	completing := make(chan struct{})
	order := sendInOrder(t, c, 3, func(i int) {
		if i == 0 {
			// Answered; the connection dies while it is completed.
			close(completing)
			time.Sleep(100 * time.Millisecond)
		}
	})
	<-completing
	c.Close()
	if order := order(); !slices.Equal(order, []int{0, 1, 2}) {
		t.Errorf("requests completed in the order %v, want the order they were sent [0 1 2]", order)
	}
}

// sendInOrder sends n Metadata requests on c; each one's done runs before
// (if not nil) and then notes the request's number. The function returned
// waits for every done and returns the numbers in the order they came.
func sendInOrder(t *testing.T, c *Conn, n int, before func(i int)) func() []int {
	t.Helper()
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		if !c.TrySend(metadataReq(), false, func(kmsg.Response, error) {
			if before != nil {
				before(i)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			wg.Done()
		}) {
			t.Fatalf("request %d refused", i)
		}
	}
	return func() []int {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return order
	}
}

// Close waits for a request timer that has fired and found its request
// in flight: the timer's failure of the request and its log line come
// before Close returns, never after (a goroutine Close left behind).
func TestConnCloseWaitsForFiredTimer(t *testing.T) {
	before := live.Count()
	kc := newCluster(t)
	holdMetadata(t, kc)
	cfg := testConfig()
	cfg.RequestTimeout = 50 * time.Millisecond
	fired, release := make(chan struct{}), make(chan struct{})
	testHookTimerFired = func() { close(fired); <-release }
	t.Cleanup(func() { testHookTimerFired = nil })
	c := dialTest(t, kc.ListenAddrs()[0], cfg)
	var done atomic.Bool
	if !c.TrySend(metadataReq(), false, func(kmsg.Response, error) { done.Store(true) }) {
		t.Fatal("TrySend refused the request")
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the request's timer did not fire")
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a request timer that fired was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-closed
	if !done.Load() {
		t.Error("the request had not completed when Close returned")
	}
	checkEnded(t, before, "Close")
}
