package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// versions is the negotiated version table of one connection, indexed by
// API key; -1 means no version in common.
type versions []int16

// negotiate picks, for each key the broker lists, the highest version
// within both the broker's range and what kmsg implements (further capped
// by caps). A broker whose minimum is above our maximum gets -1.
func negotiate(resp *kmsg.ApiVersionsResponse, caps map[int16]int16) versions {
	// Sized by the keys kmsg knows: a key beyond them (up to 32767, which
	// as int16+1 would wrap negative) never gets a version anyway.
	maxKey := int16(0)
	for _, k := range resp.ApiKeys {
		if kmsg.RequestForKey(k.ApiKey) != nil {
			maxKey = max(maxKey, k.ApiKey)
		}
	}
	v := make(versions, int(maxKey)+1)
	for i := range v {
		v[i] = -1
	}
	for _, k := range resp.ApiKeys {
		req := kmsg.RequestForKey(k.ApiKey)
		if req == nil || k.ApiKey < 0 {
			continue
		}
		ours := req.MaxVersion()
		if c, ok := caps[k.ApiKey]; ok {
			ours = min(ours, c)
		}
		if best := min(ours, k.MaxVersion); best >= k.MinVersion {
			v[k.ApiKey] = best
		}
	}
	return v
}

// MinVersioned is a request that cannot go out below some version of its
// API, whatever kmsg implements (the Produce request of a record batch
// in format v2, or of a zstd batch): a broker whose highest version is
// lower fails it with ErrUnsupportedVersion, saying why.
type MinVersioned interface {
	// MinVersion is the lowest version the request can go out in, and
	// what needs it, with what to do (for the error).
	MinVersion() (v int16, why string)
}

func (v versions) get(key int16) (int16, bool) {
	if key < 0 || int(key) >= len(v) || v[key] < 0 {
		return 0, false
	}
	return v[key], true
}
