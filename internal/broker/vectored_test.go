package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kprod/kprod/internal/recbatch"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// refRequest makes any kmsg request a VectoredRequest: AppendVectored
// encodes it with AppendTo, then cuts each of byRef (in the order they are
// encoded) out of the buffer and hands it over as a Ref. With pin, it
// keeps the version it has, whatever the connection negotiated.
type refRequest struct {
	kmsg.Request
	byRef [][]byte
	pin   bool
}

func (r *refRequest) SetVersion(v int16) {
	if !r.pin {
		r.Request.SetVersion(v)
	}
}

func (r *refRequest) AppendVectored(dst []byte, refs []Ref) ([]byte, []Ref) {
	from := len(dst)
	dst = r.AppendTo(dst)
	for _, b := range r.byRef {
		i := bytes.Index(dst[from:], b)
		if i < 0 {
			panic("refRequest: a byRef slice is not in the encoding")
		}
		i += from
		refs = append(refs, Ref{At: i, B: b})
		dst = append(dst[:i], dst[i+len(b):]...)
		from = i
	}
	return dst, refs
}

func batchOf(t *testing.T, n, size int) []byte {
	t.Helper()
	var b recbatch.Builder
	b.Reset(nil, time.Now().UnixMilli())
	for i := range n {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		b.Append(time.Now().UnixMilli(), nil, v, nil)
	}
	return b.Seal(recbatch.SealOptions{})
}

func produceReqs(t *testing.T) []kmsg.Request {
	t.Helper()
	b1, b2, b3 := batchOf(t, 3, 5000), batchOf(t, 1, 100), batchOf(t, 2, 20000)
	mk := func(version int16, txn *string, parts ...[]byte) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = version, txn, -1, 5000
		for i, tp := range []string{"x", "y"} {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = tp
			for j, b := range parts {
				if j%2 == i {
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition, rp.Records = int32(j), b
					rt.Partitions = append(rt.Partitions, rp)
				}
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	txn := "txn"
	reqs := []kmsg.Request{
		&refRequest{mk(11, nil, b1, b2, b3), [][]byte{b1, b3}, true}, // flexible
		&refRequest{mk(7, &txn, b1, b2, b3), [][]byte{b1, b3}, true}, // not flexible
		metadataReq(),                           // not vectored, in between
		&refRequest{mk(13, nil, b2), nil, true}, // vectored, nothing by reference
		&refRequest{mk(9, nil, b3, b1), [][]byte{b3, b1}, true},
	}
	return reqs
}

// rawConn is a Conn over nc with only its writer goroutine, as if set up,
// for tests that read what it writes from the other end.
func rawConn(nc net.Conn, cfg *Config) *Conn {
	c := &Conn{
		cfg:      cfg,
		nc:       nc,
		format:   kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
		slots:    make(chan struct{}, cfg.MaxInFlight),
		writeCh:  make(chan *pending, cfg.MaxInFlight),
		inflight: make(map[int32]*pending),
		done:     make(chan struct{}),
		failed:   make(chan struct{}),
		vers:     make(versions, 19),
	}
	for k := range c.vers {
		c.vers[k] = -1
	}
	c.vers[kmsg.Produce], c.vers[kmsg.Metadata] = 13, 13
	c.wg.Add(1)
	go c.writeLoop()
	return c
}

// writeAll sends reqs with noResp, waits for them to be written, closes c,
// and returns what the peer read and what AppendRequest encodes for them.
func writeAll(t *testing.T, c *Conn, peer net.Conn, reqs []kmsg.Request) (got, want []byte) {
	t.Helper()
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(peer)
		read <- b
	}()
	for i, req := range reqs {
		done := make(chan error, 1)
		if !c.TrySend(req, true, func(_ kmsg.Response, err error) { done <- err }) {
			t.Fatalf("request %d: TrySend refused", i)
		}
		if err := <-done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		// AppendRequest sets the size at dst[0]: one frame at a time.
		want = append(want, c.format.AppendRequest(nil, req, int32(i+1))...)
	}
	c.Close()
	select {
	case got = <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("peer did not see EOF")
	}
	return got, want
}

func checkFrames(t *testing.T, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		n := 0
		for n < min(len(got), len(want)) && got[n] == want[n] {
			n++
		}
		t.Fatalf("the peer read %d bytes, AppendRequest encodes %d; first difference at byte %d", len(got), len(want), n)
	}
}

// On a plain TCP connection a VectoredRequest goes out with writev, byte
// for byte what AppendRequest encodes (header, size counting the
// referenced batches, body), in step with other requests; afterwards the
// writer's scratch slices hold no batch.
func TestVectoredWriteTCP(t *testing.T) {
	for _, clientID := range []string{"kprod-test", ""} {
		t.Run(fmt.Sprintf("client.id=%q", clientID), func(t *testing.T) {
			nc, peer := tcpPair(t)
			cfg := testConfig()
			cfg.ClientID = clientID
			c := rawConn(nc, cfg)
			reqs := produceReqs(t)
			got, want := writeAll(t, c, peer, reqs)
			checkFrames(t, got, want)
			if cap(c.vecs) == 0 {
				t.Error("no vectored write on a *net.TCPConn")
			}
			for _, v := range c.vecs[:cap(c.vecs)] {
				if v != nil {
					t.Fatal("the writer's net.Buffers still holds a slice")
				}
			}
			for _, r := range c.refs[:cap(c.refs)] {
				if r.B != nil {
					t.Fatal("the writer's refs still hold a slice")
				}
			}
		})
	}
}

