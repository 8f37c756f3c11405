package txnjoin

import (
	"slices"
	"testing"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/txns"
)

// TestJoiner: a partition added to a version 2 transaction is not asked
// for again in it; a new epoch (the next transaction) or another producer id
// asks again.
func TestJoiner(t *testing.T) {
	var j Joiner
	p := txns.Producer{ProducerID: 7, ProducerEpoch: 3}
	a, b := groups.TP{Topic: "t", Partition: 0}, groups.TP{Topic: "t", Partition: 1}
	if got := j.missing("tx", p, []groups.TP{a, b}); !slices.Equal(got, []groups.TP{a, b}) {
		t.Fatalf("nothing added yet: %v", got)
	}
	j.added("tx", p, []groups.TP{a})
	if got := j.missing("tx", p, []groups.TP{a, b}); !slices.Equal(got, []groups.TP{b}) {
		t.Fatalf("after adding %v: missing %v", a, got)
	}
	next := txns.Producer{ProducerID: 7, ProducerEpoch: 4}
	if got := j.missing("tx", next, []groups.TP{a}); !slices.Equal(got, []groups.TP{a}) {
		t.Fatalf("the next transaction: missing %v", got)
	}
	j.added("tx", next, []groups.TP{b})
	if got := j.missing("tx", p, []groups.TP{a}); !slices.Equal(got, []groups.TP{a}) {
		t.Fatalf("the ended transaction's epoch: missing %v", got)
	}
	if got := j.missing("other", next, []groups.TP{b}); !slices.Equal(got, []groups.TP{b}) {
		t.Fatalf("another transactional id: missing %v", got)
	}
}
