package kprod

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kprod/kprod/kerr"
)

// PartitionsFor gives every partition with its leader and replicas,
// waits for a topic as Send does, and says why when it cannot.
func TestPartitionsFor(t *testing.T) {
	c := newFake(t, 3)
	cfg := testConfig(c)
	cfg.MaxBlock = 300 * time.Millisecond
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 10*time.Second)
	parts, err := p.PartitionsFor(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Fatalf("%d partitions, want 3", len(parts))
	}
	for i, pi := range parts {
		if pi.Topic != "t" || pi.Partition != int32(i) || pi.Leader == nil || pi.Leader.Host == "" || pi.Leader.Port <= 0 ||
			len(pi.Replicas) == 0 || len(pi.InSyncReplicas) == 0 {
			t.Errorf("partition %d: %+v", i, pi)
		}
	}

	if _, err := p.PartitionsFor(ctx, "no-such-topic"); !errors.Is(err, kerr.ErrUnknownTopic) {
		t.Errorf("PartitionsFor an unknown topic: %v, want ErrUnknownTopic", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.PartitionsFor(short, "no-such-topic"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kerr.ErrMetadataTimeout) {
		t.Errorf("PartitionsFor with its ctx ending first: %v, want the ctx's error", err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PartitionsFor(ctx, "t"); !errors.Is(err, ErrClosed) {
		t.Errorf("PartitionsFor after Close: %v, want ErrClosed", err)
	}
}
