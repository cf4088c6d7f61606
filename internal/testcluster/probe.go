package testcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newClient returns a quiet client seeded with addrs that gives up quickly on
// a dead address; callers bound each request with a context.
func newClient(addrs ...string) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.DialTimeout(2*time.Second),
		kgo.RetryTimeout(5*time.Second),
		kgo.ClientID("kprod-testcluster"),
	)
}

// ProbeBroker sends ApiVersions and then Metadata (no topics) to the one
// broker at addr and returns the node ids of the brokers that the metadata
// lists, i.e. the brokers that are registered and unfenced as that broker
// sees them.
func ProbeBroker(ctx context.Context, addr string) ([]int32, error) {
	cl, err := newClient(addr)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return nil, fmt.Errorf("%s: bad address", addr)
	}
	b := seeds[0]

	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName = "kprod-testcluster"
	av.ClientSoftwareVersion = "0"
	raw, err := b.Request(ctx, av)
	if err != nil {
		return nil, fmt.Errorf("%s: ApiVersions: %w", addr, err)
	}
	if code := raw.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		return nil, fmt.Errorf("%s: ApiVersions error code %d", addr, code)
	}

	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{} // none; nil would mean all
	raw, err = b.Request(ctx, md)
	if err != nil {
		return nil, fmt.Errorf("%s: Metadata: %w", addr, err)
	}
	resp := raw.(*kmsg.MetadataResponse)
	ids := make([]int32, 0, len(resp.Brokers))
	for _, br := range resp.Brokers {
		ids = append(ids, br.NodeID)
	}
	slices.Sort(ids)
	return ids, nil
}

// Probe checks once that every address in addrs answers ApiVersions and
// Metadata and that each one's metadata lists every node id in want.
func Probe(ctx context.Context, addrs []string, want []int32) error {
	var errs []error
	for _, addr := range addrs {
		ids, err := ProbeBroker(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range want {
			if !slices.Contains(ids, w) {
				errs = append(errs, fmt.Errorf("%s: metadata lists brokers %v, want %v", addr, ids, want))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Ping checks once that every address answers ApiVersions.
func Ping(ctx context.Context, addrs []string) error {
	var errs []error
	for _, addr := range addrs {
		cl, err := newClient(addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
		cl.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: ApiVersions: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

// WaitFor calls check every interval until it returns nil or ctx is done,
// and then returns check's last error.
func WaitFor(ctx context.Context, interval time.Duration, check func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(attempt)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(interval):
		}
	}
}
