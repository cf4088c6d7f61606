package testcluster

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CountEndTxn counts the EndTxn requests that reach the kfake cluster c,
// commits and aborts, for tests of transactional producers on either
// side of the CLI. It takes c's EndTxn control, passing every request on.
func CountEndTxn(c *kfake.Cluster) (commits, aborts *atomic.Int32) {
	commits, aborts = new(atomic.Int32), new(atomic.Int32)
	c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if kreq.(*kmsg.EndTxnRequest).Commit {
			commits.Add(1)
		} else {
			aborts.Add(1)
		}
		return nil, nil, false
	})
	return commits, aborts
}
