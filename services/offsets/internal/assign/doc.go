// Package assign holds the server-side partition assignors of the offsets
// service's consumer-group coordinator (Kafka KIP-848 style: the coordinator,
// not a group leader, computes each member's target assignment). They are
// pure, deterministic functions of an Input: no I/O, no clock, no randomness,
// safe for concurrent use.
//
// Every assignor guarantees, for any Input:
//
//   - Coverage: every partition of every topic that at least one member
//     subscribes (and that Input.Partitions knows, with a count of one or more)
//     is assigned to exactly one member.
//   - Eligibility: a partition goes only to a member subscribing its topic;
//     nothing else is assigned.
//   - Shape: every member id is a key of the result, with a non-nil, sorted
//     (groups.SortTPs) slice, empty when the member gets nothing.
//   - Determinism: the result depends only on the Input's content, not on the
//     order of Members or of a member's Topics. Members are sorted by id first;
//     two Members with the same id are one member subscribing the union.
//
// The assignors:
//
//   - range (groups.AssignorRange), Kafka's RangeAssignor: per topic, the
//     subscribing members sorted by id get contiguous ranges of partitions, the
//     first (partitions % members) of them one extra. Balanced per topic (sizes
//     differ by at most one), not across topics: with several topics the
//     members first in id order carry the extras of every topic.
//   - roundrobin (groups.AssignorRoundRobin), Kafka's RoundRobinAssignor: all
//     subscribed partitions sorted by (topic, partition) are dealt in turn to
//     the members sorted by id, skipping a member that does not subscribe the
//     partition's topic. With identical subscriptions sizes differ by at most
//     one; with mixed subscriptions there is no balance guarantee.
//   - sticky (groups.AssignorSticky, the default): balance first, then move as
//     few partitions as possible from Input.Previous. A previous partition is
//     valid when its member is still in the group and still subscribes its
//     topic and the partition still exists; invalid ones are ignored.
//
// Sticky, identical subscriptions (every member subscribes the same existing
// topics): sizes differ by at most one. Each member keeps its valid previous
// partitions up to its quota (P/M, or P/M+1 for P%M members, which go first to
// members that held more than P/M), and only the rest move. This keeps the
// largest number of previous partitions any balanced assignment can keep: when
// a member leaves only its partitions move; when one joins only the partitions
// it receives move, taken from the members above their new quota.
//
// Sticky, mixed subscriptions: each member keeps all its valid previous
// partitions, the others go one by one (topics with the fewest subscribers
// first) to the least-loaded eligible member, then partitions are shifted
// along chains of members (A gives a partition to B, which gives one of
// another topic to C) while such a chain can take one partition from a member
// to one holding at least two fewer. At the end no chain can, which is the
// best balance the subscriptions allow: the largest assignment is as small as
// possible, and members with identical subscriptions differ by at most one.
// Chains are chosen to move partitions already moved in this round first and
// previous partitions last, but the fewest moves are not guaranteed here.
//
// Sticky is stable in both cases: when Previous is valid, covers every
// partition and is balanced as above (in particular when it is sticky's own
// output for the same members, subscriptions and partitions), the result is
// Previous.
package assign
