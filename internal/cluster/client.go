// Package cluster is kprod's network client: the set of brokers, the
// cluster metadata (the Java client's Metadata/ProducerMetadata) and the
// choice of the least-loaded broker.
//
// Metadata is refreshed by one goroutine: when metadata.max.age.ms has
// passed, and on demand (Refresh, RequestRefresh). Concurrent requests for
// a refresh share one Metadata request (single flight). Only the topics in
// use are requested; a topic not used for metadata.max.idle.ms is dropped.
// Readers take the current *Snapshot with one atomic load.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kprod/kprod/internal/broker"
	"github.com/kprod/kprod/internal/live"
	"github.com/kprod/kprod/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is what the client needs beyond the connection settings.
type Config struct {
	Broker    *broker.Config
	Bootstrap []string // bootstrap.servers, host:port each

	MetadataMaxAge  time.Duration // metadata.max.age.ms
	MetadataMaxIdle time.Duration // metadata.max.idle.ms
	RetryBackoff    time.Duration // retry.backoff.ms: least time between refreshes after one
	RetryBackoffMax time.Duration // retry.backoff.max.ms

	// AutoCreateTopics asks brokers to create unknown topics
	// (allow.auto.create.topics, default true).
	AutoCreateTopics bool

	// Rebootstrap (metadata.recovery.strategy=rebootstrap) goes back to
	// the bootstrap addresses when the brokers the metadata named stop
	// answering: when none of them answered the last refresh, when a
	// broker answers REBOOTSTRAP_REQUIRED, or when refreshes have failed
	// for RebootstrapTrigger (metadata.recovery.rebootstrap.trigger.ms).
	Rebootstrap        bool
	RebootstrapTrigger time.Duration

	// OnUpdate is called after each new snapshot is stored, without locks
	// held (the sender uses it to wake up). It must not block.
	OnUpdate func(*Snapshot)

	Logger *slog.Logger
}

