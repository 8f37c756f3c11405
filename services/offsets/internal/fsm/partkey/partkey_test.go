package partkey

import (
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
)

// TestKeysAreStable: the keys are stored (bucket keys of existing state
// files, a member's GrantedAt), so their form is pinned; Parse reads back
// what Bytes made and nothing else (a share group's "config" key).
func TestKeysAreStable(t *testing.T) {
	if got := string(Bytes("t", 258)); got != "t\x00\x00\x00\x01\x02" {
		t.Fatalf("Bytes(t, 258) = %q", got)
	}
	if got := String(groups.TP{Topic: "t", Partition: 258}); got != "t/258" {
		t.Fatalf("String(t-258) = %q", got)
	}
	if topic, p, ok := Parse(Bytes("orders.eu", 7)); !ok || topic != "orders.eu" || p != 7 {
		t.Fatalf("Parse(Bytes(orders.eu, 7)) = %q, %d, %v", topic, p, ok)
	}
	for _, k := range []string{"config", "", "\x00\x00\x00\x00\x01"} {
		if _, _, ok := Parse([]byte(k)); ok {
			t.Errorf("Parse(%q) took it for a partition key", k)
		}
	}
}
