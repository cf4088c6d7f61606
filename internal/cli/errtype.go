package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/kerr"
)

// errorType names the kind of a record's failure for the "errors by type"
// summaries: the name of the kerr sentinel it wraps ("ErrDeliveryTimeout")
// or the Kafka name of the broker error ("NOT_ENOUGH_REPLICAS").
//
// An error can wrap several: a delivery timeout wraps the last broker
// error, a metadata timeout the dial error behind it. The outcome the
// record met comes first (timed out, aborted, unknown topic...); the cause
// is in the message.
func errorType(err error) string {
	for _, s := range outcomeSentinels {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	var be *kerr.BrokerError
	if errors.As(err, &be) {
		return be.Name
	}
	for _, s := range causeSentinels {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "context.DeadlineExceeded"
	}
	return "other"
}

type namedErr struct {
	name string
	err  error
}

var outcomeSentinels = []namedErr{
	{"ErrDeliveryTimeout", kerr.ErrDeliveryTimeout},
	{"ErrAborted", kerr.ErrAborted},
	{"ErrClosed", kerr.ErrClosed},
	{"ErrProducerFenced", kerr.ErrProducerFenced}, // wraps ErrFatal
	{"ErrFatal", kerr.ErrFatal},
	{"ErrTransactionAborted", kerr.ErrTransactionAborted},
	{"ErrTransactionAbortable", kerr.ErrTransactionAbortable},
	{"ErrTransactionState", kerr.ErrTransactionState},
	{"ErrBatchRejected", kerr.ErrBatchRejected},
	{"ErrSerialization", kerr.ErrSerialization},
	{"ErrAuthentication", kerr.ErrAuthentication},
	{"ErrUnknownTopic", kerr.ErrUnknownTopic},
	{"ErrUnknownPartition", kerr.ErrUnknownPartition},
	{"ErrMetadataTimeout", kerr.ErrMetadataTimeout},
	{"ErrBufferFull", kerr.ErrBufferFull},
	{"ErrInvalidRecord", kerr.ErrInvalidRecord},
	{"ErrInvalidConfig", kerr.ErrInvalidConfig},
}

// causeSentinels come after the broker's error name. ErrRecordTooLarge is
// one of them because the broker's MESSAGE_TOO_LARGE matches it too and
// is named as the broker names it.
var causeSentinels = []namedErr{
	{"ErrRecordTooLarge", kerr.ErrRecordTooLarge},
	{"ErrRequestTimeout", kerr.ErrRequestTimeout},
	{"ErrConnectionLost", kerr.ErrConnectionLost},
	{"ErrDial", kerr.ErrDial},
	{"ErrUnsupportedVersion", kerr.ErrUnsupportedVersion},
	{"ErrTooManyInFlight", kerr.ErrTooManyInFlight},
	{"ErrTLS", kerr.ErrTLS},
}

// stopsTheRun reports errors after which every following record would
// wait max.block.ms and fail the same way: the cluster took no record
// (unknown topic, no metadata from unreachable brokers, no metadata or a
// full buffer while nothing was acknowledged), or the partition that every record of "produce
// --partition" names does not exist. The commands stop instead of hanging
// record by record. A full buffer while records were being acknowledged
// (in the last max.block.ms, and at least the last stallAfter: with a
// small max.block.ms a record fails fast, and nothing hangs) only means
// the cluster is slower than the input: that record fails and the run
// goes on, as ProducerPerformance's does. Refused credentials or TLS
// (not a transient TLS failure) and a producer in a fatal state fail
// every record at once: the run stops too.
func stopsTheRun(err error, lastAck *progress, maxBlock time.Duration) bool {
	if errors.Is(err, kerr.ErrBufferFull) ||
		// No metadata within max.block.ms while the brokers could be
		// reached: an answer slower than a short max.block.ms (or
		// max.block.ms=0) fails that record only, as in Java; a
		// cluster that stays silent stops the run as a full buffer does.
		// (A partition that never appeared says ErrMetadataTimeout too;
		// every record of "produce --partition" names it: it stops.)
		errors.Is(err, kerr.ErrMetadataTimeout) && !errors.Is(err, kerr.ErrDial) && !errors.Is(err, kerr.ErrUnknownPartition) {
		return !lastAck.within(max(maxBlock, stallAfter))
	}
	return errors.Is(err, kerr.ErrUnknownTopic) || errors.Is(err, kerr.ErrMetadataTimeout) ||
		errors.Is(err, kerr.ErrUnknownPartition) || errors.Is(err, kerr.ErrAuthentication) ||
		(errors.Is(err, kerr.ErrTLS) && !kerr.IsRetriable(err)) || errors.Is(err, kerr.ErrFatal)
}

// stallAfter is how long without an acknowledgement a full buffer must
// last before a run stops for it.
const stallAfter = 10 * time.Second

// progress is when a record was last acknowledged (or the run started).
type progress struct{ at atomic.Int64 } // monoNow()+1; 0: never

func (p *progress) mark() { p.markAt(monoNow()) }

// markAt is mark for a callback that has read the clock (monoNow) anyway.
func (p *progress) markAt(now time.Duration) { p.at.Store(int64(now) + 1) }

func (p *progress) within(d time.Duration) bool {
	at := p.at.Load()
	return at != 0 && monoNow()-time.Duration(at-1) <= d
}

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow is the time since monoBase, from the monotonic clock alone: one
// clock read where time.Now makes two (wall and monotonic), which counts
// in the callbacks of a run of millions of records.
func monoNow() time.Duration { return time.Since(monoBase) }

// failures counts failed records by type and keeps the first few messages.
// Callbacks add to it from the producer's goroutines.
type failures struct {
	mu     sync.Mutex
	byType map[string]int64
	total  int64
	first  []string
}

const keepErrors = 5

func (f *failures) add(where string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byType == nil {
		f.byType = map[string]int64{}
	}
	f.byType[errorType(err)]++
	f.total++
	if len(f.first) < keepErrors {
		msg := err.Error()
		if where != "" {
			msg = where + ": " + msg
		}
		f.first = append(f.first, msg)
	}
}

func (f *failures) count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}

// snapshot returns a copy of the counts by type (never nil).
func (f *failures) snapshot() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int64, len(f.byType))
	for k, v := range f.byType {
		out[k] = v
	}
	return out
}

// summary is "ErrDeliveryTimeout=3, NOT_ENOUGH_REPLICAS=1", most frequent
// first.
func (f *failures) summary() string {
	m := f.snapshot()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// onlyIs reports whether the one failure counted has the message msg.
func (f *failures) onlyIs(msg string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total == 1 && len(f.first) == 1 && f.first[0] == msg
}

// printFirst writes the first errors kept, one a line.
func (f *failures) printFirst(w io.Writer, prefix string) {
	f.mu.Lock()
	first := slices.Clone(f.first)
	total := f.total
	f.mu.Unlock()
	if len(first) == 0 {
		return
	}
	if total > int64(len(first)) {
		fmt.Fprintf(w, "%sthe first %d errors of %d:\n", prefix, len(first), total)
	}
	for _, m := range first {
		fmt.Fprintf(w, "%s  %s\n", prefix, m)
	}
}
