package console

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// maxParallelLookups bounds the look-ups one page runs at once (storage
// nodes asked for their replicas, groups described).
const maxParallelLookups = 8

// errNoSnapshot stands for a metadata refresh that returned no snapshot and
// no error.
var errNoSnapshot = errors.New("no cluster snapshot")

// banners collects the failures a page names at its top, in the order they
// were found. It is used by one goroutine.
type banners []string

func (b *banners) add(format string, args ...any) { *b = append(*b, fmt.Sprintf(format, args...)) }

// snapshot returns the cluster model a page shows: the current one; when the
// metadata service does not answer in time, the one the frontend holds, with
// a banner saying so; nil, with a banner, when the frontend holds none. The
// flag reports whether the snapshot is the metadata service's answer.
func (c *Console) snapshot(b *banners) (*cluster.Snapshot, bool) {
	ctx, cancel := c.lookupContext()
	defer cancel()
	snap, err := c.src.Metadata.RefreshOlder(ctx, snapshotMaxAge)
	if err == nil && snap != nil {
		return snap, true
	}
	if err == nil {
		err = errNoSnapshot
	}
	held := c.src.Metadata.Snapshot()
	if held == nil {
		b.add("Metadata service: no answer and no cluster model held by this frontend yet: %v", err)
		return nil, false
	}
	b.add("Metadata service: no answer (%v); this page shows the cluster as this frontend last saw it (metadata version %d).", err, held.Version)
	return held, false
}

// replicaKey names one replica: a partition of a topic on a node.
type replicaKey struct {
	topic     string
	partition int32
	node      int32
}

// replicaStates is what storage nodes reported about their replicas.
type replicaStates map[replicaKey]protocol.ReplicaInfo

// describeNodes asks the given storage nodes, in parallel and within one
// look-up timeout, for their replicas of topic (of every topic when ""). A
// node that fails or is not registered is named in b and left out.
func (c *Console) describeNodes(snap *cluster.Snapshot, nodes []int32, topic string, b *banners) replicaStates {
	ctx, cancel := c.lookupContext()
	defer cancel()
	type answer struct {
		infos []protocol.ReplicaInfo
		err   error
	}
	answers := make([]answer, len(nodes))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelLookups)
	for i, id := range nodes {
		n, ok := snap.Node(id)
		if !ok {
			answers[i].err = fmt.Errorf("not registered with the metadata service")
			continue
		}
		wg.Add(1)
		go func(i int, addr string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			answers[i].infos, answers[i].err = c.src.Replicas.DescribeReplicas(ctx, addr, topic)
		}(i, n.Addr)
	}
	wg.Wait()
	states := replicaStates{}
	for i, a := range answers {
		id := nodes[i]
		if a.err != nil {
			state := ""
			if n, ok := snap.Node(id); ok && !n.Alive {
				state = " (marked dead by the metadata service)"
			}
			b.add("Storage node %d%s: %v", id, state, a.err)
			continue
		}
		for _, r := range a.infos {
			states[replicaKey{topic: r.Topic, partition: r.Partition, node: id}] = r
		}
	}
	return states
}

// describeGroups describes the named groups in parallel within one look-up
// timeout. A group whose description fails is named in b and left out; one
// deleted since it was listed is left out.
func (c *Console) describeGroups(names []string, b *banners) map[string]*groups.Description {
	ctx, cancel := c.lookupContext()
	defer cancel()
	descs := make([]*groups.Description, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxParallelLookups)
	for i, name := range names {
		wg.Add(1)
		go func(i int, name string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			descs[i], errs[i] = c.src.Groups.Describe(ctx, name)
		}(i, name)
	}
	wg.Wait()
	out := make(map[string]*groups.Description, len(names))
	for i, name := range names {
		switch {
		case errors.Is(errs[i], &protocol.Error{Code: protocol.GroupIDNotFound}):
			// Deleted since it was listed: nothing to show, nothing failed.
		case errs[i] != nil:
			b.add("Offsets service: describe group %s: %v", name, errs[i])
		default:
			out[name] = descs[i]
		}
	}
	return out
}
