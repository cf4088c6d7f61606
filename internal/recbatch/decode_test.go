package recbatch

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// Records reads back what Append encoded, open or sealed, in every codec:
// null and empty keys, values and header values stay apart, timestamps
// are absolute again.
func TestRecordsReadsBackTheBatch(t *testing.T) {
	for name, tc := range testCases() {
		for _, codec := range allCodecs {
			t.Run(fmt.Sprintf("%s/%v", name, codec), func(t *testing.T) {
				var b Builder
				build(t, &b, tc.base, tc.records)
				check := func(when string, got []DecodedRecord) {
					t.Helper()
					if len(got) != len(tc.records) {
						t.Fatalf("%s: %d records, want %d", when, len(got), len(tc.records))
					}
					for i, w := range tc.records {
						g := got[i]
						if g.TimestampMs != w.ts || !sameNullable(g.Key, w.key) || !sameNullable(g.Value, w.value) || len(g.Headers) != len(w.headers) {
							t.Fatalf("%s: record %d differs: ts %d/%d key %v value %v headers %d/%d", when, i,
								g.TimestampMs, w.ts, sameNullable(g.Key, w.key), sameNullable(g.Value, w.value), len(g.Headers), len(w.headers))
						}
						for hi, h := range w.headers {
							if g.Headers[hi].Key != h.Key || !sameNullable(g.Headers[hi].Value, h.Value) {
								t.Fatalf("%s: record %d header %d differs", when, i, hi)
							}
						}
					}
				}
				open, err := b.Records(nil)
				if err != nil {
					t.Fatal(err)
				}
				check("open", open)
				b.Seal(SealOptions{Compressor: mustCompressor(t, codec)})
				sealed, err := b.Records([]DecodedRecord{{}})
				if err != nil {
					t.Fatal(err)
				}
				check("sealed", sealed[1:])
			})
		}
	}
}

func TestRecordsRefusesMalformed(t *testing.T) {
	var b Builder
	b.Reset(nil, 0)
	b.Append(0, []byte("k"), []byte("value"), []Header{{Key: "h", Value: []byte("v")}})
	good := bytes.Clone(b.buf)
	for cut := HeaderSize; cut < len(good); cut++ {
		b.buf = good[:cut]
		if got, err := b.Records(nil); !errors.Is(err, ErrMalformedBatch) || len(got) != 0 {
			t.Fatalf("records cut at %d: %v, %d records", cut, err, len(got))
		}
	}
}