// Client holds the brokers and the metadata. Create with New; Close ends
// its goroutine and every connection.
type Client struct {
	cfg  Config
	snap atomic.Pointer[Snapshot]

	mu        sync.Mutex
	brokers   map[int32]*broker.Broker // by node id, from metadata; guarded by mu
	bootstrap []*broker.Broker         // used until the first metadata lists brokers; guarded by mu
	retired   []*broker.Broker         // left the metadata with requests in flight; guarded by mu
	topics    map[string]*Use          // every topic ever used, dropped ones too (one handle per name); guarded by mu
	next      *refresh                 // the refresh that the next request will serve; guarded by mu
	requests  int64                    // Metadata requests sent, for tests; guarded by mu

	// Owned by the loop goroutine (refresh): why the next refresh should
	// go back to the bootstrap addresses.
	failingSince time.Time // start of the refreshes failing since the last success; zero after one
	unanswered   bool      // no broker answered the last refresh
	toldToReboot bool      // a broker answered REBOOTSTRAP_REQUIRED
	progressed   bool      // the last answer named a new leader epoch or topic
	undialable   bool      // every broker the next refresh could ask was backing off

	trigger   chan struct{} // cap 1: a refresh is wanted
	newTopic  chan struct{} // cap 1: a topic was added or revived: refresh without the backoff
	quit      chan struct{}
	closed    bool // Close took the brokers; guarded by mu
	closeOnce sync.Once
	ctx       context.Context // ends requests under way on Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// refresh is one single-flight Metadata request; every caller that asked
// for it waits on done and reads err.
type refresh struct {
	done chan struct{}
	err  error
}

// Use marks a topic as in use; Touch it on every send (one atomic store).
// There is one handle per topic name for the life of the Client, so it
// can be cached: if its topic was dropped for being idle longer than
// metadata.max.idle.ms, the next Touch (or UseTopic) puts it back and
// asks for a refresh, as the Java client's ProducerMetadata.add does on
// every send.
type Use struct {
	c        *Client
	name     string
	lastUsed atomic.Int64 // unix nanos
	// dropped: not asked for in metadata requests. Changed under c.mu.
	// buildRequest sets it before its last look at lastUsed and Touch
	// reads it after its store, so one of the two sees the other.
	dropped atomic.Bool
}

// touchEvery is how stale lastUsed may get before Touch stores again: a
// load costs less than a store to a line other goroutines read, and
// metadata.max.idle.ms is minutes, not milliseconds.
const touchEvery = int64(100 * time.Millisecond)

// Touch records that the topic was used at now (unix nanos).
func (u *Use) Touch(now int64) {
	if now-u.lastUsed.Load() >= touchEvery {
		u.lastUsed.Store(now)
	}
	if u.dropped.Load() {
		u.c.revive(u)
	}
}

// revive puts a dropped topic back into metadata requests.
func (c *Client) revive(u *Use) {
	c.mu.Lock()
	was := u.dropped.Load()
	u.dropped.Store(false)
	c.mu.Unlock()
	if was {
		c.cfg.Logger.Debug("topic in use again", "topic", u.name)
		c.topicAdded()
	}
}

// New resolves nothing yet and dials nothing yet: the first refresh does.
func New(cfg Config) (*Client, error) {
	if len(cfg.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: bootstrap.servers is empty; give at least one host:port", kerr.ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Client{
		cfg:      cfg,
		brokers:  map[int32]*broker.Broker{},
		topics:   map[string]*Use{},
		next:     &refresh{done: make(chan struct{})},
		trigger:  make(chan struct{}, 1),
		newTopic: make(chan struct{}, 1),
		quit:     make(chan struct{}),
	}
	for _, addr := range cfg.Bootstrap {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: bootstrap.servers entry %q is not host:port: %v", kerr.ErrInvalidConfig, addr, err)
		}
	}
	// A lost connection or a failed dial asks for new metadata (see
	// broker.Config.OnDisconnect), set on a copy of the config so that
	// the caller's is left as it was.
	bc := *cfg.Broker
	onDisconnect := bc.OnDisconnect
	bc.OnDisconnect = func(id int32) {
		c.RequestRefresh()
		if onDisconnect != nil {
			onDisconnect(id)
		}
	}
	c.cfg.Broker = &bc
	c.bootstrap = newBootstrap(c.cfg)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.snap.Store(emptySnapshot)
	c.wg.Add(1)
	live.Go()
	go c.loop()
	return c, nil
}

// newBootstrap makes a Broker for each bootstrap address. Negative ids
// keep bootstrap connections apart from the nodes that metadata names, as
// the Java client does.
func newBootstrap(cfg Config) []*broker.Broker {
	bs := make([]*broker.Broker, len(cfg.Bootstrap))
	for i, addr := range cfg.Bootstrap {
		bs[i] = broker.NewBroker(int32(-1-i), addr, cfg.Broker)
	}
	return bs
}

// Snapshot returns the current metadata (never nil).
func (c *Client) Snapshot() *Snapshot { return c.snap.Load() }

// MetadataRequests is how many Metadata requests were sent so far.
func (c *Client) MetadataRequests() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Broker returns the broker with node id, or nil if metadata does not
// list it.
func (c *Client) Broker(id int32) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id]
}

// Brokers returns the brokers metadata lists, by node id.
func (c *Client) Brokers() []*broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*broker.Broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// UseTopic marks a topic as in use, so that refreshes ask for it, and
// returns its handle. A new topic triggers a refresh.
func (c *Client) UseTopic(name string) *Use {
	c.mu.Lock()
	u, ok := c.topics[name]
	if !ok {
		u = &Use{c: c, name: name}
		c.topics[name] = u
	}
	c.mu.Unlock()
	u.Touch(time.Now().UnixNano()) // revives a dropped topic
	if !ok {
		c.topicAdded()
	}
	return u
}

// topicAdded asks for a refresh now, cutting short the backoff since the
// last one, as Java's requestUpdateForNewTopics does.
func (c *Client) topicAdded() {
	select {
	case c.newTopic <- struct{}{}:
	default:
	}
	c.RequestRefresh()
}

