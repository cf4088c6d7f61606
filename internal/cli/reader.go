package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// recordReader reads records from stdin on its own goroutine, at most a
// few records ahead of the sender (beyond that, Send blocking on
// buffer.memory holds it back).
//
// Stopping it is the delicate part. On SIGINT the records already read
// must still be delivered: those in the channel and the complete lines in
// the bufio buffer, which were taken from stdin too. But a goroutine
// blocked in a Read of an *os.File (a terminal, a pipe) cannot be
// interrupted: it is left to the process's exit. Other readers that are
// io.Closers (an io.Pipe in tests) are closed, which ends their Read, and
// the goroutine is waited for.
type recordReader struct {
	src      *trackedReader
	lr       *lineReader
	lines    chan inLine
	stop     chan struct{} // closed: do not even hand over what was read
	done     chan struct{} // closed when the goroutine returns
	stopping atomic.Bool   // read nothing more from stdin; hand over what is buffered

	closer io.Closer // stdin, if it can be closed to end a blocked Read
}

func startRecordReader(stdin io.Reader, delim []byte, maxLen int) *recordReader {
	src := &trackedReader{r: stdin}
	rr := &recordReader{
		src:   src,
		lr:    newLineReader(src, delim, maxLen),
		lines: make(chan inLine, 16),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	if c, ok := stdin.(io.Closer); ok {
		if _, isFile := stdin.(*os.File); !isFile {
			rr.closer = c
		}
	}
	go rr.run()
	return rr
}

func (rr *recordReader) run() {
	defer close(rr.done)
	defer close(rr.lines)
	for n := int64(1); ; n++ {
		if rr.stopping.Load() && !rr.lr.hasLine() {
			return
		}
		data, tooLong, err := rr.lr.next()
		l := inLine{data: data, n: n, tooLong: tooLong}
		if err != nil {
			if err == io.EOF || rr.stopping.Load() {
				return
			}
			l = inLine{err: err}
		}
		select {
		case rr.lines <- l:
		case <-rr.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// drainRead stops reading stdin and passes every record already read to
// f: those handed over and the complete lines still buffered. It returns
// when there are no more, or when the goroutine is blocked reading stdin
// (what comes now came after the interrupt).
func (rr *recordReader) drainRead(f func(inLine)) {
	rr.stopping.Store(true)
	if rr.closer != nil {
		_ = rr.closer.Close()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case l, ok := <-rr.lines:
			if !ok {
				break loop
			}
			if l.err == nil {
				f(l)
			}
		case <-tick.C:
			// While the goroutine is inside Read it cannot produce a
			// record: with the channel empty, all that was read is out.
			if rr.src.inRead.Load() && len(rr.lines) == 0 {
				break loop
			}
		}
	}
	rr.abandon()
}

// abandon stops the reader without taking what it has read.
func (rr *recordReader) abandon() {
	rr.stopping.Store(true)
	select {
	case <-rr.stop:
	default:
		close(rr.stop)
	}
	if rr.closer != nil {
		_ = rr.closer.Close()
		<-rr.done
	}
}

// trackedReader tells whether a Read is under way.
type trackedReader struct {
	r      io.Reader
	inRead atomic.Bool
}

func (t *trackedReader) Read(p []byte) (int, error) {
	t.inRead.Store(true)
	defer t.inRead.Store(false)
	return t.r.Read(p)
}

// lineReader splits its input at a delimiter of any length, with lines of
// any length (bufio.Scanner stops at 64 KiB by default), and bounded
// memory: a record longer than max is skipped and reported by its length
// instead of being held.
type lineReader struct {
	r     *bufio.Reader
	delim []byte
	max   int
}

func newLineReader(r io.Reader, delim []byte, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64*1024), delim: delim, max: max}
}

// next returns the next record without its delimiter, in a new slice
// (ReadSlice's buffer is reused by the next read). For a record over max
// bytes it returns nil and the record's length. At the end it returns
// io.EOF; input after the last delimiter is a last record.
func (lr *lineReader) next() (data []byte, tooLong int64, err error) {
	last := lr.delim[len(lr.delim)-1]
	k := len(lr.delim)
	var buf, tail []byte
	var total int64
	over := false
	for {
		chunk, err := lr.r.ReadSlice(last)
		total += int64(len(chunk))
		if !over && len(buf)+len(chunk) > lr.max+k {
			over = true
			tail = lastN(append(lastN(buf, k), lastN(chunk, k)...), k)
			buf = nil
		} else if over {
			tail = lastN(append(tail, lastN(chunk, k)...), k)
		} else {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if total == 0 {
				return nil, 0, err
			}
			if err != io.EOF {
				return nil, 0, err
			}
			if over {
				return nil, total, nil
			}
			return orEmptySlice(buf), 0, nil // a last record without delimiter
		}
		if over {
			if bytes.Equal(tail, lr.delim) {
				return nil, total - int64(k), nil
			}
			continue
		}
		if bytes.HasSuffix(buf, lr.delim) {
			return orEmptySlice(buf[:len(buf)-k]), 0, nil
		}
	}
}

// hasLine reports whether a complete record is buffered, so that next
// returns it without reading.
func (lr *lineReader) hasLine() bool {
	b, _ := lr.r.Peek(lr.r.Buffered())
	return bytes.Contains(b, lr.delim)
}

func lastN(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// orEmptySlice makes an empty record's value empty, not null: an empty
// line is an empty value, as in kafka-console-producer.
func orEmptySlice(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