// Any other net.Conn (TLS, a custom Dial's wrapper; here net.Pipe) gets
// the request flattened into one buffer, the same bytes.
func TestVectoredWriteNotTCP(t *testing.T) {
	nc, peer := net.Pipe()
	defer peer.Close()
	c := rawConn(nc, testConfig())
	reqs := produceReqs(t)
	got, want := writeAll(t, c, peer, reqs)
	checkFrames(t, got, want)
	if cap(c.vecs) != 0 || cap(c.refs) != 0 {
		t.Error("vectored write on a net.Pipe")
	}
}

// End to end against kfake over a real connection: vectored produce
// requests are accepted and answered, at the negotiated version, flexible
// or not, and the offsets show every batch arrived.
func TestVectoredProduceKfake(t *testing.T) {
	for _, version := range []int16{7, 12} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			kc := newCluster(t, kfake.SeedTopics(1, "x", "y"))
			cfg := testConfig()
			cfg.MaxVersions = map[int16]int16{int16(kmsg.Produce): version}
			c := dialTest(t, kc.ListenAddrs()[0], cfg)
			if _, ok := c.nc.(*net.TCPConn); !ok {
				t.Fatalf("dialed a %T, want a *net.TCPConn", c.nc)
			}
			b1, b2 := batchOf(t, 3, 3000), batchOf(t, 2, 40000)
			for round := range 2 {
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TimeoutMillis = -1, 5000
				for i, tp := range []string{"x", "y"} {
					rt := kmsg.NewProduceRequestTopic()
					rt.Topic = tp
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Records = [][]byte{b1, b2}[i]
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
				}
				resp, err := c.Do(context.Background(), &refRequest{req, [][]byte{b1, b2}, false})
				if err != nil {
					t.Fatal(err)
				}
				if resp.GetVersion() != version {
					t.Errorf("went out at v%d, want v%d", resp.GetVersion(), version)
				}
				pr := resp.(*kmsg.ProduceResponse)
				if len(pr.Topics) != 2 {
					t.Fatalf("%d topics answered", len(pr.Topics))
				}
				for _, rt := range pr.Topics {
					p := rt.Partitions[0]
					n := int64(3)
					if rt.Topic == "y" {
						n = 2
					}
					if p.ErrorCode != 0 || p.BaseOffset != int64(round)*n {
						t.Errorf("round %d, topic %s: error %d, base offset %d, want 0, %d", round, rt.Topic, p.ErrorCode, p.BaseOffset, int64(round)*n)
					}
				}
			}
		})
	}
}

// chunkRequest is a VectoredRequest for the benchmark that costs no more
// than a real one: each chunk is an int32 length and the chunk, by
// reference. (refRequest encodes everything, then cuts.)
type chunkRequest struct {
	*kmsg.ProduceRequest
	chunks [][]byte
}

func (r *chunkRequest) AppendTo(dst []byte) []byte {
	for _, c := range r.chunks {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(c)))
		dst = append(dst, c...)
	}
	return dst
}

func (r *chunkRequest) AppendVectored(dst []byte, refs []Ref) ([]byte, []Ref) {
	for _, c := range r.chunks {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(c)))
		refs = append(refs, Ref{At: len(dst), B: c})
	}
	return dst, refs
}

// BenchmarkConnWrite writes a request of 6 16 KiB batches on a loopback
// TCP connection, as the writer goroutine does: vectored (batches by
// reference, writev) and flat (copied into the request buffer, as on a
// TLS connection). The peer reads everything, so the kernel's copies and
// the reader share the CPU with the writer.
func BenchmarkConnWrite(b *testing.B) {
	var chunks [][]byte
	for i := range 6 {
		chunks = append(chunks, bytes.Repeat([]byte{byte(i)}, 16<<10))
	}
	vreq := &chunkRequest{kmsg.NewPtrProduceRequest(), chunks}
	vreq.Version = 13
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"vectored", vreq},
		{"flat", struct{ kmsg.Request }{vreq}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			nc, peer := tcpPair(b)
			drained := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, peer)
				peer.Close()
				close(drained)
			}()
			cfg := testConfig()
			c := &Conn{cfg: cfg, nc: nc, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(cfg.ClientID)),
				inflight: make(map[int32]*pending), done: make(chan struct{}), failed: make(chan struct{})}
			p := &pending{req: tc.req, noResp: true, internal: true, done: func(kmsg.Response, error) {}}
			b.SetBytes(int64(len(c.format.AppendRequest(nil, tc.req, 1))))
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				buf = c.write(p, buf[:0])
			}
			b.StopTimer()
			nc.Close()
			<-drained
		})
	}
}
