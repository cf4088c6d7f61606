package cluster

import (
	"maps"
	"slices"
)

// LeaderHint is a partition's current leader as a broker named it in an
// error answer (KIP-951: a produce response's CurrentLeader with
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH).
type LeaderHint struct {
	Topic     string
	Partition int32
	Leader    int32
	Epoch     int32
}

// UpdateLeaders installs leaders that brokers named, without waiting for
// a Metadata request, as the Java client does since KIP-951: a hint is
// applied when its epoch is newer than the snapshot's for that partition
// and its leader is a broker that the snapshot or nodes (the response's
// NodeEndpoints) knows; a broker known only from nodes joins the
// snapshot. A later Metadata response replaces it unless it knows the
// partition at an older leader epoch (keepNewerLeaders). It
// returns the hints applied.
func (c *Client) UpdateLeaders(hints []LeaderHint, nodes []BrokerInfo) []LeaderHint {
	var applied []LeaderHint
	c.mu.Lock()
	if c.closed {
		// The sender still handles answers after a forced Close; a
		// Broker added now would outlive the Client.
		c.mu.Unlock()
		return nil
	}
	old := c.snap.Load()
	s := *old // copied on write below: the old snapshot stays as it was
	copied := map[string]bool{}
	brokersCopied := false
	for _, h := range hints {
		t := s.Topics[h.Topic]
		if t == nil || t.Err != nil || h.Partition < 0 || int(h.Partition) >= len(t.Partitions) ||
			h.Leader < 0 || h.Epoch <= t.Partitions[h.Partition].LeaderEpoch {
			continue
		}
		if _, ok := s.Brokers[h.Leader]; !ok {
			i := slices.IndexFunc(nodes, func(n BrokerInfo) bool { return n.ID == h.Leader })
			if i < 0 {
				continue // a leader we could not connect to
			}
			if !brokersCopied {
				s.Brokers = maps.Clone(old.Brokers)
				brokersCopied = true
			}
			s.Brokers[h.Leader] = nodes[i]
			if c.brokers[h.Leader] == nil {
				c.brokers[h.Leader] = c.unretireLocked(h.Leader, nodes[i].Addr())
			}
		}
		if len(copied) == 0 {
			s.Topics = maps.Clone(old.Topics)
		}
		if !copied[h.Topic] {
			nt := *t
			nt.Partitions = slices.Clone(t.Partitions)
			t = &nt
			s.Topics[h.Topic] = t
			copied[h.Topic] = true
		}
		p := &t.Partitions[h.Partition]
		p.Leader, p.LeaderEpoch = h.Leader, h.Epoch
		applied = append(applied, h)
	}
	if len(applied) == 0 {
		c.mu.Unlock()
		return nil
	}
	for name := range copied {
		t := s.Topics[name]
		t.LedFromRack = ledFromRack(t.Partitions, s.Brokers)
	}
	// s.At stays the time of the last Metadata response: hints do not
	// put off the refresh metadata.max.age.ms asks for.
	c.snap.Store(&s)
	c.mu.Unlock()
	if c.cfg.OnUpdate != nil {
		c.cfg.OnUpdate(&s)
	}
	return applied
}