// RequestRefresh asks for a refresh without waiting for it.
func (c *Client) RequestRefresh() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Refresh asks for a refresh and waits until one that started after this
// call has finished, or ctx ends. Concurrent callers share one request.
func (c *Client) Refresh(ctx context.Context) error {
	c.mu.Lock()
	r := c.next
	c.mu.Unlock()
	c.RequestRefresh()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.quit:
		return kerr.ErrClosed
	}
}

// WaitTopic returns the topic's metadata once it is known with at least
// one partition, refreshing as needed, until ctx ends (the producer gives
// it max.block.ms). The broker may auto-create the topic meanwhile.
func (c *Client) WaitTopic(ctx context.Context, name string) (*Topic, error) {
	u := c.UseTopic(name)
	var lastErr error
	fresh := false  // a refresh that started during this call has answered
	failed := false // the last refresh of this call failed
	for {
		// Kept in use while it is waited for, as Java's waitOnMetadata
		// adds the topic again on every round: a wait longer than
		// metadata.max.idle.ms must not drop the topic it waits for.
		u.Touch(time.Now().UnixNano())
		t := c.Snapshot().Topics[name]
		if t != nil {
			if t.Err == nil && len(t.Partitions) > 0 {
				return t, nil
			}
			if t.Err != nil {
				lastErr = t.Err
				// A non-retriable error (TOPIC_AUTHORIZATION_FAILED) is
				// returned from an answer to this call only, as Java asks
				// again before it throws one: the ACL may have been
				// granted since. An invalid name fails at once.
				if !kerr.IsRetriable(t.Err) && (fresh || errors.Is(t.Err, kerr.InvalidTopicException)) {
					return nil, fmt.Errorf("topic %q: %w", name, t.Err)
				}
			}
		} else if !failed {
			// Not in any answer yet: still new, asked for without the
			// refresh backoff (Java's requestUpdateForTopic), also when
			// the refresh that would have named it had already started.
			// Not after a failed refresh, whose backoff applies, as
			// Java's waitOnMetadata waits for a successful update: a
			// refresh that fails at once (a broker starting up answers
			// with no brokers) would otherwise be sent back to back.
			c.topicAdded()
		}
		err := c.Refresh(ctx)
		failed = err != nil
		if err == nil {
			fresh = true
		} else {
			if ctx.Err() != nil {
				return nil, c.topicTimeout(name, lastErr)
			}
			if errors.Is(err, kerr.ErrClosed) {
				return nil, err
			}
			if EndsWait(err) {
				return nil, fmt.Errorf("topic %q: %w", name, err)
			}
			lastErr = err
		}
	}
}

// EndsWait reports a failed refresh that a wait for metadata returns at
// once rather than wait out max.block.ms, which would only hide it
// behind a timeout: a security failure (securityFailure), or a Metadata
// version the brokers do not support. The Java producer fails at once
// too (both are fatal to its metadata).
func EndsWait(err error) bool {
	return securityFailure(err) || errors.Is(err, kerr.ErrUnsupportedVersion)
}

// securityFailure reports an error that no retry fixes: the brokers
// refused our credentials or TLS (kerr.ErrAuthentication, or
// kerr.ErrTLS without kerr.ErrDial).
func securityFailure(err error) bool {
	return errors.Is(err, kerr.ErrAuthentication) || errors.Is(err, kerr.ErrTLS) && !kerr.IsRetriable(err)
}

func (c *Client) topicTimeout(name string, lastErr error) error {
	if lastErr == nil {
		return fmt.Errorf("%w: topic %q: no metadata answer named it within max.block.ms; is the cluster reachable (bootstrap.servers=%s)?",
			kerr.ErrMetadataTimeout, name, strings.Join(c.cfg.Bootstrap, ","))
	}
	if errors.Is(lastErr, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("%w %q: not in the cluster metadata within max.block.ms; create it, or enable auto.create.topics.enable on the brokers and allow.auto.create.topics on the producer (last error: %w)",
			kerr.ErrUnknownTopic, name, lastErr)
	}
	if errors.Is(lastErr, kerr.ErrMetadataTimeout) {
		return fmt.Errorf("topic %q: %w", name, lastErr) // says it already
	}
	return fmt.Errorf("%w: topic %q: %w", kerr.ErrMetadataTimeout, name, lastErr)
}

