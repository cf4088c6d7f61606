package kprod

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fkerr "github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly once per partition when the idempotent producer (the defaults:
// acks=all, 5 requests in flight) writes to many partitions of one topic
// while the brokers append batches and lose their acknowledgements in
// every way kfake can: an error after the append, the connection closed
// after the append, a response held past request.timeout.ms (appended
// after the producer gave up on it, possibly after its retry), and
// refusals that append nothing, leaders moving. Each partition must hold
// each record once, in order, and every record must be acknowledged.
//
// Left out, as kfake cannot give them the broker's answers:
// OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID and other refusals
// that lead to an epoch bump while another partition has batches whose
// acknowledgement was lost. kfake keeps one epoch per producer id (Kafka:
// per producer id and partition), so the other partition's retry in the
// old epoch is refused with INVALID_PRODUCER_EPOCH and its later batches,
// written, are renumbered in the new epoch and written again (see
// TestIdempotentBumpLeavesOtherPartitionsRetries). And a fault answers
// before kfake's duplicate check, so a fault on the retry of a written
// batch is an answer no broker gives.

// ackDropper wraps kfake's listeners: it closes a connection instead of
// writing the response to a produce request that drop selects, after
// kfake appended the request's batches.
type ackDropper struct {
	drop    func() bool // called per produce response; true: cut instead
	dropped atomic.Int32
}

func (d *ackDropper) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return dropListener{ln, d}, nil
}

type dropListener struct {
	net.Listener
	d *ackDropper
}

func (l dropListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: l.d, produce: map[int32]bool{}}, nil
}

// dropConn follows the request frames read from the client (4-byte size,
// then api key, version and correlation id) to know which correlation ids
// are produce requests; kfake writes each response in one Write.
type dropConn struct {
	net.Conn
	d *ackDropper

	// read side, on kfake's read goroutine
	hdr     []byte // the frame's size and request header, as read so far
	skip    int    // body bytes of the current frame left to pass over
	mu      sync.Mutex
	produce map[int32]bool
}

func (c *dropConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	for b := p[:n]; len(b) > 0; {
		if c.skip > 0 {
			k := min(c.skip, len(b))
			c.skip -= k
			b = b[k:]
			continue
		}
		k := min(12-len(c.hdr), len(b))
		c.hdr = append(c.hdr, b[:k]...)
		b = b[k:]
		if len(c.hdr) == 12 {
			size := int(binary.BigEndian.Uint32(c.hdr))
			if binary.BigEndian.Uint16(c.hdr[4:]) == uint16(kmsg.Produce) {
				c.mu.Lock()
				c.produce[int32(binary.BigEndian.Uint32(c.hdr[8:]))] = true
				c.mu.Unlock()
			}
			c.skip, c.hdr = size-8, c.hdr[:0]
		}
	}
	return n, err
}

func (c *dropConn) Write(p []byte) (int, error) {
	if len(p) >= 8 {
		corr := int32(binary.BigEndian.Uint32(p[4:]))
		c.mu.Lock()
		isProduce := c.produce[corr]
		delete(c.produce, corr)
		c.mu.Unlock()
		if isProduce && c.d.drop() {
			c.d.dropped.Add(1)
			c.Conn.Close()
			return 0, net.ErrClosed
		}
	}
	return c.Conn.Write(p)
}

// lockedRand is a rand for the broker's hooks, which run on several
// goroutines (kfake's cluster loop, its connections' writers).
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(t *testing.T) *lockedRand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("fault seed %d", seed)
	return &lockedRand{r: rand.New(rand.NewPCG(seed, seed))}
}

func (r *lockedRand) chance(p float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64() < p
}

