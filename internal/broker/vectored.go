package broker

import (
	"encoding/binary"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Ref is a byte slice that a VectoredRequest hands over by reference
// instead of copying it into the encoded request: B goes on the wire right
// after the first At bytes of the encoded buffer (an offset into the whole
// buffer that AppendVectored returned, not into what it appended).
type Ref struct {
	At int
	B  []byte
}

// VectoredRequest is a request whose large byte fields (produce record
// batches) can go on the wire from their own memory.
//
// AppendVectored appends the request body to dst as AppendTo does, except
// for some byte fields: their length prefix is appended, their contents are
// not; each is appended to refs instead as Ref{At: len(dst) at that point,
// B: the contents}, in order. Splicing every B into the returned buffer at
// its At gives exactly AppendTo's bytes. The slices in refs must stay
// unchanged until the request is written.
//
// Conn.write uses it on a plain TCP connection, which writes the header,
// the body and the referenced slices with one writev; on any other
// connection (TLS, a net.Conn wrapped by a custom Dial) it uses AppendTo.
type VectoredRequest interface {
	kmsg.Request
	AppendVectored(dst []byte, refs []Ref) ([]byte, []Ref)
}

// appendVectored appends req's frame to buf as c.format.AppendRequest
// would, but with the byte fields req hands over by reference left out
// and returned as refs (see VectoredRequest); the size field counts them.
// The header is the formatter's, byte for byte: size, api key, version,
// correlation id, the client id as a nullable string with an int16 length
// (never compact, so that old brokers parse it), and an empty tag section
// for a flexible version. kprod's formatter always has a client id (maybe
// empty), never a null one. (The formatter's one exception, ControlledShutdown
// v0 without a client id, is no VectoredRequest.)
func (c *Conn) appendVectored(buf []byte, req VectoredRequest, corr int32, refs []Ref) ([]byte, []Ref) {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0) // size, set below
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(c.cfg.ClientID)))
	buf = append(buf, c.cfg.ClientID...)
	if req.IsFlexible() {
		buf = append(buf, 0) // no tagged fields
	}
	buf, refs = req.AppendVectored(buf, refs)
	size := len(buf) - start - 4
	for _, r := range refs {
		size += len(r.B)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(size))
	return buf, refs
}

// writeVectored writes buf with refs spliced in, with one writev (more if
// there are over a thousand slices) through net.Buffers. c.vecs and c.wvecs
// are the writer goroutine's, reused so that a write allocates nothing;
// WriteTo consumes c.wvecs, c.vecs keeps the backing array. Both are
// cleared afterwards so that they do not keep batches' memory alive.
func (c *Conn) writeVectored(tc *net.TCPConn, buf []byte, refs []Ref) error {
	v := c.vecs[:0]
	at := 0
	for _, r := range refs {
		if r.At > at {
			v = append(v, buf[at:r.At])
			at = r.At
		}
		if len(r.B) > 0 {
			v = append(v, r.B)
		}
	}
	if at < len(buf) {
		v = append(v, buf[at:])
	}
	c.vecs = v
	c.wvecs = v
	_, err := c.wvecs.WriteTo(tc)
	clear(c.vecs)
	c.wvecs = nil
	return err
}
