package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/kprod/kprod"
)

// perfTxn is kprod perf's --transactional-id and --transaction-duration-ms,
// as Java's ProducerPerformance has them: with either, the records are sent
// in transactions, each committed once it has been open for the duration
// (and the last one at the end). The commit's time counts in the run, as
// it does in Java's tool.
type perfTxn struct {
	id         string
	durationMs int64
	durDef     *flagDef
	dur        time.Duration // 0: no transactions
	open       bool
	unfinished bool // a commit that an interrupt cut short: finish commits it
	start      time.Time
}

func (t *perfTxn) register(fs *flagSet) {
	fs.stringVar(&t.id, []string{"--transactional-id"}, "TRANSACTIONAL-ID",
		"send the records in transactions with this transactional.id; it takes precedence over transactional.id in the other flags. With only --transaction-duration-ms, the id is performance-producer-<random uuid>")
	t.durDef = fs.intVar(&t.durationMs, []string{"--transaction-duration-ms"}, "MS",
		"commit each transaction once it has been open MS milliseconds (greater than 0); 3000 when only a transactional id is given")
	t.durDef.def = "" // no transactions unless set; 3000 as said above
}

// apply sets the transactional id as Java's tool does and decides whether
// the run uses transactions.
func (t *perfTxn) apply(cfg *kprod.Config) error {
	if t.durDef.wasSet && t.durationMs <= 0 {
		return usagef("--transaction-duration-ms should be greater than zero")
	}
	if t.durationMs > maxMs {
		return usagef("--transaction-duration-ms must be at most %d", maxMs)
	}
	if t.id != "" {
		cfg.TransactionalID = t.id
	}
	if cfg.TransactionalID == "" && !t.durDef.wasSet {
		return nil
	}
	if cfg.TransactionalID == "" {
		var u [16]byte
		_, _ = rand.Read(u[:])
		u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80 // version 4, variant 10
		cfg.TransactionalID = fmt.Sprintf("performance-producer-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
	}
	ms := t.durationMs
	if !t.durDef.wasSet {
		ms = 3000
	}
	t.dur = time.Duration(ms) * time.Millisecond
	return nil
}

func (t *perfTxn) fail(r *perfRun, err error) bool {
	r.fatal.CompareAndSwap(nil, &err)
	return false
}

// init calls InitTransactions; false stops the run (r.fatal says why,
// unless ctx ended).
func (t *perfTxn) init(ctx context.Context, p *kprod.Producer, r *perfRun) bool {
	if t.dur == 0 {
		return true
	}
	if err := p.InitTransactions(ctx); err != nil {
		if ctx.Err() != nil {
			return false // interrupted, not stopped by an error
		}
		return t.fail(r, err)
	}
	return true
}

// begin starts a transaction before a record if none is open.
func (t *perfTxn) begin(p *kprod.Producer, r *perfRun) bool {
	if t.dur == 0 || t.open {
		return true
	}
	if err := p.BeginTransaction(); err != nil {
		return t.fail(r, err)
	}
	t.open, t.start = true, time.Now()
	return true
}

// maybeCommit commits the open transaction once its duration has passed,
// or at the end of the run.
func (t *perfTxn) maybeCommit(ctx context.Context, p *kprod.Producer, r *perfRun, last bool) bool {
	if !t.open || (!last && time.Since(t.start) < t.dur) {
		return true
	}
	t.open = false
	if err := p.CommitTransaction(ctx); err != nil {
		if ctx.Err() != nil {
			t.unfinished = true // interrupted, not stopped by an error: finish commits it
			return false
		}
		return t.fail(r, fmt.Errorf("commit: %w", err))
	}
	return true
}

// finish commits, after an interrupt and within its grace (gctx), the
// transaction the run left open or whose commit the interrupt cut short:
// the run reports its acknowledged records as sent, so they must be
// committed, not aborted by Close. If the commit fails, the run stops with
// an error saying so (exit status 1).
func (t *perfTxn) finish(gctx context.Context, p *kprod.Producer, r *perfRun) {
	if !t.open && !t.unfinished || r.fatal.Load() != nil {
		return // nothing open; or an error stopped the run, and Close aborts
	}
	t.open, t.unfinished = false, false
	err := p.CommitTransaction(gctx)
	for errors.Is(err, kprod.ErrTransactionTimeout) && gctx.Err() == nil {
		err = p.CommitTransaction(gctx) // the outcome is not known yet
	}
	switch {
	case errors.Is(err, kprod.ErrTransactionTimeout):
		t.fail(r, fmt.Errorf("commit after the interrupt: %w; it did not finish within the interrupt's grace, so whether the last transaction committed is not known", err))
	case err != nil:
		t.fail(r, fmt.Errorf("commit after the interrupt: %w; the records of the last transaction are not committed (read_committed consumers will not see them)", err))
	}
}