func TestIdempotentManyPartitionsExactlyOnce(t *testing.T) {
	type scenario struct {
		name string
		// setup installs the faults, on when on reads true (the middle
		// of the run); it returns how many produce requests they hit.
		setup func(t *testing.T, c *kfake.Cluster, on *atomic.Bool, rnd *lockedRand) func() int
		cfg   func(*Config)
		d     *ackDropper
	}
	errFault := func(e *fkerr.Error, p float64) func(*testing.T, *kfake.Cluster, *atomic.Bool, *lockedRand) func() int {
		return func(t *testing.T, c *kfake.Cluster, on *atomic.Bool, rnd *lockedRand) func() int {
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: e, Count: -1,
				When: func(kmsg.Request) bool { return on.Load() && rnd.chance(p) }})
			return h.Hits
		}
	}
	var scenarios []scenario
	scenarios = append(scenarios,
		scenario{name: "no faults", setup: func(*testing.T, *kfake.Cluster, *atomic.Bool, *lockedRand) func() int { return nil }},
		scenario{name: "NOT_LEADER_OR_FOLLOWER", setup: errFault(fkerr.NotLeaderForPartition, 0.1)},
		scenario{name: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", setup: errFault(fkerr.NotEnoughReplicasAfterAppend, 0.1)},
		scenario{name: "REQUEST_TIMED_OUT", setup: errFault(fkerr.RequestTimedOut, 0.1)},
	)
	// The connection closed after the append, in place of the response.
	d := &ackDropper{}
	scenarios = append(scenarios, scenario{name: "connection closed after append", d: d,
		setup: func(t *testing.T, c *kfake.Cluster, on *atomic.Bool, rnd *lockedRand) func() int {
			d.drop = func() bool { return on.Load() && rnd.chance(0.05) }
			return func() int { return int(d.dropped.Load()) }
		}})
	// Responses held past request.timeout.ms: the producer closes the
	// connection and retries, on a new one, while kfake appends the held
	// request afterwards.
	scenarios = append(scenarios, scenario{name: "response past request.timeout.ms",
		cfg: func(cfg *Config) { cfg.RequestTimeout = 200 * time.Millisecond },
		setup: func(t *testing.T, c *kfake.Cluster, on *atomic.Bool, rnd *lockedRand) func() int {
			stop := stopAtCleanup(t)
			var n atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if on.Load() && rnd.chance(0.03) && n.Add(1) <= 10 {
					c.SleepControl(func() { sleepOrStop(300*time.Millisecond, stop) })
				}
				return nil, nil, false
			})
			return func() int { return int(n.Load()) }
		}})
	// Leaders moving while batches are in flight: the batches sent to
	// the old leader are refused with NOT_LEADER_OR_FOLLOWER while the
	// next ones may already go to the new one.
	scenarios = append(scenarios, scenario{name: "leaders moving",
		setup: func(t *testing.T, c *kfake.Cluster, on *atomic.Bool, rnd *lockedRand) func() int {
			var n atomic.Int32
			quit, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for {
					// The first move comes 1 ms into the run, then every
					// 20 ms: without -race the whole run may take less
					// than 20 ms.
					wait := 20 * time.Millisecond
					if n.Load() == 0 {
						wait = time.Millisecond
					}
					select {
					case <-quit: // the test's end, also one that failed midway
						return
					case <-time.After(wait):
					}
					if on.Load() {
						c.ShufflePartitionLeaders()
						n.Add(1)
					}
				}
			}()
			t.Cleanup(func() { close(quit); <-done })
			return func() int { return int(n.Load()) }
		}})
	// All of them at once.
	d2 := &ackDropper{}
	scenarios = append(scenarios, scenario{name: "mixed", d: d2,
		cfg: func(cfg *Config) { cfg.RequestTimeout = 200 * time.Millisecond },
		setup: func(t *testing.T, c *kfake.Cluster, on *atomic.Bool, rnd *lockedRand) func() int {
			stop := stopAtCleanup(t)
			d2.drop = func() bool { return on.Load() && rnd.chance(0.03) }
			var n atomic.Int32
			c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if on.Load() && rnd.chance(0.02) && n.Add(1) <= 10 {
					c.SleepControl(func() { sleepOrStop(300*time.Millisecond, stop) })
				}
				return nil, nil, false
			})
			var hs []func() int
			for _, e := range []*fkerr.Error{fkerr.NotLeaderForPartition, fkerr.NotEnoughReplicasAfterAppend, fkerr.RequestTimedOut} {
				hs = append(hs, c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: e, Count: -1,
					When: func(kmsg.Request) bool { return on.Load() && rnd.chance(0.03) }}).Hits)
			}
			return func() int {
				k := int(n.Load() + d2.dropped.Load())
				for _, h := range hs {
					k += h()
				}
				return k
			}
		}})

	for _, parts := range []int32{6, 12} {
		for _, sc := range scenarios {
			name := fmt.Sprintf("%d partitions/%s", parts, sc.name)
			t.Run(name, func(t *testing.T) {
				var opts []kfake.Opt
				if sc.d != nil {
					sc.d.dropped.Store(0)
					opts = append(opts, kfake.ListenFn(sc.d.listen))
				}
				c := newFake(t, parts, opts...)
				var on atomic.Bool
				hits := sc.setup(t, c, &on, newLockedRand(t))
				cfg := testConfig(c)
				cfg.Linger = time.Millisecond
				cfg.BatchSize = 256 // many batches, many in flight
				cfg.RetryBackoff, cfg.RetryBackoffMax = 5*time.Millisecond, 20*time.Millisecond
				if sc.cfg != nil {
					sc.cfg(&cfg)
				}
				p := newTestProducer(t, cfg)
				const perPart = 3000
				f := newFaultRun(name, "t", parts, perPart)
				on.Store(true)
				f.produce(t, p, nil, 60*time.Second)
				on.Store(false)
				if hits != nil && hits() == 0 {
					t.Fatal("the faults never hit a produce request")
				}
				if hits != nil {
					t.Logf("faults hit %d produce requests or partitions", hits())
				}
				f.check(t, c.ListenAddrs()).assertExactlyOnce(t, name)
			})
		}
	}
}
