package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

type readResult struct {
	data    string
	tooLong int64
}

func readAll(t *testing.T, in io.Reader, delim string, maxLen int) []readResult {
	t.Helper()
	lr := newLineReader(in, []byte(delim), maxLen)
	var out []readResult
	for {
		data, tooLong, err := lr.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if tooLong == 0 && data == nil {
			t.Fatal("nil data for a record: an empty line must be an empty value, not null")
		}
		out = append(out, readResult{string(data), tooLong})
	}
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("L", 300*1024) // over bufio.Scanner's 64 KiB and our 64 KiB buffer
	for _, tc := range []struct {
		name, in, delim string
		max             int
		want            []readResult
	}{
		{"lines", "a\nbb\n\nccc", "\n", 100, []readResult{{"a", 0}, {"bb", 0}, {"", 0}, {"ccc", 0}}},
		{"trailing delimiter", "a\n", "\n", 100, []readResult{{"a", 0}}},
		{"empty input", "", "\n", 100, nil},
		{"only a delimiter", "\n", "\n", 100, []readResult{{"", 0}}},
		{"multi-byte delimiter", "a;;b;c;;;;d", ";;", 100, []readResult{{"a", 0}, {"b;c", 0}, {"", 0}, {"d", 0}}},
		{"delimiter's last byte inside", "x;y;;z", ";;", 100, []readResult{{"x;y", 0}, {"z", 0}}},
		{"long line", long + "\nshort\n", "\n", len(long), []readResult{{long, 0}, {"short", 0}}},
		{"too long", "ok\n" + long + "\nafter\n", "\n", 1000, []readResult{{"ok", 0}, {"", int64(len(long))}, {"after", 0}}},
		{"too long at EOF", "ok\n" + long, "\n", 1000, []readResult{{"ok", 0}, {"", int64(len(long))}}},
		{"too long, multi-byte delimiter", long + "<>x<>", "<>", 1000, []readResult{{"", int64(len(long))}, {"x", 0}}},
		{"exactly max", "abcd\nabcde\n", "\n", 4, []readResult{{"abcd", 0}, {"", 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte per Read as well: records must not depend on how
			// the input arrives.
			for _, in := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got := readAll(t, in, tc.delim, tc.max)
				if len(got) != len(tc.want) {
					t.Fatalf("%d records, want %d", len(got), len(tc.want))
				}
				for i := range got {
					if got[i] != tc.want[i] {
						t.Errorf("record %d: %.40q (too long %d), want %.40q (too long %d)",
							i, got[i].data, got[i].tooLong, tc.want[i].data, tc.want[i].tooLong)
					}
				}
			}
		})
	}
}

// Records are new slices: the next read must not overwrite a record that
// is still waiting to be sent.
func TestLineReaderCopies(t *testing.T) {
	// Lines longer than half the reader's 64 KiB buffer: reading the next
	// ones refills it over the first.
	const size = 50_000
	var in strings.Builder
	for _, c := range "abc" {
		in.WriteString(strings.Repeat(string(c), size) + "\n")
	}
	lr := newLineReader(strings.NewReader(in.String()), []byte("\n"), size)
	var got [][]byte
	for range 3 {
		d, _, err := lr.next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	for i, c := range "abc" {
		if string(got[i]) != strings.Repeat(string(c), size) {
			t.Fatalf("record %d changed after later reads: starts %.20q", i, got[i])
		}
	}
}

func TestLineReaderError(t *testing.T) {
	boom := errors.New("boom")
	lr := newLineReader(io.MultiReader(strings.NewReader("a\n"), iotest.ErrReader(boom)), []byte("\n"), 100)
	if d, _, err := lr.next(); err != nil || string(d) != "a" {
		t.Fatalf("got %q, %v", d, err)
	}
	if _, _, err := lr.next(); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
}

// On interrupt, the complete lines already read into the buffer are
// handed over, though the writer has not closed its end; a partial line is
// not; the reader goroutine ends (the pipe is closed).
func TestRecordReaderDrainsBuffered(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	rr := startRecordReader(pr, []byte("\n"), 1000)
	var in bytes.Buffer
	for i := range 100 {
		fmt.Fprintf(&in, "r%d\n", i)
	}
	in.WriteString("partial")
	go pw.Write(in.Bytes()) // one write: it is all in the reader's buffer at once
	first := <-rr.lines     // the reader has the whole write now
	got := []string{string(first.data)}
	rr.drainRead(func(l inLine) { got = append(got, string(l.data)) })
	if len(got) != 100 {
		t.Fatalf("%d records handed over, want 100: %q", len(got), got)
	}
	for i, g := range got {
		if g != fmt.Sprintf("r%d", i) {
			t.Fatalf("record %d is %q", i, g)
		}
	}
	select {
	case <-rr.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the reader goroutine did not end")
	}
}

// A reader that never returns (a terminal nobody types in) does not hold
// up drainRead.
func TestRecordReaderBlockedRead(t *testing.T) {
	block := make(chan struct{})
	rr := startRecordReader(blockingReader{block}, []byte("\n"), 1000)
	done := make(chan struct{})
	go func() {
		rr.drainRead(func(inLine) { t.Error("no record was read") })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("drainRead waited for a blocked Read")
	}
	close(block) // let the goroutine end for goleak
	<-rr.done
}

type blockingReader struct{ ch chan struct{} }

func (b blockingReader) Read([]byte) (int, error) {
	<-b.ch
	return 0, io.EOF
}
