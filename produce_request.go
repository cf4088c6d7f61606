package kprod

import (
	"encoding/binary"

	"github.com/kprod/kprod/internal/broker"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceMaxVersion is the highest Produce version produceRequest encodes.
// A test checks that it is kmsg's: a kmsg with a newer version may add
// fields, and a request is never encoded above this (SetVersion).
const produceMaxVersion = 13

// produceRefMin is the smallest record batch that goes on the wire by
// reference (broker.Ref) rather than copied into the request buffer:
// copying a few hundred bytes costs less than one more writev segment.
const produceRefMin = 512

// produceRequest is the Produce request the sender builds: the same bytes
// as kmsg.ProduceRequest with the same content, for every version up to
// produceMaxVersion, but it also implements broker.VectoredRequest, so
// that on a plain TCP connection the record batches are written from
// their own memory instead of being copied into the request buffer first.
//
// Partitions are kept grouped by topic, in the order topics were first
// added; one allocation holds every partition.
type produceRequest struct {
	version int16
	vcap    int16   // if > 0, SetVersion caps here: transactions v1 stay below v12
	zstd    bool    // its batches are zstd-compressed: Produce v7 at least (MinVersion)
	txnID   *string // transactional.id, for transactional producers
	acks    int16
	timeout int32 // TimeoutMillis

	topics []produceTopic
	parts  []producePart // topics[0]'s partitions, then topics[1]'s, ...
	last   int           // index in topics of the last topic added to

	topic0 [1]produceTopic // topics' backing array for one topic, the common case
}

type produceTopic struct {
	name   string
	id     [16]byte // v13+ (KIP-516)
	nparts int
}

type producePart struct {
	partition int32
	records   []byte
}

var _ broker.VectoredRequest = (*produceRequest)(nil)

// newProduceRequest returns an empty request with room for n partitions.
func newProduceRequest(acks int16, timeoutMillis int32, n int) *produceRequest {
	r := new(produceRequest)
	r.init(acks, timeoutMillis, n)
	return r
}

// init empties r, keeping its version and cap.
func (r *produceRequest) init(acks int16, timeoutMillis int32, n int) {
	r.txnID, r.acks, r.timeout, r.last = nil, acks, timeoutMillis, 0
	r.topic0 = [1]produceTopic{}
	r.topics = r.topic0[:0]
	r.parts = make([]producePart, 0, n)
}

// add adds one partition's record batch. A topic's partitions go out in
// the order they were added. When the topic is new to the request, add
// returns it, for the caller to set its id (sent from v13 on).
func (r *produceRequest) add(topic string, partition int32, records []byte) (added *produceTopic) {
	ti := r.last
	if ti >= len(r.topics) || r.topics[ti].name != topic {
		ti = -1
		for i := range r.topics {
			if r.topics[i].name == topic {
				ti = i
				break
			}
		}
		if ti < 0 {
			r.topics = append(r.topics, produceTopic{name: topic})
			ti = len(r.topics) - 1
			added = &r.topics[ti]
		}
		r.last = ti
	}
	p := producePart{partition: partition, records: records}
	if ti == len(r.topics)-1 {
		r.parts = append(r.parts, p)
	} else { // keep the grouping: insert after the topic's partitions
		at := 0
		for i := 0; i <= ti; i++ {
			at += r.topics[i].nparts
		}
		r.parts = append(r.parts, producePart{})
		copy(r.parts[at+1:], r.parts[at:])
		r.parts[at] = p
	}
	r.topics[ti].nparts++
	return added
}

func (*produceRequest) Key() int16 { return int16(kmsg.Produce) }
func (r *produceRequest) MaxVersion() int16 {
	if r.vcap > 0 {
		return min(r.vcap, produceMaxVersion)
	}
	return produceMaxVersion
}
func (r *produceRequest) SetVersion(v int16) { r.version = min(v, r.MaxVersion()) }
func (r *produceRequest) GetVersion() int16  { return r.version }
func (r *produceRequest) IsFlexible() bool   { return r.version >= 9 }

// MinVersion (broker.MinVersioned): record batches of format v2 need
// Produce v3 (Kafka 0.11; Java 4.x's oldest Produce version), zstd ones v7
// (Kafka 2.1, KIP-110), as Java's ProduceRequest refuses them below.
func (r *produceRequest) MinVersion() (int16, string) {
	if r.zstd {
		return 7, "zstd compression needs v7 (Kafka 2.1); set compression.type to lz4, snappy or gzip for this cluster"
	}
	return 3, "kprod's record batches need v3 (Kafka 0.11); kprod, like the Java 4.x client, needs Kafka 2.1 or later"
}
func (r *produceRequest) AppendTo(dst []byte) []byte {
	dst, _ = r.appendBody(dst, nil, false)
	return dst
}

// AppendVectored is AppendTo with every record batch of at least
// produceRefMin bytes handed over by reference (broker.VectoredRequest).
func (r *produceRequest) AppendVectored(dst []byte, refs []broker.Ref) ([]byte, []broker.Ref) {
	return r.appendBody(dst, refs, true)
}

func (r *produceRequest) ResponseKind() kmsg.Response {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = r.version
	return resp
}

// appendBody encodes the body as kmsg.ProduceRequest.AppendTo does (see
// kmsg's generated.go and Kafka's ProduceRequest.json): TransactionalID
// (v3+), Acks, TimeoutMillis, then the topics, each by name (v0-12) or id
// (v13+) with its partitions: index and records as nullable bytes.
// Flexible versions (v9+) use compact lengths and end every struct with an
// empty tag section.
func (r *produceRequest) appendBody(dst []byte, refs []broker.Ref, byRef bool) ([]byte, []broker.Ref) {
	v := r.version
	flex := v >= 9
	if v >= 3 {
		switch {
		case r.txnID != nil:
			dst = appendLen(dst, len(*r.txnID), flex)
			dst = append(dst, *r.txnID...)
		case flex:
			dst = append(dst, 0)
		default:
			dst = binary.BigEndian.AppendUint16(dst, 0xffff) // int16 -1: null
		}
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.acks))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.timeout))
	dst = appendArrayLen(dst, len(r.topics), flex)
	parts := r.parts
	for i := range r.topics {
		t := &r.topics[i]
		if v >= 13 {
			dst = append(dst, t.id[:]...)
		} else {
			dst = appendLen(dst, len(t.name), flex)
			dst = append(dst, t.name...)
		}
		dst = appendArrayLen(dst, t.nparts, flex)
		for _, p := range parts[:t.nparts] {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.partition))
			switch {
			case p.records == nil && flex:
				dst = append(dst, 0)
			case p.records == nil:
				dst = binary.BigEndian.AppendUint32(dst, 0xffffffff) // int32 -1: null
			default:
				if flex {
					dst = binary.AppendUvarint(dst, uint64(len(p.records))+1)
				} else {
					dst = binary.BigEndian.AppendUint32(dst, uint32(len(p.records)))
				}
				if byRef && len(p.records) >= produceRefMin {
					refs = append(refs, broker.Ref{At: len(dst), B: p.records})
				} else {
					dst = append(dst, p.records...)
				}
			}
			if flex {
				dst = append(dst, 0) // partition's tags
			}
		}
		parts = parts[t.nparts:]
		if flex {
			dst = append(dst, 0) // topic's tags
		}
	}
	if flex {
		dst = append(dst, 0) // request's tags
	}
	return dst, refs
}

// appendLen appends a string's length: int16, or uvarint length+1 (compact).
func appendLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint16(dst, uint16(n))
}

// appendArrayLen appends an array's length: int32, or uvarint length+1.
func appendArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// ReadFrom decodes a request body of r's version (kmsg.Request asks for
// it; kprod itself never decodes requests). Unknown tags are dropped.
func (r *produceRequest) ReadFrom(src []byte) error {
	k := kmsg.NewPtrProduceRequest()
	k.Version = r.version
	if err := k.ReadFrom(src); err != nil {
		return err
	}
	n := 0
	for _, t := range k.Topics {
		n += len(t.Partitions)
	}
	r.init(k.Acks, k.TimeoutMillis, n)
	r.txnID = k.TransactionID
	for _, t := range k.Topics {
		r.topics = append(r.topics, produceTopic{name: t.Topic, id: t.TopicID, nparts: len(t.Partitions)})
		for _, p := range t.Partitions {
			r.parts = append(r.parts, producePart{partition: p.Partition, records: p.Records})
		}
	}
	return nil
}
