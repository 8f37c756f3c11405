package raftstore

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := Open(DefaultConfig(path))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func mkLog(idx, term uint64, data string) *raft.Log {
	return &raft.Log{
		Index: idx, Term: term, Type: raft.LogCommand, Data: []byte(data),
		Extensions: []byte("ext"), AppendedAt: time.Unix(1700000000, int64(idx)),
	}
}

func TestLogStoreEmpty(t *testing.T) {
	s, _ := openTemp(t)
	first, err := s.FirstIndex()
	if err != nil || first != 0 {
		t.Fatalf("FirstIndex = %d, %v; want 0, nil", first, err)
	}
	last, err := s.LastIndex()
	if err != nil || last != 0 {
		t.Fatalf("LastIndex = %d, %v; want 0, nil", last, err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty store = %v; want raft.ErrLogNotFound", err)
	}
}

func TestLogStoreRoundTripAndReopen(t *testing.T) {
	s, path := openTemp(t)
	if err := s.StoreLog(mkLog(1, 1, "one")); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{mkLog(2, 1, "two"), mkLog(3, 2, "three"), mkLog(4, 2, "")}); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if first != 1 || last != 4 {
			t.Fatalf("range = [%d, %d]; want [1, 4]", first, last)
		}
		var l raft.Log
		if err := s.GetLog(3, &l); err != nil {
			t.Fatal(err)
		}
		want := mkLog(3, 2, "three")
		if l.Index != 3 || l.Term != 2 || l.Type != raft.LogCommand || !bytes.Equal(l.Data, want.Data) ||
			!bytes.Equal(l.Extensions, want.Extensions) || !l.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("GetLog(3) = %+v; want %+v", l, want)
		}
		if err := s.GetLog(4, &l); err != nil || len(l.Data) != 0 {
			t.Fatalf("GetLog(4) = %+v, %v; want empty data", l, err)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(DefaultConfig(path))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	check(s2)
}

func TestLogStoreReturnedBytesOutliveTransaction(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.StoreLogs([]*raft.Log{mkLog(1, 1, "aaaa"), mkLog(2, 1, "bbbb")}); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); err != nil {
		t.Fatal(err)
	}
	// Overwrite and grow the file; the bytes we hold must not change.
	for i := uint64(3); i < 200; i++ {
		if err := s.StoreLog(mkLog(i, 1, string(bytes.Repeat([]byte("x"), 512)))); err != nil {
			t.Fatal(err)
		}
	}
	if string(l.Data) != "aaaa" {
		t.Fatalf("data changed after later writes: %q", l.Data)
	}
}

func TestLogStoreDeleteRange(t *testing.T) {
	tests := []struct {
		name        string
		min, max    uint64
		first, last uint64
		gone        []uint64
		kept        []uint64
	}{
		{"prefix", 1, 3, 4, 10, []uint64{1, 2, 3}, []uint64{4, 10}},
		{"suffix", 8, 10, 1, 7, []uint64{8, 9, 10}, []uint64{1, 7}},
		{"middle", 4, 6, 1, 10, []uint64{4, 5, 6}, []uint64{3, 7}},
		{"beyond", 5, 100, 1, 4, []uint64{5, 10}, []uint64{4}},
		{"all", 1, 10, 0, 0, []uint64{1, 10}, nil},
		{"empty range", 6, 5, 1, 10, nil, []uint64{5, 6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTemp(t)
			var logs []*raft.Log
			for i := uint64(1); i <= 10; i++ {
				logs = append(logs, mkLog(i, 1, "d"))
			}
			if err := s.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(tc.min, tc.max); err != nil {
				t.Fatal(err)
			}
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if first != tc.first || last != tc.last {
				t.Fatalf("range = [%d, %d]; want [%d, %d]", first, last, tc.first, tc.last)
			}
			var l raft.Log
			for _, i := range tc.gone {
				if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
					t.Errorf("GetLog(%d) = %v; want ErrLogNotFound", i, err)
				}
			}
			for _, i := range tc.kept {
				if err := s.GetLog(i, &l); err != nil {
					t.Errorf("GetLog(%d) = %v; want it kept", i, err)
				}
			}
		})
	}
}

func TestStableStore(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.Get([]byte("missing")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get(missing) error = %v; want exactly \"not found\"", err)
	}
	if _, err := s.GetUint64([]byte("missing")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64(missing) error = %v; want exactly \"not found\"", err)
	}
	if err := s.Set([]byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("term"), 42); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get([]byte("k"))
	if err != nil || string(v) != "v1" {
		t.Fatalf("Get(k) = %q, %v", v, err)
	}
	v[0] = 'X' // our copy; the store must be unaffected
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(DefaultConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v, err := s2.Get([]byte("k")); err != nil || string(v) != "v1" {
		t.Fatalf("after reopen Get(k) = %q, %v; want v1", v, err)
	}
	if n, err := s2.GetUint64([]byte("term")); err != nil || n != 42 {
		t.Fatalf("after reopen GetUint64(term) = %d, %v; want 42", n, err)
	}
	if _, err := s2.GetUint64([]byte("k")); !errors.Is(err, ErrCorruptEntry) {
		t.Fatalf("GetUint64 of a 2-byte value = %v; want ErrCorruptEntry", err)
	}
}

func TestClosedStore(t *testing.T) {
	s, _ := openTemp(t)
	_ = s.Close()
	if err := s.StoreLog(mkLog(1, 1, "x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLog after Close = %v; want ErrClosed", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("empty config validated")
	}
	if err := DefaultConfig("x").Validate(); err != nil {
		t.Fatal(err)
	}
}
