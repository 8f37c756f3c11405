package assign

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicemq/sluice/libs/groups"
)

// Member is one group member as the assignor sees it.
type Member struct {
	// ID is the member id. Members sharing an id are merged into one
	// subscribing the union of their topics.
	ID string
	// Topics is the subscription; order and duplicates do not matter.
	Topics []string
}

// Input is everything an assignor needs.
type Input struct {
	// Members in any order.
	Members []Member
	// Partitions is the partition count per topic. A topic missing here
	// (unknown or deleted), or with a count below one, is assigned to nobody.
	Partitions map[string]int32
	// Previous is the previous target assignment by member id. Only sticky
	// reads it. Entries it cannot keep (absent member, topic no longer
	// subscribed, partition no longer existing) are ignored; a partition
	// listed under several members belongs to the lowest id that may keep it.
	Previous map[string][]groups.TP
}

// Assignor computes a group's target assignment.
type Assignor interface {
	// Name is the name members ask for, one of Names().
	Name() string
	// Assign returns the target assignment by member id, keeping the
	// guarantees in the package documentation: every member of in is a key
	// with a sorted, non-nil slice; every subscribed partition goes to exactly
	// one member subscribing its topic. It does not modify in and may be
	// called from any goroutine.
	Assign(in Input) map[string][]groups.TP
}

// ErrUnknownAssignor is returned (wrapped) by Get for a name no assignor has.
var ErrUnknownAssignor = errors.New("unknown assignor")

var assignors = map[string]Assignor{
	groups.AssignorRange:      rangeAssignor{},
	groups.AssignorRoundRobin: roundRobinAssignor{},
	groups.AssignorSticky:     stickyAssignor{},
}

// Get returns the assignor called name; "" means groups.DefaultAssignor. An
// unknown name is an error wrapping ErrUnknownAssignor that lists the valid
// ones.
func Get(name string) (Assignor, error) {
	if name == "" {
		name = groups.DefaultAssignor
	}
	a, ok := assignors[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (valid: %s)", ErrUnknownAssignor, name, strings.Join(Names(), ", "))
	}
	return a, nil
}

// Names returns the assignor names, sorted.
func Names() []string {
	names := make([]string, 0, len(assignors))
	for n := range assignors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