// LeastLoaded picks the broker for a request that any broker can answer:
// the connected one with the fewest requests in flight (and a slot free),
// else one that can be dialed now, else a connected one with every slot
// taken, else the one whose backoff ends first. Bootstrap
// addresses are candidates until metadata has listed brokers, and again
// after a rebootstrap until the next metadata answer.
func (c *Client) LeastLoaded() *broker.Broker {
	c.mu.Lock()
	cands := make([]*broker.Broker, 0, len(c.brokers)+len(c.bootstrap))
	for _, b := range c.brokers {
		cands = append(cands, b)
	}
	cands = append(cands, c.bootstrap...)
	c.mu.Unlock()
	return leastLoaded(cands, nil)
}

func leastLoaded(cands []*broker.Broker, skip map[*broker.Broker]bool) *broker.Broker {
	var best *broker.Broker
	bestScore := int64(1) << 62
	now := time.Now()
	// From a random start, as Java's leastLoadedNode: among equally
	// loaded nodes the first one met wins, so that producers do not all
	// send their Metadata and InitProducerId requests to one broker.
	start := 0
	if len(cands) > 1 {
		start = rand.IntN(len(cands))
	}
	for i := range cands {
		b := cands[(start+i)%len(cands)]
		if skip[b] {
			continue
		}
		var score int64
		switch {
		case b.Connected():
			score = int64(b.InFlight())
			if score >= int64(b.MaxInFlight()) {
				// No slot free (Java's canSendRequest): the request
				// would wait behind the others; dialing one is better.
				score += 1 << 30
			}
		case !now.Before(b.BackoffUntil()):
			score = 1 << 20 // dialable: after any connected broker
		default:
			score = 1<<40 + min(int64(b.BackoffUntil().Sub(now)), 1<<60)
		}
		if best == nil || score < bestScore || (score == bestScore && before(b.ID(), best.ID())) {
			best, bestScore = b, score
		}
	}
	return best
}

// before orders equally loaded bootstrap addresses (ids -1, -2, ... in
// bootstrap.servers order) in the order the user gave them, so that the
// first address is tried first; nodes keep the random order they were met
// in.
func before(a, b int32) bool {
	return a < 0 && b < 0 && a > b
}

// loop is the metadata goroutine: it refreshes on demand and when the
// metadata gets older than metadata.max.age.ms, and ends on Close.
//
// Refreshes are at least retry.backoff.ms apart, and the gap grows (×2,
// ±20%, up to retry.backoff.max.ms) with each failure and, as in Java's
// Metadata.timeToAllowUpdate, with each answer in a row that brought
// nothing new (no topic, partition or leader epoch): a sender that keeps
// asking for a partition that has no leader does not ask ten times a
// second. A new topic, and the periodic refresh, start afresh. After a
// failed refresh, the next one also waits until a broker it could ask
// may be dialed again (reconnect.backoff.ms), new topic or not, unless it
// goes back to bootstrap.servers: it would fail at once, and a Send
// waiting for a new topic would spin.
func (c *Client) loop() {
	defer c.wg.Done()
	defer live.Done()
	age := time.NewTimer(0) // first refresh at once
	defer age.Stop()
	var last time.Time
	failures, same := 0, 0 // failed refreshes in a row; answers in a row that brought nothing new
	for {
		select {
		case <-c.quit:
			return
		case <-c.trigger:
		case <-age.C:
			same = 0
		}
		// No broker can be asked before the first one's reconnect
		// backoff ends: a refresh would fail at once, so not even a new
		// topic goes sooner (Java's leastLoadedNode finds no node then,
		// and its client waits for one to become dialable). A Send
		// waiting for a new topic would otherwise spin here.
		if closed, _ := c.pause(time.Until(c.firstDialable()), nil); closed {
			return
		}
		// A new topic is asked for at once, as Java's
		// requestUpdateForNewTopics does. The backoff after n failures
		// in a row, or n+1 answers that brought nothing new, is Java's
		// retry.backoff.ms × 2^(n-1).
		if !last.IsZero() {
			wait := broker.Backoff(c.cfg.RetryBackoff, c.cfg.RetryBackoffMax, max(failures-1, same-1, 0)) - time.Since(last)
			closed, cut := c.pause(wait, c.newTopic)
			if closed {
				return
			}
			if cut {
				same = 0
			}
		}
		select {
		case <-c.newTopic: // served by this refresh
			same = 0
		default:
		}
		c.mu.Lock()
		r := c.next
		c.next = &refresh{done: make(chan struct{})}
		c.mu.Unlock()

		r.err = c.refresh()
		last = time.Now()
		close(r.done)
		if r.err != nil {
			failures++
			c.cfg.Logger.Debug("metadata refresh failed", "err", r.err)
			c.RequestRefresh() // keep trying while someone may be waiting
			c.closeDrained()
		} else {
			failures = 0
			if c.progressed {
				same = 0
			} else {
				same++
			}
		}
		if !age.Stop() {
			select {
			case <-age.C:
			default:
			}
		}
		age.Reset(c.cfg.MetadataMaxAge)
	}
}

