package main

import (
	"context"
	"log/slog"
	"os"
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
	ids *pidWatcher
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
	// Whether kprod really is idempotent is read off what it did rather
	// than off its config: it logs the producer id it got at debug level.
	// (Not by sniffing the connections through cfg.Dial: kprod writes
	// batches with writev only on a plain *net.TCPConn, and copies them
	// into the request on a wrapped one, which is not what users get.)
	ids := newPIDWatcher()
	cfg.Logger = slog.New(ids)
	p, err := kprod.NewProducer(cfg)
	if err != nil {
		return nil, clientInfo{}, err
	}
	c := &kprodClient{p: p, w: w, ids: ids, cfg: cfg}
	c.cb = func(r *kprod.Record, err error) { a.ack(r.Timestamp, err) }
	return c, c.info(), nil
}

func (c *kprodClient) produce(ctx context.Context, k, v []byte, sent time.Time) error {
	c.p.Send(ctx, &kprod.Record{Topic: c.w.topic, Key: k, Value: v, Timestamp: sent}, c.cb)
	return nil
}

func (c *kprodClient) flush(ctx context.Context) error { return c.p.Flush(ctx) }
func (c *kprodClient) close() error                    { return c.p.Close(context.Background()) }

func (c *kprodClient) info() clientInfo {
	idem := c.ids.gotPID.Load()
	notes := "defaults; idempotence requested by default"
	if !idem {
		notes = "sent no InitProducerId: ran non-idempotent (kprod's idempotence was not implemented yet)"
	}
	return clientInfo{Idempotent: yes(idem), Notes: notes, Version: moduleVersion("kprod")}
}

// pidWatcher is kprod's slog handler: it notes whether kprod logged a
// producer id (idempotence.go: Debug "producer id", producer_id >= 0) and
// passes on to next what next wants (warnings and errors on stderr,
// kprod's default). kprod logs at debug level only on rare events
// (connections, metadata, retries), so this costs nothing measurable.
type pidWatcher struct {
	gotPID *atomic.Bool // shared with the handlers WithAttrs and WithGroup make
	next   slog.Handler
}

func newPIDWatcher() *pidWatcher {
	return &pidWatcher{gotPID: new(atomic.Bool), next: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})}
}

func (h *pidWatcher) Enabled(context.Context, slog.Level) bool { return true }

func (h *pidWatcher) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelDebug && r.Message == "producer id" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "producer_id" {
				return true
			}
			if v := a.Value.Resolve(); v.Kind() == slog.KindInt64 && v.Int64() >= 0 {
				h.gotPID.Store(true)
			}
			return false
		})
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *pidWatcher) WithAttrs(as []slog.Attr) slog.Handler {
	return &pidWatcher{gotPID: h.gotPID, next: h.next.WithAttrs(as)}
}

func (h *pidWatcher) WithGroup(name string) slog.Handler {
	return &pidWatcher{gotPID: h.gotPID, next: h.next.WithGroup(name)}
}
