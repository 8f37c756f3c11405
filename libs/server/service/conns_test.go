package service

import "testing"

func TestConnsLimitPerAddress(t *testing.T) {
	s := NewConns[int](2)
	if !s.Add(1, "a") || !s.Add(2, "a") || !s.Add(3, "b") {
		t.Fatal("refused a connection within the limit")
	}
	if s.Add(4, "a") {
		t.Fatal("a third connection from a was counted past the limit of two")
	}
	s.Remove(1)
	s.Remove(1) // twice: no effect
	if !s.Add(5, "a") {
		t.Fatal("a connection from a was refused after one of its two closed")
	}
	var open []int
	s.Each(func(c int) { open = append(open, c) })
	if len(open) != 3 {
		t.Fatalf("open connections %v, want 2, 3 and 5", open)
	}
	unlimited := NewConns[int](0)
	for i := range 100 {
		if !unlimited.Add(i, "a") {
			t.Fatal("a set without a limit refused a connection")
		}
	}
}