// pause waits d (nothing if d <= 0), or until a token comes on cut (nil:
// never). It reports whether the client was closed meanwhile, and
// whether cut ended the wait. Loop goroutine only.
func (c *Client) pause(d time.Duration, cut <-chan struct{}) (closed, wasCut bool) {
	if d <= 0 {
		return false, false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.quit:
		return true, false
	case <-t.C:
		return false, false
	case <-cut:
		return false, true
	}
}

// firstDialable is when the first broker the next refresh could ask may
// be dialed again: zero if one may be now (or is connected), or if the
// next refresh goes back to bootstrap.servers (fresh addresses). With
// metadata.recovery.strategy=rebootstrap, every known broker backing off
// (after failed dials or lost connections) is itself a reason to go back
// to them, as in Java (NetworkClient rebootstraps when no node is
// available or connected). Loop goroutine only.
func (c *Client) firstDialable() time.Time {
	now := time.Now()
	c.mu.Lock()
	if c.rebootstrapDue(now) != "" {
		c.mu.Unlock()
		return time.Time{}
	}
	cands := make([]*broker.Broker, 0, len(c.brokers)+len(c.bootstrap))
	for _, b := range c.brokers {
		cands = append(cands, b)
	}
	cands = append(cands, c.bootstrap...)
	c.mu.Unlock()
	var first time.Time
	for _, b := range cands {
		until := b.BackoffUntil()
		if !until.After(now) {
			return time.Time{}
		}
		if first.IsZero() || until.Before(first) {
			first = until
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Rebootstrap && len(c.brokers) > 0 && c.bootstrap == nil {
		c.undialable = true // rebootstrapDue now says so
		return time.Time{}
	}
	return first
}

// refresh sends one Metadata request, trying brokers from least loaded
// on, and installs the result.
func (c *Client) refresh() error {
	ctx := c.ctx
	// Looked at again now, as Java's NetworkClient looks for an available
	// node at each update: a connection lost since the loop looked (during
	// its backoff) may leave every known broker backing off, and then
	// this refresh rebootstraps or waits, as the loop would have.
	if closed, _ := c.pause(time.Until(c.firstDialable()), nil); closed {
		return kerr.ErrClosed
	}
	now := time.Now()

	c.mu.Lock()
	why := c.rebootstrapDue(now)
	if why != "" {
		c.bootstrap = newBootstrap(c.cfg)
		c.undialable = false
	}
	if c.failingSince.IsZero() {
		c.failingSince = now
	}
	// Bootstrap addresses are candidates until a metadata answer names
	// the brokers, at the start and again after a rebootstrap. After a
	// rebootstrap they go first: the known brokers stopped answering, and
	// one that hangs would cost request.timeout.ms before them.
	known := make([]*broker.Broker, 0, len(c.brokers)+len(c.bootstrap))
	for _, b := range c.brokers {
		known = append(known, b)
	}
	groups := [][]*broker.Broker{append(known, c.bootstrap...)}
	if len(known) > 0 && len(c.bootstrap) > 0 {
		groups = [][]*broker.Broker{c.bootstrap, known}
	}
	c.mu.Unlock()
	if why != "" {
		c.cfg.Logger.Info("rebootstrapping: metadata will be asked from bootstrap.servers again", "reason", why, "bootstrap_servers", c.cfg.Bootstrap)
	}

	var errs []error
	var refused error // the first authentication or TLS refusal
	answered := false
	tried := map[*broker.Broker]bool{}
	for len(groups) > 0 {
		b := leastLoaded(groups[0], tried)
		if b == nil {
			groups = groups[1:]
			continue
		}
		tried[b] = true
		c.mu.Lock()
		c.requests++
		c.mu.Unlock()
		// A fresh request per attempt: the connection that failed the
		// last one may still be encoding it.
		resp, err := b.DoNow(ctx, c.buildRequest())
		if err != nil {
			if securityFailure(err) && refused == nil {
				refused = err // names the broker already
			}
			errs = append(errs, fmt.Errorf("broker %d (%s): %w", b.ID(), b.Addr(), err))
			continue
		}
		answered = true
		mr := resp.(*kmsg.MetadataResponse)
		if err := kerr.ForCode(mr.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("metadata from broker %d (%s): %w", b.ID(), b.Addr(), err))
			if errors.Is(err, kerr.RebootstrapRequired) && c.cfg.Rebootstrap {
				// The other known brokers would say the same: the next
				// refresh asks bootstrap.servers.
				c.toldToReboot = true
				break
			}
			continue
		}
		if len(mr.Brokers) == 0 {
			errs = append(errs, fmt.Errorf("metadata from broker %d (%s) lists no brokers", b.ID(), b.Addr()))
			continue
		}
		c.progressed = c.install(mr)
		c.failingSince, c.unanswered, c.toldToReboot, c.undialable = time.Time{}, false, false, false
		return nil
	}
	c.unanswered = !answered
	if refused != nil {
		// Not ErrMetadataTimeout, which is retriable: the first broker
		// that refused us says why, and the others would say the same.
		return refused
	}
	return fmt.Errorf("%w: no broker gave a usable answer to a Metadata request: %w", kerr.ErrMetadataTimeout, errors.Join(errs...))
}

// rebootstrapDue says why the next refresh should go back to the
// bootstrap addresses, or "" if it should not: the Java client's
// metadata.recovery.strategy=rebootstrap (KIP-899, KIP-1102). The refresh
// then adds fresh bootstrap addresses (resolved anew when dialed) to its
// candidates, first. Unlike the Java client it keeps the brokers it
// knows, and their connections, until a metadata answer says which of
// them are gone: the sender may still be writing to one that answers
// again. Only with
// brokers known from metadata (before the first answer, and after a
// rebootstrap, the bootstrap addresses are candidates already). Called
// with mu held, by the loop goroutine.
func (c *Client) rebootstrapDue(now time.Time) string {
	if !c.cfg.Rebootstrap || len(c.brokers) == 0 || c.bootstrap != nil {
		return ""
	}
	switch {
	case c.toldToReboot:
		return "a broker answered REBOOTSTRAP_REQUIRED"
	case c.unanswered:
		return "none of the brokers the metadata named answered"
	case c.undialable:
		return "every broker the metadata named is backing off after failed connections"
	case !c.failingSince.IsZero() && now.Sub(c.failingSince) >= c.cfg.RebootstrapTrigger:
		return fmt.Sprintf("no metadata for %v (metadata.recovery.rebootstrap.trigger.ms)", now.Sub(c.failingSince).Round(time.Millisecond))
	}
	return ""
}

// buildRequest asks for the topics in use, dropping those idle longer
// than metadata.max.idle.ms. With no topic in use it asks for none (an
// empty list; a null list would mean every topic).
func (c *Client) buildRequest() *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = c.cfg.AutoCreateTopics
	req.Topics = []kmsg.MetadataRequestTopic{}
	now := time.Now().UnixNano()
	var dropped []string
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		for _, name := range dropped { // the logger runs without our lock
			c.cfg.Logger.Debug("dropping idle topic from metadata", "topic", name)
		}
	}()
	idle := func(u *Use) bool {
		return c.cfg.MetadataMaxIdle > 0 && time.Duration(now-u.lastUsed.Load()) > c.cfg.MetadataMaxIdle
	}
	for name, u := range c.topics {
		if u.dropped.Load() {
			continue
		}
		if idle(u) {
			// Publish dropped before looking at lastUsed again: a Touch
			// racing with us either stored its time before this second
			// look (we keep the topic) or loads dropped after this store
			// (it revives the topic, once we release mu).
			u.dropped.Store(true)
			if idle(u) {
				dropped = append(dropped, name)
				continue
			}
			u.dropped.Store(false)
		}
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	return req
}

