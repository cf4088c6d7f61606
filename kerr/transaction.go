package kerr

import "errors"

// Sentinels of the transactional producer (transactional.id). They follow
// the Java client's three classes of transactional errors: caller errors
// (IllegalStateException), abortable errors (the transaction must be
// aborted, the producer goes on) and fatal errors (the producer must be
// closed).
var (
	// ErrTransactionState: a transactional method was called in a state
	// that does not allow it (Send outside BeginTransaction ...
	// CommitTransaction, BeginTransaction before InitTransactions or
	// twice, ...). A caller error; the transaction is unaffected.
	ErrTransactionState = errors.New("kprod: invalid transaction state")

	// ErrTransactionAbortable: the current transaction cannot be
	// committed (one of its records failed, the coordinator answered
	// TRANSACTION_ABORTABLE, ...). Call AbortTransaction; the producer
	// can then begin a new transaction.
	ErrTransactionAbortable = errors.New("kprod: transaction cannot be committed; abort it")

	// ErrTransactionAborted: the record belonged to a transaction that
	// was aborted before it was acknowledged: it was not committed. If it
	// was sent before the abort (the error says so), it may be in the log
	// as part of the aborted transaction, which read_committed consumers
	// skip; send it again in a new transaction.
	ErrTransactionAborted = errors.New("kprod: transaction aborted")

	// ErrProducerFenced: the transaction coordinator knows a newer epoch
	// of our transactional.id: another producer with the same id called
	// InitTransactions. (When the coordinator itself aborted our
	// transaction for outliving transaction.timeout.ms and bumped the
	// epoch, kprod tells the two apart by asking the coordinator for its
	// epoch back (KIP-588) and reports ErrTransactionAbortable instead:
	// abort and go on.) Errors wrapping it also wrap ErrFatal: every
	// later call fails with it; close the producer (and make a new one if
	// this process should go on producing with the id).
	ErrProducerFenced = errors.New("kprod: producer fenced: the transactional.id has a newer epoch")

	// ErrTransactionTimeout: InitTransactions, CommitTransaction or
	// AbortTransaction did not finish within its ctx or max.block.ms
	// (the coordinator did not answer in time, or the transaction's
	// records were not all answered yet: Java's TimeoutException).
	// The outcome is not known yet: call the same method again, which
	// goes on where it stopped. Not abortable, not fatal.
	ErrTransactionTimeout = errors.New("kprod: transactional call not finished in time; call it again")
)
