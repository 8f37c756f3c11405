package api

import (
	"sync"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/placement"
)

// placing places the topics being created. Creations run together (a
// Kafka CreateTopics of many topics, clients creating at once), and their
// proposals share the Raft log's appends; each is placed in turn, seeing
// the replicas of those placed before it that are not applied yet, so that
// topics created together spread their replicas and leaders as topics
// created one by one do.
type placing struct {
	mu      sync.Mutex
	pending map[string]cluster.Topic // placed, not yet applied (or refused)
}

// place assigns the replicas of a new topic, given the live nodes and the
// applied topics (read under the lock, so that a topic is counted once:
// pending until its creation is done, applied after), and holds them as
// pending until done(name). A topic of that name being created already is
// refused.
func (p *placing) place(name string, live []placement.Node, applied func() []cluster.Topic, partitions, rf int) ([][]int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[name]; ok {
		return nil, bad(protocol.TopicAlreadyExists, "topic %q is being created", name)
	}
	existing := applied()
	have := make(map[string]bool, len(existing))
	for _, t := range existing {
		have[t.Name] = true
	}
	for _, t := range p.pending {
		if !have[t.Name] {
			existing = append(existing, t)
		}
	}
	replicas, err := placement.Assign(live, existing, partitions, rf)
	if err != nil {
		return nil, err
	}
	t := cluster.Topic{Name: name, Partitions: make([]cluster.Partition, len(replicas))}
	for i, r := range replicas {
		t.Partitions[i] = cluster.Partition{ID: int32(i), Replicas: r}
	}
	if p.pending == nil {
		p.pending = map[string]cluster.Topic{}
	}
	p.pending[name] = t
	return replicas, nil
}

// done ends a creation placed by place, applied or not.
func (p *placing) done(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, name)
}