// install turns a response into a Snapshot, stores it, and reconciles the
// broker set: new nodes get a Broker, moved nodes a new one; gone nodes,
// and the bootstrap addresses once real nodes are known, are retired:
// closed once nothing is in flight on them. It reports whether the answer
// made progress: a topic, a partition or a leader epoch that the last
// snapshot did not have.
func (c *Client) install(mr *kmsg.MetadataResponse) (progressed bool) {
	s := &Snapshot{
		ControllerID: mr.ControllerID,
		Brokers:      make(map[int32]BrokerInfo, len(mr.Brokers)),
		Topics:       make(map[string]*Topic, len(mr.Topics)),
		At:           time.Now(),
	}
	if mr.ClusterID != nil {
		s.ClusterID = *mr.ClusterID
	}
	for _, b := range mr.Brokers {
		bi := BrokerInfo{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			bi.Rack = *b.Rack
		}
		s.Brokers[b.NodeID] = bi
	}
	for _, t := range mr.Topics {
		if t.Topic == nil {
			continue
		}
		topic := &Topic{Name: *t.Topic, ID: t.TopicID, Err: kerr.ForCode(t.ErrorCode)}
		if topic.Err == nil {
			parts := make([]Partition, len(t.Partitions))
			ok := true
			for _, p := range t.Partitions {
				if p.Partition < 0 || int(p.Partition) >= len(parts) {
					ok = false // a gap: partitions are being created; retry later
					break
				}
				leader := p.Leader
				if _, known := s.Brokers[leader]; !known {
					// A leader the response does not list cannot be
					// reached: leaderless until a refresh names it (Java's
					// toPartitionInfo: a null leader, so unavailable).
					leader = -1
				}
				parts[p.Partition] = Partition{
					ID: p.Partition, Leader: leader, LeaderEpoch: p.LeaderEpoch,
					Replicas: p.Replicas, ISR: p.ISR, Offline: p.OfflineReplicas,
					Err: kerr.ForCode(p.ErrorCode),
				}
			}
			if ok {
				topic.Partitions = parts
				topic.LedFromRack = ledFromRack(parts, s.Brokers)
			} else {
				topic.Err = kerr.LeaderNotAvailable
			}
		}
		s.Topics[topic.Name] = topic
	}

	c.mu.Lock()
	prev := c.snap.Load()
	keepNewerLeaders(prev, s)
	progressed = madeProgress(prev, s)
	for id, bi := range s.Brokers {
		old := c.brokers[id]
		if old != nil && old.Addr() == bi.Addr() {
			continue
		}
		if old != nil {
			c.retired = append(c.retired, old)
		}
		c.brokers[id] = c.unretireLocked(id, bi.Addr())
	}
	for id, b := range c.brokers {
		if _, ok := s.Brokers[id]; !ok {
			c.retired = append(c.retired, b)
			delete(c.brokers, id)
		}
	}
	c.retired = append(c.retired, c.bootstrap...)
	c.bootstrap = nil
	c.snap.Store(s)
	c.mu.Unlock()

	if prev.ClusterID != "" && prev.ClusterID != s.ClusterID {
		c.cfg.Logger.Warn("the brokers answer for another cluster now", "cluster_id", s.ClusterID, "was", prev.ClusterID)
	}
	c.closeDrained()
	if c.cfg.OnUpdate != nil {
		c.cfg.OnUpdate(s)
	}
	return progressed
}

