package kprod

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kprod/kprod/internal/broker"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// producePartIn is one partition batch as the sender adds it.
type producePartIn struct {
	topic     string
	partition int32
	records   []byte
}

func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], "id-"+name)
	return id
}

func records(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// produceCases are the contents the encoder is checked with: one topic
// and partition, several of each added interleaved (as the sender's
// rotating drain does), batches below and above produceRefMin, empty and
// null records.
var produceCases = map[string][]producePartIn{
	"one": {
		{"t", 0, records(2000, 1)},
	},
	"one-small": {
		{"t", 3, records(10, 1)},
	},
	"several": {
		{"a", 2, records(4096, 1)},
		{"b", 0, records(100, 2)},
		{"a", 0, records(600, 3)},
		{"c", 5, records(70000, 4)}, // compact length over two uvarint bytes
		{"b", 1, records(produceRefMin, 5)},
		{"a", 1, records(produceRefMin-1, 6)},
		{"c", 1, []byte{}},
		{"b", 7, nil},
	},
}

// kmsgProduce builds the same content the way the sender did before
// produceRequest: topics in order of first appearance, each topic's
// partitions in order.
func kmsgProduce(version int16, txnID *string, acks int16, timeout int32, in []producePartIn) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = version, txnID, acks, timeout
	for _, p := range in {
		var rt *kmsg.ProduceRequestTopic
		for i := range req.Topics {
			if req.Topics[i].Topic == p.topic {
				rt = &req.Topics[i]
			}
		}
		if rt == nil {
			t := kmsg.NewProduceRequestTopic()
			t.Topic, t.TopicID = p.topic, topicID(p.topic)
			req.Topics = append(req.Topics, t)
			rt = &req.Topics[len(req.Topics)-1]
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p.partition, p.records
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

func ourProduce(version int16, txnID *string, acks int16, timeout int32, in []producePartIn) *produceRequest {
	r := newProduceRequest(acks, timeout, len(in))
	r.txnID = txnID
	for _, p := range in {
		if t := r.add(p.topic, p.partition, p.records); t != nil {
			t.id = topicID(p.topic)
		}
	}
	r.SetVersion(version)
	return r
}

// splice puts the referenced slices back into buf at their offsets.
func splice(t *testing.T, buf []byte, refs []broker.Ref) []byte {
	t.Helper()
	var out []byte
	at := 0
	for _, r := range refs {
		if r.At < at || r.At > len(buf) {
			t.Fatalf("ref at %d after %d (buffer %d bytes): refs out of order", r.At, at, len(buf))
		}
		out = append(out, buf[at:r.At]...)
		out = append(out, r.B...)
		at = r.At
	}
	return append(out, buf[at:]...)
}

// The encoder's highest version is kmsg's: a newer kmsg may have added
// fields that produceRequest does not know, and its version must then be
// looked at before it is raised.
func TestProduceRequestMaxVersion(t *testing.T) {
	if kmax := (&kmsg.ProduceRequest{}).MaxVersion(); kmax != produceMaxVersion {
		t.Fatalf("kmsg implements Produce up to v%d, produceRequest up to v%d: check kmsg's ProduceRequest for new fields, then update produceMaxVersion", kmax, produceMaxVersion)
	}
	r := newProduceRequest(-1, 30000, 0)
	r.SetVersion(produceMaxVersion + 1)
	if r.GetVersion() != produceMaxVersion {
		t.Errorf("SetVersion(%d) set v%d, want the encoder's max v%d", produceMaxVersion+1, r.GetVersion(), produceMaxVersion)
	}
	r.vcap = 11 // transactions v1
	if r.SetVersion(13); r.GetVersion() != 11 || r.MaxVersion() != 11 {
		t.Errorf("capped at 11: SetVersion(13) set v%d, MaxVersion %d", r.GetVersion(), r.MaxVersion())
	}
	if r.SetVersion(9); r.GetVersion() != 9 {
		t.Errorf("capped at 11: SetVersion(9) set v%d", r.GetVersion())
	}
	var zero produceRequest // usable: no cap
	if zero.SetVersion(12); zero.GetVersion() != 12 {
		t.Errorf("zero value: SetVersion(12) set v%d", zero.GetVersion())
	}
}

// AppendTo is kmsg.ProduceRequest.AppendTo byte for byte, and
// AppendVectored is the same once its refs are spliced in, for every
// version, with and without a transactional id. kprod writes record batch
// v2 only, so it uses Produce v3+ in practice; v0-2 are checked too.
func TestProduceRequestEncoding(t *testing.T) {
	txn, empty := "my-txn", ""
	for name, in := range produceCases {
		for v := int16(0); v <= produceMaxVersion; v++ {
			for _, txnID := range []*string{nil, &txn, &empty} {
				label := "nil"
				if txnID != nil {
					label = fmt.Sprintf("%q", *txnID)
				}
				t.Run(fmt.Sprintf("%s/v%d/txn=%s", name, v, label), func(t *testing.T) {
					want := kmsgProduce(v, txnID, -1, 30000, in).AppendTo(nil)
					r := ourProduce(v, txnID, -1, 30000, in)
					if r.IsFlexible() != (v >= 9) || r.Key() != 0 {
						t.Fatalf("key %d, flexible %v at v%d", r.Key(), r.IsFlexible(), v)
					}
					if got := r.AppendTo(nil); !bytes.Equal(got, want) {
						t.Fatalf("AppendTo differs from kmsg's (%d vs %d bytes)\n got % x\nwant % x", len(got), len(want), head(got), head(want))
					}
					// Twice: encoding has no side effects.
					prefix := []byte("prefix")
					if got := r.AppendTo(append([]byte(nil), prefix...)); !bytes.Equal(got[len(prefix):], want) {
						t.Fatal("AppendTo after a prefix differs")
					}

					refs := []broker.Ref{{At: 99}} // reused slices come in with old content
					buf, refs := r.AppendVectored(append([]byte(nil), prefix...), refs[:0])
					if got := splice(t, buf, refs); !bytes.Equal(got[len(prefix):], want) {
						t.Fatalf("AppendVectored spliced differs from kmsg's\n got % x\nwant % x", head(got[len(prefix):]), head(want))
					}
					byRef := 0
					for _, p := range in {
						if len(p.records) >= produceRefMin {
							byRef++
						}
					}
					if len(refs) != byRef {
						t.Errorf("%d refs, want one per batch of %d+ bytes: %d", len(refs), produceRefMin, byRef)
					}
					for _, ref := range refs {
						if len(ref.B) < produceRefMin {
							t.Errorf("a %d-byte batch by reference", len(ref.B))
						}
						if bytes.Contains(buf, ref.B) {
							t.Errorf("a batch by reference was copied too")
						}
					}

					// ReadFrom decodes it back to the same bytes.
					back := &produceRequest{version: v}
					if err := back.ReadFrom(want); err != nil {
						t.Fatal(err)
					}
					if got := back.AppendTo(nil); !bytes.Equal(got, want) {
						t.Errorf("decoded and encoded again differs")
					}

				})
			}
		}
	}
}

func head(b []byte) []byte {
	if len(b) > 96 {
		return b[:96]
	}
	return b
}

func TestProduceRequestResponseKind(t *testing.T) {
	r := ourProduce(11, nil, 1, 1000, produceCases["one"])
	resp, ok := r.ResponseKind().(*kmsg.ProduceResponse)
	if !ok || resp.GetVersion() != 11 {
		t.Fatalf("ResponseKind: %T v%d, want *kmsg.ProduceResponse v11", r.ResponseKind(), r.ResponseKind().GetVersion())
	}
	want := kmsg.NewPtrProduceResponse()
	want.Version = 11
	if fmt.Sprint(resp) != fmt.Sprint(want) {
		t.Errorf("ResponseKind is not kmsg's default response: %+v", resp)
	}
}

// add keeps each topic's partitions together, in the order added, and
// allocates nothing past the first partition of the one-topic case.
func TestProduceRequestAddGroups(t *testing.T) {
	r := newProduceRequest(-1, 1, 0)
	for i, tp := range []string{"a", "b", "a", "c", "b", "a"} {
		r.add(tp, int32(i), nil)
	}
	var got []string
	parts := r.parts
	for _, tp := range r.topics {
		for _, p := range parts[:tp.nparts] {
			got = append(got, fmt.Sprintf("%s%d", tp.name, p.partition))
		}
		parts = parts[tp.nparts:]
	}
	if s := fmt.Sprint(got); s != "[a0 a2 a5 b1 b4 c3]" {
		t.Errorf("partitions in order %s, want [a0 a2 a5 b1 b4 c3]", s)
	}

	wire := records(100, 0)
	allocs := testing.AllocsPerRun(100, func() {
		r := newProduceRequest(-1, 1, 6)
		for i := range 6 {
			r.add("t", int32(i), wire)
		}
	})
	if allocs > 2 {
		t.Errorf("building a 6-partition request of one topic: %v allocations, want 2 (the request, its partitions)", allocs)
	}
}

// BenchmarkProduceRequestEncode encodes a request of 6 partitions of 16 KiB
// batches: vectored (what a plain TCP connection writes), flat (TLS and
// wrapped connections) and kmsg's (before produceRequest).
func BenchmarkProduceRequestEncode(b *testing.B) {
	var in []producePartIn
	for i := range 6 {
		in = append(in, producePartIn{"bench", int32(i), records(16<<10, byte(i))})
	}
	r := ourProduce(produceMaxVersion, nil, -1, 30000, in)
	size := int64(len(r.AppendTo(nil)))
	b.Run("vectored", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size)
		var buf []byte
		var refs []broker.Ref
		for b.Loop() {
			buf, refs = r.AppendVectored(buf[:0], refs[:0])
		}
	})
	b.Run("flat", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size)
		var buf []byte
		for b.Loop() {
			buf = r.AppendTo(buf[:0])
		}
	})
	b.Run("kmsg", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(size)
		k := kmsgProduce(produceMaxVersion, nil, -1, 30000, in)
		var buf []byte
		for b.Loop() {
			buf = k.AppendTo(buf[:0])
		}
	})
}
