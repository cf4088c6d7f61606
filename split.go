package kprod

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/kprod/kprod/internal/recbatch"
)

// A broker refuses a whole batch with MESSAGE_TOO_LARGE when the batch is
// larger than the topic's max.message.bytes (or the broker's
// message.max.bytes), for instance when batch.size is set above it. The
// records are not at fault, so, as the Java client does, a refused batch
// of more than one record is split and its parts are sent again in its
// place; only a single record too large for the topic fails.
//
// Java cuts the batch into pieces of batch.size, which leaves a batch that
// is already within batch.size as it was, to be refused again until
// delivery.timeout.ms. kprod halves it instead (by bytes), so every round
// makes progress: a part still too large is halved again.
//
// The parts take the place of the batch in every respect: the same place
// in the deque (ahead of every later batch), the same creation time for
// delivery.timeout.ms, and, for the idempotent producer, the batch's range
// of sequence numbers (the broker wrote nothing of it, so the range is
// still free) and its place among the partition's unacknowledged batches.
// An idempotent batch an earlier attempt of which may have been written
// (batch.maybeWrittenAt) is split only if that attempt must have been
// refused as too large too (sender.maySplit); else it fails: if it was
// written (the topic's limit lowered since), the broker would refuse the
// parts as out of order, and after the epoch bump write them again.
// The batch itself stays incomplete, for Flush, until its last part is
// complete; its records get their callbacks from the parts.

// refusal is an attempt the brokers refused as too large: when its
// answer came, and the size of its batch.
type refusal struct {
	answeredAt time.Time
	size       int
}

// refusedTooLarge records a MESSAGE_TOO_LARGE answer for the topic.
func (t *topicState) refusedTooLarge(r refusal) {
	tl := &t.tooLarge
	if tl.earliest.answeredAt.IsZero() || r.answeredAt.Before(tl.earliest.answeredAt) {
		tl.earliest = r
	}
	if tl.smallest.answeredAt.IsZero() || r.size < tl.smallest.size || r.size == tl.smallest.size && r.answeredAt.Before(tl.smallest.answeredAt) {
		tl.smallest = r
	}
}

// mayHaveBeenWritten records that an attempt of b sent at sentAt ended
// without saying that b was not written.
func (b *batch) mayHaveBeenWritten(sentAt time.Time) {
	if b.maybeWrittenAt.IsZero() || sentAt.Before(b.maybeWrittenAt) {
		b.maybeWrittenAt = sentAt
	}
}

// maySplit reports whether b, refused as too large, may be split: always
// without idempotence, or when no attempt of it may have been written;
// else only when a refusal of a batch of the topic no larger than b was
// answered before the first attempt of b that may have been written was
// sent. The topic's limit was then already below b's size, so that
// attempt was refused too and nothing of b is in the log (unless the
// limit was raised and lowered again meanwhile, or a broker had not yet
// learnt of a change of it that another had applied). The answer's time,
// not the refused request's: a refusal sent earlier to a slow leader may
// have been decided after b's attempt to another was written. So a
// batch.size above the topic's max.message.bytes costs nothing after a
// timeout once the topic has refused a batch, while a batch that may have
// been written before the limit was lowered still fails rather than be
// written twice.
func (s *sender) maySplit(b *batch) bool {
	if !s.idemOn || b.maybeWrittenAt.IsZero() {
		return true
	}
	for _, r := range [...]refusal{b.q.topic.tooLarge.earliest, b.q.topic.tooLarge.smallest} {
		if !r.answeredAt.IsZero() && r.answeredAt.Before(b.maybeWrittenAt) && r.size <= len(b.wire) {
			return true
		}
	}
	return false
}