// madeProgress reports whether s knows something prev did not: a topic
// (or a new id for one), a partition, or a newer leader epoch.
func madeProgress(prev, s *Snapshot) bool {
	for name, t := range s.Topics {
		pt := prev.Topics[name]
		if pt == nil || pt.ID != t.ID || (pt.Err != nil) != (t.Err != nil) || len(pt.Partitions) != len(t.Partitions) {
			return true
		}
		for i := range t.Partitions {
			if t.Partitions[i].LeaderEpoch > pt.Partitions[i].LeaderEpoch || t.Partitions[i].Leader != pt.Partitions[i].Leader {
				return true
			}
		}
	}
	return false
}

// closeDrained closes the retired brokers (those that left the metadata,
// moved, or were bootstrap addresses) that have nothing in flight any
// more, as the Java client lets such a connection finish: a response on
// its way still counts, and a node missing from one stale answer loses
// nothing. No new request goes to a retired broker (Broker and
// LeastLoaded no longer name it). Called after every refresh; Close
// closes the rest.
func (c *Client) closeDrained() {
	var drained []*broker.Broker
	c.mu.Lock()
	kept := c.retired[:0]
	for _, b := range c.retired {
		if b.InFlight() == 0 {
			drained = append(drained, b)
		} else {
			kept = append(kept, b)
		}
	}
	clear(c.retired[len(kept):])
	c.retired = kept
	c.mu.Unlock()
	for _, b := range drained {
		b.Retire()
	}
}

