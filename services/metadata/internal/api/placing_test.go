package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/metadata/internal/placement"
)

// TestPlacingCountsTopicsNotYetApplied: a topic placed while another is
// being created takes the other's replicas into account (a different
// leader on three empty nodes), a second creation of a name being created
// is refused, and a topic both applied and still pending counts once.
func TestPlacingCountsTopicsNotYetApplied(t *testing.T) {
	var p placing
	live := []placement.Node{{ID: 1}, {ID: 2}, {ID: 3}}
	var applied []cluster.Topic
	topics := func() []cluster.Topic { return append([]cluster.Topic(nil), applied...) }
	a, err := p.place("a", live, topics, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.place("b", live, topics, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a[0][0] == b[0][0] {
		t.Fatalf("a and b, placed together, both lead on node %d", a[0][0])
	}
	if _, err := p.place("a", live, topics, 1, 1); !errors.Is(err, &protocol.Error{Code: protocol.TopicAlreadyExists}) {
		t.Fatalf("a second creation of a: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	// a is applied but its creation not done yet: it counts once, so the
	// third topic goes to the node neither a nor b leads on.
	applied = append(applied, cluster.Topic{Name: "a", Partitions: []cluster.Partition{{Replicas: a[0]}}})
	c, err := p.place("c", live, topics, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c[0][0] == a[0][0] || c[0][0] == b[0][0] {
		t.Fatalf("c leads on node %d with a on %d and b on %d", c[0][0], a[0][0], b[0][0])
	}
	p.done("a")
	if _, err := p.place("a", live, topics, 1, 1); err != nil {
		t.Fatalf("a creation of a after the first was done: %v", err)
	}
}

// TestTopicsCreatedTogetherSpreadTheirLeaders: 31 topics of one partition
// created at once on three nodes lead on each node 10 or 11 times, as
// created one by one they would; creating one name twice at once creates
// it once.
func TestTopicsCreatedTogetherSpreadTheirLeaders(t *testing.T) {
	m := startCluster(t, 1, clusterOpts{})[0]
	c := client(m)
	ctx := context.Background()
	registerNodes(t, c, 3)
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range 30 {
		wg.Go(func() {
			_, errs[i] = c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: fmt.Sprintf("t%d", i), Partitions: 1, ReplicationFactor: 1})
		})
	}
	for i := 30; i < 32; i++ {
		wg.Go(func() {
			_, errs[i] = c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "twice", Partitions: 1, ReplicationFactor: 1})
		})
	}
	wg.Wait()
	for i, err := range errs[:30] {
		if err != nil {
			t.Fatalf("t%d: %v", i, err)
		}
	}
	if (errs[30] == nil) == (errs[31] == nil) || !errors.Is(errors.Join(errs[30], errs[31]), &protocol.Error{Code: protocol.TopicAlreadyExists}) {
		t.Fatalf("two creations of one name: %v, %v; want one created, one TOPIC_ALREADY_EXISTS", errs[30], errs[31])
	}
	leads := map[int32]int{}
	for i := range 31 {
		name := fmt.Sprintf("t%d", i)
		if i == 30 {
			name = "twice"
		}
		tp, err := c.DescribeTopic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		leads[tp.Partitions[0].Replicas[0]]++
	}
	for id := int32(1); id <= 3; id++ {
		if leads[id] != 10 && leads[id] != 11 {
			t.Fatalf("leaders per node of 31 topics created together: %v, want 10 or 11 each", leads)
		}
	}
}