// splitTooLarge splits b, which the broker refused as too large and which
// holds more than one record, and puts its two parts at the front of its
// deque. Sender goroutine only; b is answered and not in flight.
func (s *sender) splitTooLarge(b *batch, cause error) {
	p := s.p
	q := b.q
	// The parts are encoded from the batch's own bytes, as Java's split
	// reads its own records: what the callers' slices hold now does not
	// matter.
	enc, err := b.bld.Records(nil)
	if err != nil {
		// Not expected: the batch is ours. The records themselves then.
		p.log.Error("reading back a batch to split it failed; encoding its parts from the records", "topic", q.topic.name, "partition", q.partition, "err", err)
		enc = enc[:0]
		for _, pr := range b.recs {
			enc = append(enc, recbatch.DecodedRecord{TimestampMs: pr.rec.Timestamp.UnixMilli(), Key: pr.rec.Key, Value: pr.rec.Value, Headers: pr.rec.Headers})
		}
	}
	cut := splitPoint(enc)
	parts := [2]*batch{s.splitPart(b, b.recs[:cut], enc[:cut]), s.splitPart(b, b.recs[cut:], enc[cut:])}
	if b.parent != nil {
		q.splitting-- // b becomes its two parts
	}
	q.splitting += 2
	// A batch.size above the topic's limit refuses every full batch: warn
	// once a minute per topic, the rest at debug level (batch-split-total
	// counts them all).
	level := slog.LevelDebug
	if now := time.Now(); b.parent == nil && now.Sub(q.topic.splitWarned) >= time.Minute {
		level = slog.LevelWarn
		q.topic.splitWarned = now
	}
	p.log.Log(context.Background(), level, "the broker refused a batch as too large; sending it again in parts (lower batch.size below the topic's max.message.bytes to avoid this)",
		"topic", q.topic.name, "partition", q.partition, "records", len(b.recs), "bytes", len(b.wire), "err", cause)
	p.metrics.batchSplits.add(time.Now(), 1)

	if b.seq != noSeq {
		// The parts take the batch's sequence range, in order, and its
		// place among the unacknowledged batches.
		parts[1].seq = b.seq + int64(cut)
		parts[0].seq = b.seq
		parts[0].renumbered, parts[1].renumbered = b.renumbered, b.renumbered
		if i := slices.Index(q.pending, b); i >= 0 {
			q.pending = slices.Replace(q.pending, i, i+1, parts[0], parts[1])
		}
	}
	for _, c := range parts {
		if c.seq != noSeq {
			opts := p.acc.codecOpts
			opts.Idempotent = true
			opts.Transactional = s.txn.on
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = q.pid, q.epoch, wireSeq(c.seq) // the batch's numbering
			c.wire = c.bld.Seal(opts)
		} else {
			c.wire = c.bld.Seal(p.acc.codecOpts)
		}
	}

	// The batch's memory goes back to the pool now; the parts' buffers
	// are not charged to buffer.memory (Java allocates them outside its
	// pool too), so their records are never counted twice.
	b.outstanding = 2
	p.pool.release(b.bld.Release(), b.memSize)
	b.memSize = 0
	b.recs = nil
	b.wire = nil

	// requeue puts a batch after the put-back batches of a lower id; the
	// parts share b's id, so the second goes back first.
	s.requeue(parts[1])
	s.requeue(parts[0])
}

// splitPoint is where to cut recs so that each part holds about half of
// the record bytes and at least one record.
func splitPoint(recs []recbatch.DecodedRecord) int {
	total := 0
	for i := range recs {
		total += decodedBytes(&recs[i])
	}
	sum := 0
	for i := range recs[:len(recs)-1] {
		sum += decodedBytes(&recs[i])
		if 2*sum >= total {
			return i + 1
		}
	}
	return len(recs) - 1
}

func decodedBytes(r *recbatch.DecodedRecord) int {
	return recbatch.RecordSize(0, 0, r.Key, r.Value, r.Headers)
}

// splitPart builds one part of a split batch, in a buffer of its own,
// from recs (for the callbacks) and enc, the same records as the batch
// held them encoded.
func (s *sender) splitPart(parent *batch, recs []pending, enc []recbatch.DecodedRecord) *batch {
	size := recbatch.HeaderSize
	for i := range enc {
		size += decodedBytes(&enc[i])
	}
	// The part takes its batch's id: q.nextID belongs to the appenders
	// (it is read and written under q.mu), and requeue orders by id.
	c := newBatch(parent.q, parent.id, 0, len(recs))
	c.created, c.parent = parent.created, parent
	c.full = true
	c.bld.Reset(make([]byte, 0, size), enc[0].TimestampMs)
	for i := range enc {
		r := &enc[i]
		c.bld.Append(r.TimestampMs, r.Key, r.Value, r.Headers)
		n := decodedBytes(r)
		c.maxRecSize = max(c.maxRecSize, n)
		c.sumRecSize += n
	}
	c.recs = append(c.recs, recs...)
	return c
}