// unretireLocked returns a Broker for node id at addr: the retired one, if
// the node comes back where it was with requests still in flight on it,
// else a new one. Called with mu held.
func (c *Client) unretireLocked(id int32, addr string) *broker.Broker {
	for i, b := range c.retired {
		if b.ID() == id && b.Addr() == addr {
			c.retired = slices.Delete(c.retired, i, i+1)
			return b
		}
	}
	return broker.NewBroker(id, addr, c.cfg.Broker)
}

// keepNewerLeaders keeps prev's entry for every partition that prev knows
// at a newer leader epoch than s does, as the Java client does (KIP-320):
// a Metadata answer from a broker that has not heard of a leader change
// yet must not undo the leader a produce response named (UpdateLeaders,
// KIP-951), nor bring back an old leader for a partition whose newer
// epoch has no leader known yet. Only for the same topic (same id). A
// newer leader that s does not list among the brokers is kept as no
// leader, at the newer epoch: the old leader would refuse the records.
func keepNewerLeaders(prev, s *Snapshot) {
	for name, t := range s.Topics {
		pt := prev.Topics[name]
		if t.Err != nil || pt == nil || pt.Err != nil || pt.ID != t.ID {
			continue
		}
		kept := false
		for i := range min(len(t.Partitions), len(pt.Partitions)) {
			np, op := &t.Partitions[i], &pt.Partitions[i]
			if np.LeaderEpoch < 0 || op.LeaderEpoch <= np.LeaderEpoch {
				continue
			}
			*np = *op
			if _, ok := s.Brokers[op.Leader]; !ok {
				np.Leader = -1
			}
			kept = true
		}
		if kept {
			t.LedFromRack = ledFromRack(t.Partitions, s.Brokers)
		}
	}
}

// Close stops the metadata goroutine and closes every connection; it
// returns when all of them are gone.
//
// Close may be called more than once and from several goroutines; every
// call returns only when everything is closed.
func (c *Client) Close() {
	c.closeOnce.Do(c.close)
}

func (c *Client) close() {
	close(c.quit)
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	all := append(append([]*broker.Broker{}, c.bootstrap...), c.retired...)
	for _, b := range c.brokers {
		all = append(all, b)
	}
	c.bootstrap, c.retired = nil, nil
	c.brokers = map[int32]*broker.Broker{}
	c.closed = true // no Broker joins after this: nothing would close it
	c.mu.Unlock()
	for _, b := range all {
		b.Close()
	}
}
