package groups

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/server/service"
)

func TestValidateGroupID(t *testing.T) {
	for _, ok := range []string{"g", "orders.v2", "a_b-C9", strings.Repeat("x", MaxGroupIDLen)} {
		if err := ValidateGroupID(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a/b", "ü", strings.Repeat("x", MaxGroupIDLen+1)} {
		if err := ValidateGroupID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFlattenAndGroupRoundTrip(t *testing.T) {
	in := []TopicPartitions{{Topic: "b", Partitions: []int32{2, 0, 2}}, {Topic: "a", Partitions: []int32{1}}, {Topic: "b", Partitions: []int32{1}}}
	flat := Flatten(in)
	want := []TP{{"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}}
	if !slices.Equal(flat, want) {
		t.Fatalf("Flatten = %v, want %v (sorted, deduplicated)", flat, want)
	}
	grouped := Group(flat)
	if len(grouped) != 2 || grouped[0].Topic != "a" || !slices.Equal(grouped[1].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("Group = %+v", grouped)
	}
	if g := Group(nil); g == nil || len(g) != 0 {
		t.Fatalf("Group(nil) = %#v, want an empty non-nil slice (JSON [])", g)
	}
}

func TestCommittedStale(t *testing.T) {
	for _, tc := range []struct {
		committed, current string
		want               bool
	}{
		{"a-1", "a-2", true},
		{"a-2", "a-2", false},
		{"", "a-2", false}, // committed before incarnations were recorded
		{"a-1", "", false}, // the reader does not know the incarnation
	} {
		if got := (Committed{TopicID: tc.committed}).Stale(tc.current); got != tc.want {
			t.Errorf("committed for %q, topic now %q: stale %v, want %v", tc.committed, tc.current, got, tc.want)
		}
	}
}

// The offsets service reads the principal a relay names from
// service.PrincipalHeader; Client.For must send that very header.
func TestPrincipalHeaderIsTheServices(t *testing.T) {
	if PrincipalHeader != service.PrincipalHeader {
		t.Fatalf("groups.PrincipalHeader %q, service.PrincipalHeader %q", PrincipalHeader, service.PrincipalHeader)
	}
}
