package recbatch

import (
	"encoding/binary"
	"fmt"
)

// DecodedRecord is a record read back from a batch: its absolute
// timestamp, key, value and headers, which alias the bytes decoded (a
// nil key, value or header value is a null one).
type DecodedRecord struct {
	TimestampMs int64
	Key, Value  []byte
	Headers     []Header
}

// Records reads back the batch's records, whether the batch is open or
// sealed, compressed or not, and appends them to dst: for a batch split
// after MESSAGE_TOO_LARGE, so that its parts hold what was encoded at
// Send, not what the caller's slices hold now (the Java client's
// ProducerBatch.split reads its own records too). A compressed batch is
// decompressed (with a Decompressor made for the call: splits are rare);
// the records then alias a new buffer, else the Builder's, and are valid
// until the next Reset or Release.
func (b *Builder) Records(dst []DecodedRecord) ([]DecodedRecord, error) {
	raw := b.buf[HeaderSize:]
	if b.codec != None {
		d, err := NewDecompressor(b.rawLen - HeaderSize)
		if err != nil {
			return dst, err
		}
		raw, err = d.AppendDecompressed(make([]byte, 0, b.rawLen-HeaderSize), raw, b.codec)
		d.Close()
		if err != nil {
			return dst, fmt.Errorf("recbatch: decompressing the batch's records: %w", err)
		}
	}
	start := len(dst)
	for i := range int(b.n) {
		r, rest, err := decodeRecord(raw, b.baseTs)
		if err != nil {
			return dst[:start], fmt.Errorf("recbatch: record %d of %d: %w", i, b.n, err)
		}
		dst = append(dst, r)
		raw = rest
	}
	if len(raw) != 0 {
		return dst[:start], fmt.Errorf("recbatch: %d bytes after the batch's %d records", len(raw), b.n)
	}
	return dst, nil
}

// decodeRecord reads one record (length, attributes, timestamp delta,
// offset delta, key, value, headers) from the start of p.
func decodeRecord(p []byte, baseTs int64) (DecodedRecord, []byte, error) {
	var r DecodedRecord
	length, n := binary.Varint(p)
	if n <= 0 || length < 0 || int64(len(p)-n) < length {
		return r, nil, ErrMalformedBatch
	}
	body, rest := p[n:n+int(length)], p[n+int(length):]
	if len(body) < 1 {
		return r, nil, ErrMalformedBatch
	}
	body = body[1:] // attributes: none are defined for records
	tsDelta, n := binary.Varint(body)
	if n <= 0 {
		return r, nil, ErrMalformedBatch
	}
	body = body[n:]
	r.TimestampMs = baseTs + tsDelta
	if _, n = binary.Varint(body); n <= 0 { // offset delta: the record's place
		return r, nil, ErrMalformedBatch
	}
	body = body[n:]
	var ok bool
	if r.Key, body, ok = nullableBytes(body); !ok {
		return r, nil, ErrMalformedBatch
	}
	if r.Value, body, ok = nullableBytes(body); !ok {
		return r, nil, ErrMalformedBatch
	}
	count, n := binary.Varint(body)
	if n <= 0 || count < 0 || count > int64(len(body)) {
		return r, nil, ErrMalformedBatch
	}
	body = body[n:]
	if count > 0 {
		r.Headers = make([]Header, count)
	}
	for i := range r.Headers {
		klen, n := binary.Varint(body)
		if n <= 0 || klen < 0 || int64(len(body)-n) < klen {
			return r, nil, ErrMalformedBatch
		}
		r.Headers[i].Key = string(body[n : n+int(klen)])
		body = body[n+int(klen):]
		if r.Headers[i].Value, body, ok = nullableBytes(body); !ok {
			return r, nil, ErrMalformedBatch
		}
	}
	if len(body) != 0 {
		return r, nil, ErrMalformedBatch
	}
	return r, rest, nil
}

// nullableBytes reads a varint length (-1: null) and that many bytes.
func nullableBytes(p []byte) (v, rest []byte, ok bool) {
	l, n := binary.Varint(p)
	if n <= 0 || l < -1 || int64(len(p)-n) < l {
		return nil, nil, false
	}
	if l == -1 {
		return nil, p[n:], true
	}
	return p[n : n+int(l) : n+int(l)], p[n+int(l):], true
}
