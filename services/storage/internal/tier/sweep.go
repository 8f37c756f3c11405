package tier

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/storage/internal/replica"
)

// Objects no remote log names are deleted here: orphans of uploads whose
// commit was lost (a leader killed between its upload and the commit, a
// commit refused after a leader change) and the segments of deleted
// topics, which metadata keeps as garbage until a node reports them gone.

// partitionPrefix is the key prefix of a partition's objects (objectKey).
func partitionPrefix(r *replica.Replica) string {
	return fmt.Sprintf("%s-%s/%d/", r.Key.Topic, r.TopicID(), r.Key.Partition)
}

// sweep deletes the objects under a led partition's prefix that its remote
// log does not name. Only the leader commits to the remote log, one upload
// at a time from this loop, and a deposed leader's commits are refused: an
// object the remote log does not name now never will be.
func (t *Tier) sweep(ctx context.Context, r *replica.Replica, p *part) (int, error) {
	objs, err := t.deps.Store.List(ctx, partitionPrefix(r))
	if err != nil {
		return 0, fmt.Errorf("list objects: %w", err)
	}
	t.mu.Lock()
	named := make(map[string]bool, len(p.rlog.Segments))
	for _, s := range p.rlog.Segments {
		named[s.Object] = true
	}
	t.mu.Unlock()
	var orphans []string
	for _, o := range objs {
		if !named[o.Key] {
			orphans = append(orphans, o.Key)
		}
	}
	if len(orphans) == 0 {
		return 0, nil
	}
	if err := t.deps.Store.Delete(ctx, orphans...); err != nil {
		return 0, fmt.Errorf("delete %d orphans: %w", len(orphans), err)
	}
	t.deps.Metrics.Orphans.Add(float64(len(orphans)))
	t.log.Info("deleted orphan objects (uploads never committed)", slog.String("partition", r.Key.String()), slog.Int("objects", len(orphans)))
	return len(orphans), nil
}

// collectGarbage deletes the objects of deleted topics' remote logs and
// tells metadata. One node does it, the live one with the lowest id, so
// that the nodes do not all delete the same objects.
func (t *Tier) collectGarbage(ctx context.Context) error {
	snap := t.deps.Replicas.Access()
	self := t.deps.Replicas.Self()
	for _, n := range snap.Nodes {
		if n.Alive && n.ID < self {
			return nil
		}
	}
	garbage, err := t.deps.Meta.RemoteGarbage(ctx)
	if err != nil {
		return fmt.Errorf("read the remote garbage: %w", err)
	}
	for _, g := range garbage {
		keys := make([]string, 0, len(g.Segments))
		for _, s := range g.Segments {
			keys = append(keys, s.Object)
		}
		if len(keys) == 0 {
			continue
		}
		if err := t.deps.Store.Delete(ctx, keys...); err != nil {
			return fmt.Errorf("delete the objects of deleted topic %s: %w", g.Topic, err)
		}
		// Orphans of the deleted topic's partitions go too.
		if objs, err := t.deps.Store.List(ctx, prefixOf(keys[0])); err == nil && len(objs) > 0 {
			rest := make([]string, 0, len(objs))
			for _, o := range objs {
				rest = append(rest, o.Key)
			}
			if err := t.deps.Store.Delete(ctx, rest...); err != nil {
				return fmt.Errorf("delete the objects of deleted topic %s: %w", g.Topic, err)
			}
		}
		if err := t.deps.Meta.ClearRemoteGarbage(ctx, cluster.ClearRemoteGarbageRequest{Topic: g.Topic, Partition: g.Partition, Objects: keys}); err != nil {
			return fmt.Errorf("clear the remote garbage of deleted topic %s: %w", g.Topic, err)
		}
		t.log.Info("deleted the remote segments of a deleted topic", slog.String("topic", g.Topic),
			slog.Int("partition", int(g.Partition)), slog.Int("objects", len(keys)))
	}
	return nil
}

// prefixOf is the partition prefix of an object key: everything up to its
// last "/".
func prefixOf(key string) string { return key[:strings.LastIndex(key, "/")+1] }
