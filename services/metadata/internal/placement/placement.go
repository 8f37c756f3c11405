package placement

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/sluicemq/sluice/libs/cluster"
)

// Sentinel errors.
var (
	// ErrNotEnoughNodes: fewer live nodes than the replication factor.
	ErrNotEnoughNodes = errors.New("replication factor is larger than the number of live storage nodes")
	// ErrInvalidRequest: a partition count or replication factor below one.
	ErrInvalidRequest = errors.New("invalid placement request")
)

// Node is a candidate storage node.
type Node struct {
	ID   int32
	Rack string
}

// LiveNodes returns the nodes of a cluster that may take new replicas: alive
// and not decommissioned.
func LiveNodes(nodes []cluster.Node) []Node {
	out := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Alive && !n.Decommissioned {
			out = append(out, Node{ID: n.ID, Rack: n.Rack})
		}
	}
	return out
}

// load is what placement knows about one node while it assigns.
type load struct {
	Node
	pos      int // position in the ring of node ids
	rack     string
	leaders  int
	replicas int
}

// Assign returns, for each of the partitions, the replica list (preferred
// leader first) of replicationFactor distinct nodes chosen among nodes, taking
// the replicas and leaders of the existing topics into account.
func Assign(nodes []Node, existing []cluster.Topic, partitions, replicationFactor int) ([][]int32, error) {
	if partitions < 1 || replicationFactor < 1 {
		return nil, fmt.Errorf("%w: %d partitions, replication factor %d", ErrInvalidRequest, partitions, replicationFactor)
	}
	ring := newRing(nodes, existing)
	if replicationFactor > len(ring) {
		return nil, fmt.Errorf("%w: replication factor %d, %d live nodes", ErrNotEnoughNodes, replicationFactor, len(ring))
	}
	out := make([][]int32, partitions)
	for p := range out {
		out[p] = ring.assignOne(replicationFactor)
	}
	return out, nil
}

// ring is the nodes sorted by id, with their current loads.
type ring []*load

func newRing(nodes []Node, existing []cluster.Topic) ring {
	byID := map[int32]*load{}
	for _, n := range nodes {
		if _, dup := byID[n.ID]; dup {
			continue
		}
		rack := n.Rack
		if rack == "" {
			rack = fmt.Sprintf("\x00node-%d", n.ID) // its own rack; cannot clash with a real name
		}
		byID[n.ID] = &load{Node: n, rack: rack}
	}
	for _, t := range existing {
		for _, p := range t.Partitions {
			for i, id := range p.Replicas {
				if l, ok := byID[id]; ok {
					l.replicas++
					if i == 0 {
						l.leaders++
					}
				}
			}
		}
	}
	r := make(ring, 0, len(byID))
	for _, l := range byID {
		r = append(r, l)
	}
	sort.Slice(r, func(i, j int) bool { return r[i].ID < r[j].ID })
	for i, l := range r {
		l.pos = i
	}
	return r
}

// assignOne picks one partition's replicas and records them in the loads.
func (r ring) assignOne(rf int) []int32 {
	leader := r[0]
	for _, l := range r[1:] {
		if l.leaders < leader.leaders || (l.leaders == leader.leaders && l.replicas < leader.replicas) {
			leader = l
		}
	}
	chosen := []*load{leader}
	usedRacks := map[string]bool{leader.rack: true}
	racks := r.rackCount()
	for len(chosen) < rf {
		var best *load
		for step := 1; step < len(r); step++ {
			l := r[(leader.pos+step)%len(r)]
			if contains(chosen, l) {
				continue
			}
			if usedRacks[l.rack] && len(usedRacks) < racks {
				continue // an unused rack is still available
			}
			if best == nil || l.replicas < best.replicas {
				best = l
			}
		}
		chosen = append(chosen, best)
		usedRacks[best.rack] = true
	}
	out := make([]int32, len(chosen))
	for i, l := range chosen {
		l.replicas++
		out[i] = l.ID
	}
	leader.leaders++
	return out
}

func (r ring) rackCount() int {
	seen := map[string]bool{}
	for _, l := range r {
		seen[l.rack] = true
	}
	return len(seen)
}

func contains(ls []*load, l *load) bool {
	for _, c := range ls {
		if c == l {
			return true
		}
	}
	return false
}

// Move is one partition's new replica list.
type Move struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// Evacuate returns a move for every partition, not already being
// reassigned, with a replica on one of the leaving nodes: each such replica
// is replaced, in its position (so the preferred leader order stays), by the
// candidate holding the fewest replicas that the partition does not use yet,
// preferring a rack none of its other replicas is in. Partitions without
// enough candidates are left out and named in the error (ErrNotEnoughNodes);
// the moves returned are valid either way.
func Evacuate(candidates []Node, existing []cluster.Topic, leaving []int32) ([]Move, error) {
	r := newRing(candidates, existing)
	var out []Move
	var stuck []string
	for _, t := range existing {
		for _, p := range t.Partitions {
			if p.Reassigning() || !holdsAny(p.Replicas, leaving) {
				continue
			}
			next, ok := r.replace(p.Replicas, leaving)
			if !ok {
				stuck = append(stuck, fmt.Sprintf("%s-%d", t.Name, p.ID))
				continue
			}
			out = append(out, Move{Topic: t.Name, Partition: p.ID, Replicas: next})
		}
	}
	if len(stuck) > 0 {
		return out, fmt.Errorf("%w: no node left to take the replicas of %v", ErrNotEnoughNodes, stuck)
	}
	return out, nil
}

// replace returns replicas with each leaving member swapped for a candidate,
// recording the new replicas in the loads; ok is false (and nothing is
// recorded) when candidates run out.
func (r ring) replace(replicas, leaving []int32) (out []int32, ok bool) {
	out = append([]int32(nil), replicas...)
	var chosen []*load
	for i, id := range out {
		if !slices.Contains(leaving, id) {
			continue
		}
		racks := map[string]bool{}
		for _, other := range out {
			if l := r.byID(other); l != nil && other != id {
				racks[l.rack] = true
			}
		}
		var best *load
		for _, l := range r {
			if slices.Contains(out, l.ID) || slices.Contains(leaving, l.ID) {
				continue
			}
			if best == nil || better(l, best, racks) {
				best = l
			}
		}
		if best == nil {
			return nil, false
		}
		out[i] = best.ID
		chosen = append(chosen, best)
	}
	for _, l := range chosen {
		l.replicas++
	}
	return out, true
}

// better reports whether l is a better replacement than best: a rack the
// partition does not use first, then fewer replicas, then the lower id.
func better(l, best *load, usedRacks map[string]bool) bool {
	if lNew, bestNew := !usedRacks[l.rack], !usedRacks[best.rack]; lNew != bestNew {
		return lNew
	}
	if l.replicas != best.replicas {
		return l.replicas < best.replicas
	}
	return l.ID < best.ID
}

func (r ring) byID(id int32) *load {
	for _, l := range r {
		if l.ID == id {
			return l
		}
	}
	return nil
}

func holdsAny(replicas, ids []int32) bool {
	for _, id := range replicas {
		if slices.Contains(ids, id) {
			return true
		}
	}
	return false
}
