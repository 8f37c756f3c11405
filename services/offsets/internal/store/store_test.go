package store

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCommitFetchSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit("g1", []Committed{{Topic: "orders", Partition: 1, Offset: 42, Metadata: "m"}, {Topic: "orders", Partition: 0, Offset: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit("g2", []Committed{{Topic: "orders", Partition: 0, Offset: 1}, {Topic: "audit", Partition: 0, Offset: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit("g1", []Committed{{Topic: "orders", Partition: 0, Offset: 9}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Fetch("g1", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Offset != 9 || got[1].Offset != 42 || got[1].Metadata != "m" || got[0].CommitTime == 0 {
		t.Fatalf("g1 offsets after reopen: %+v", got)
	}
	g2, _ := s.Fetch("g2", "")
	if len(g2) != 2 || g2[0].Topic != "audit" {
		t.Fatalf("g2 offsets: %+v", g2)
	}
	groups, _ := s.Groups()
	if !reflect.DeepEqual(groups, []string{"g1", "g2"}) {
		t.Fatalf("groups %v", groups)
	}
	if err := s.DeleteGroup("g1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Fetch("g1", ""); len(got) != 0 {
		t.Fatalf("deleted group still has %v", got)
	}
}

func TestCommitRejectsInvalid(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, c := range map[string][]Committed{
		"negative offset":    {{Topic: "t", Partition: 0, Offset: -1}},
		"negative partition": {{Topic: "t", Partition: -1, Offset: 0}},
		"no topic":           {{Partition: 0, Offset: 1}},
	} {
		if err := s.Commit("g", c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if err := s.Commit("", []Committed{{Topic: "t"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty group: err = %v", err)
	}
	// A rejected batch writes nothing, even its valid entries.
	_ = s.Commit("g", []Committed{{Topic: "t", Offset: 5}, {Topic: "t", Partition: 1, Offset: -3}})
	if got, _ := s.Fetch("g", ""); len(got) != 0 {
		t.Fatalf("partial commit stored %v", got)
	}
}
