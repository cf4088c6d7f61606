package kprod

import (
	"fmt"
	"io"
	"strconv"
)

// Interceptor sees records on their way in and their outcomes on their way
// out, as the Java client's ProducerInterceptor does. Set them with
// Config.Interceptors (Java: interceptor.classes, which names Java
// classes and so is ignored by Config.Set); they run in slice order.
//
// OnSend runs first in Send, on the caller's goroutine, before the record
// is checked, partitioned or buffered. It returns the record to send: r
// itself (possibly modified) or a new record, which the next interceptor
// receives; nil means r unchanged. The caller's callback still receives
// the record the caller passed to Send, with the outcome of the record
// that was sent copied into it: partition, offset and leader epoch (the
// failure's -1s too, see Record), and on success the timestamp.
//
// OnAcknowledgement runs once per record, before the record's callback,
// with the record as sent and the outcome: on the producer's sender
// goroutine once the broker answered (or the record timed out), or on the
// caller's goroutine when the record failed before it was buffered (bad
// record, unknown topic, full buffer, closed producer, or a
// TypedProducer serializer error, for which OnSend is not called and the
// record carries no key or value). r is nil only if Send was given a nil
// record. Like callbacks, OnAcknowledgement must be fast and must not
// block: it delays every other record's delivery.
//
// An interceptor that panics is logged at warn level through
// Config.Logger, with its type, and otherwise ignored, as Java ignores
// exceptions from interceptors: after a panic in OnSend the record that
// interceptor was given goes on to the next one, with any change the
// interceptor made to it before it panicked.
//
// Both methods are called concurrently from many goroutines.
//
// An interceptor that also implements io.Closer is closed by
// Producer.Close, as Java's KafkaProducer.close closes its interceptors:
// once, in slice order, after the producer has stopped and so after the
// OnAcknowledgement of every record it buffered. A Close that returns an
// error or panics is logged at error level and ignored, as in Java: the
// next interceptor is still closed and Producer.Close's result is
// unchanged. A record that fails without being buffered, such as one
// given to Send during or after Close (ErrClosed), reaches
// OnAcknowledgement on its caller's goroutine, possibly after the
// interceptor was closed (in Java too).
type Interceptor interface {
	OnSend(r *Record) *Record
	OnAcknowledgement(r *Record, err error)
}

// InterceptorFuncs is an Interceptor made of functions; nil ones do
// nothing.
type InterceptorFuncs struct {
	Send func(r *Record) *Record
	Ack  func(r *Record, err error)
}

// OnSend calls f.Send if set.
func (f InterceptorFuncs) OnSend(r *Record) *Record {
	if f.Send == nil {
		return r
	}
	return f.Send(r)
}

// OnAcknowledgement calls f.Ack if set.
func (f InterceptorFuncs) OnAcknowledgement(r *Record, err error) {
	if f.Ack != nil {
		f.Ack(r, err)
	}
}

// validatePlugins checks the Go-only settings that Validate does not
// know about: Interceptors.
func (c *Config) validatePlugins() error {
	for i, ic := range c.Interceptors {
		if ic == nil {
			return invalid("interceptor.classes", "Config.Interceptors["+strconv.Itoa(i)+"]",
				"is nil; remove it or give an Interceptor")
		}
	}
	return nil
}

// intercept runs the OnSend chain on r and returns the record to send and
// the callback to give it: one that runs every OnAcknowledgement, copies
// the outcome into the caller's record and then calls cb with it.
func (p *Producer) intercept(r *Record, cb func(*Record, error)) (*Record, func(*Record, error)) {
	orig := r
	if r != nil {
		for _, ic := range p.cfg.Interceptors {
			r = p.onSend(ic, r)
		}
	}
	return r, func(sent *Record, err error) {
		p.onAcknowledgement(sent, err)
		if sent != orig && sent != nil && orig != nil {
			// A failure's fields too (-1 offset and leader epoch, the
			// partition or -1): left alone, the caller's zeros would
			// read as a delivery to partition 0 at offset 0.
			orig.Partition = sent.Partition
			orig.Offset = sent.Offset
			orig.LeaderEpoch = sent.LeaderEpoch
			if err == nil {
				orig.Timestamp = sent.Timestamp
			}
		}
		cb(orig, err)
	}
}

func (p *Producer) onSend(ic Interceptor, r *Record) (out *Record) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Warn("interceptor OnSend panicked; the record it was given goes on, with any change it made before it panicked",
				"interceptor", fmt.Sprintf("%T", ic), "topic", r.Topic, "panic", v)
			out = r
		}
	}()
	if out = ic.OnSend(r); out == nil {
		out = r
	}
	return out
}

// onAcknowledgement runs every interceptor's OnAcknowledgement.
func (p *Producer) onAcknowledgement(r *Record, err error) {
	for _, ic := range p.cfg.Interceptors {
		p.ackOne(ic, r, err)
	}
}

func (p *Producer) ackOne(ic Interceptor, r *Record, err error) {
	defer func() {
		if v := recover(); v != nil {
			topic := ""
			if r != nil {
				topic = r.Topic
			}
			p.log.Warn("interceptor OnAcknowledgement panicked; ignored",
				"interceptor", fmt.Sprintf("%T", ic), "topic", topic, "panic", v)
		}
	}()
	ic.OnAcknowledgement(r, err)
}

// closeInterceptors closes the interceptors that implement io.Closer, in
// slice order; Close calls it once the sender has ended. As Java's
// ProducerInterceptors.close, a failure is logged and swallowed: one
// interceptor's broken Close must not keep the others from releasing
// their resources, and the records' outcomes are already known.
func (p *Producer) closeInterceptors() {
	for _, ic := range p.cfg.Interceptors {
		if c, ok := ic.(io.Closer); ok {
			p.closeOne("interceptor", c)
		}
	}
}

// closeOne closes c, a user's plug-in of the given kind, logging and
// swallowing a failure or a panic.
func (p *Producer) closeOne(kind string, c io.Closer) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error(kind+" Close panicked; ignored",
				kind, fmt.Sprintf("%T", c), "panic", v)
		}
	}()
	if err := c.Close(); err != nil {
		p.log.Error(kind+" Close failed; ignored",
			kind, fmt.Sprintf("%T", c), "err", err)
	}
}
