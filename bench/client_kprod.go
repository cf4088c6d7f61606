package main

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod"
)

// kprodClient runs kprod with its defaults (those of the Java producer)
// plus the workload's settings, given by their Java property names.
type kprodClient struct {
	p   *kprod.Producer
	w   *workload
	cb  func(*kprod.Record, error)
	ids *apiKeySniffer
	cfg kprod.Config
}

func newKprod(w *workload, a *acker) (producer, clientInfo, error) {
	cfg := kprod.DefaultConfig()
	props := map[string]string{
		"bootstrap.servers": strings.Join(w.brokers, ","),
		"client.id":         w.clientID,
		"acks":              "all",
		"linger.ms":         "5",
		"batch.size":        strconv.Itoa(w.batch),
		"buffer.memory":     strconv.Itoa(bufferMemory),
		"compression.type":  w.compression,
	}
	for k, v := range props {
		if err := cfg.Set(k, v); err != nil {
			return nil, clientInfo{}, err
		}
	}
	// Whether kprod really is idempotent is read off the wire rather than
	// off its config: the sniffer notes whether an InitProducerId request
	// goes out before the first Produce, then steps aside.
	ids := &apiKeySniffer{}
	var d net.Dialer
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &sniffConn{Conn: c, s: ids}, nil
	}
	p, err := kprod.NewProducer(cfg)
	if err != nil {
		return nil, clientInfo{}, err
	}
	c := &kprodClient{p: p, w: w, ids: ids, cfg: cfg}
	c.cb = func(r *kprod.Record, err error) { a.ack(r.Timestamp, err) }
	return c, c.info(), nil
}

func (c *kprodClient) produce(ctx context.Context, v []byte, sent time.Time) error {
	c.p.Send(ctx, &kprod.Record{Topic: c.w.topic, Value: v, Timestamp: sent}, c.cb)
	return nil
}

func (c *kprodClient) flush(ctx context.Context) error { return c.p.Flush(ctx) }
func (c *kprodClient) close() error                    { return c.p.Close(context.Background()) }

func (c *kprodClient) info() clientInfo {
	idem := c.ids.initProducerID.Load()
	notes := "defaults; idempotence requested by default"
	if !idem {
		notes = "sent no InitProducerId: ran non-idempotent (kprod's idempotence was not implemented yet)"
	}
	return clientInfo{Idempotent: yes(idem), Notes: notes, Version: moduleVersion("kprod")}
}

// apiKeySniffer records which Kafka requests a connection wrote.
type apiKeySniffer struct {
	initProducerID atomic.Bool
}

// sniffConn parses the request frames written to a connection (int32
// size, int16 api key, ...) until the first Produce request (key 0); from
// then on a Write costs one bool test.
type sniffConn struct {
	net.Conn
	s    *apiKeySniffer
	done bool
	skip int
	hdr  [6]byte
	nhdr int
}

func (c *sniffConn) Write(b []byte) (int, error) {
	if !c.done {
		c.scan(b)
	}
	return c.Conn.Write(b)
}

func (c *sniffConn) scan(p []byte) {
	for len(p) > 0 && !c.done {
		if c.skip > 0 {
			n := min(c.skip, len(p))
			c.skip -= n
			p = p[n:]
			continue
		}
		n := copy(c.hdr[c.nhdr:], p)
		c.nhdr += n
		p = p[n:]
		if c.nhdr < len(c.hdr) {
			return
		}
		c.nhdr = 0
		size := int(int32(binary.BigEndian.Uint32(c.hdr[:4])))
		switch int16(binary.BigEndian.Uint16(c.hdr[4:])) {
		case 22: // InitProducerId
			c.s.initProducerID.Store(true)
		case 0: // Produce
			c.done = true
		}
		c.skip = size - 2
	}
}
