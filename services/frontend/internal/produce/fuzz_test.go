package produce

import (
	"errors"
	"testing"
)

// FuzzParseRecords feeds arbitrary bodies to both parsers. Parse must never
// panic, must keep to the record limit, and every error must wrap one of the
// package's sentinels. The seed corpus is in testdata/fuzz/FuzzParseRecords.
func FuzzParseRecords(f *testing.F) {
	f.Add(uint8(FormatJSON), []byte(`{"records":[{"value":"v"}]}`))
	f.Add(uint8(FormatMsgpack), []byte{0x81, 0xa7, 'r', 'e', 'c', 'o', 'r', 'd', 's', 0x91, 0x81, 0xa5, 'v', 'a', 'l', 'u', 'e', 0xc0})
	const max = 16
	f.Fuzz(func(t *testing.T, format uint8, body []byte) {
		recs, err := Parse(Format(format), body, max)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooManyRecords) && !errors.Is(err, ErrContentType) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			if recs != nil {
				t.Fatalf("records returned with an error")
			}
			return
		}
		if len(recs) == 0 || len(recs) > max {
			t.Fatalf("%d records accepted, limit %d", len(recs), max)
		}
		for i, r := range recs {
			if r.Timestamp < 0 {
				t.Fatalf("record %d: negative timestamp %d accepted", i, r.Timestamp)
			}
		}
	})
}
