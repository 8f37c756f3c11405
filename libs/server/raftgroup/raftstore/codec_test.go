package raftstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

func TestDecodeLogRejectsCorruptEntries(t *testing.T) {
	good := encodeLog(mkLog(7, 3, "payload"))
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"short header", good[:fixedLen-1]},
		{"bad version", append([]byte{9}, good[1:]...)},
		{"truncated data", good[:len(good)-6]},
		{"trailing bytes", append(append([]byte(nil), good...), 0)},
		{"huge length", append(append([]byte(nil), good[:fixedLen]...), 0xff, 0xff, 0xff, 0xff, 0x0f)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l raft.Log
			if err := decodeLog(tc.in, &l); !errors.Is(err, ErrCorruptEntry) {
				t.Fatalf("decodeLog = %v; want ErrCorruptEntry", err)
			}
		})
	}
}

// FuzzDecodeLog checks that no stored bytes make the decoder panic and that
// whatever decodes survives an encode/decode round trip unchanged.
func FuzzDecodeLog(f *testing.F) {
	f.Add(encodeLog(mkLog(1, 1, "x")))
	f.Add(encodeLog(&raft.Log{}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeLog(b, &l); err != nil {
			return
		}
		var again raft.Log
		if err := decodeLog(encodeLog(&l), &again); err != nil {
			t.Fatalf("re-decoding failed: %v", err)
		}
		if again.Index != l.Index || again.Term != l.Term || again.Type != l.Type ||
			!bytes.Equal(again.Data, l.Data) || !bytes.Equal(again.Extensions, l.Extensions) ||
			!again.AppendedAt.Equal(l.AppendedAt) {
			t.Fatalf("round trip changed the entry: %+v != %+v", again, l)
		}
	})
}
