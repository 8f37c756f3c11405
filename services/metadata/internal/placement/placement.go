package placement

import (
	"errors"
	"fmt"
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

// LiveNodes returns the alive nodes of a cluster as candidates.
func LiveNodes(nodes []cluster.Node) []Node {
	out := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Alive {
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
