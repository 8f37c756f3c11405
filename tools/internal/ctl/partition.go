package ctl

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// pollEvery is how often a waiting reassignment or decommission looks at the
// cluster again.
const pollEvery = 500 * time.Millisecond

// waitFlags are the flags of the commands that wait for a move to finish.
type waitFlags struct {
	noWait  *bool
	timeout *time.Duration
}

func addWaitFlags(fs *flag.FlagSet) waitFlags {
	return waitFlags{
		noWait:  fs.Bool("no-wait", false, "return once the move started"),
		timeout: fs.Duration("timeout", 30*time.Minute, "how long to wait for the move to finish (it goes on afterwards)"),
	}
}

// wait calls done every pollEvery until it reports the move finished, for
// at most --timeout; the error is the context's when time ran out.
func (wf waitFlags) wait(ctx context.Context, env Env, done func(ctx context.Context, w *moveWatcher) bool) error {
	ctx, cancel := context.WithTimeout(ctx, *wf.timeout)
	defer cancel()
	w := newMoveWatcher(env)
	defer w.close()
	for !done(ctx, w) {
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
	return nil
}

// partitionReassign starts, waits for or cancels a partition's reassignment.
func partitionReassign(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("partition reassign", flag.ContinueOnError)
	list := fs.String("replicas", "", "the new replica list, preferred leader first: node ids, comma-separated")
	cancelIt := fs.Bool("cancel", false, "stop the reassignment in progress and keep the replicas from before")
	wf := addWaitFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "TOPIC/PARTITION"); err != nil {
		return err
	}
	topic, partition, err := parseTopicPartition(pos[0])
	if err != nil {
		return err
	}
	admin := env.frontendAdmin()
	if *cancelIt {
		if *list != "" {
			return fmt.Errorf("%w: --cancel takes no --replicas", errUsage)
		}
		p, err := admin.CancelReassignment(ctx, topic, partition)
		if err != nil {
			return fmt.Errorf("cancel the reassignment of %s-%d: %w", topic, partition, err)
		}
		fmt.Fprintf(env.Stdout, "reassignment of %s-%d cancelled: replicas %s, leader %d, ISR %s\n", topic, partition, ids(p.Replicas), p.Leader, ids(p.ISR))
		return nil
	}
	replicas, err := parseNodeIDs(*list)
	if err != nil {
		return err
	}
	p, err := admin.ReassignPartition(ctx, topic, partition, replicas)
	if err != nil {
		return fmt.Errorf("reassign %s-%d: %w", topic, partition, err)
	}
	if !p.Reassigning() {
		fmt.Fprintf(env.Stdout, "%s-%d has replicas %s: nothing to copy\n", topic, partition, ids(p.Replicas))
		return nil
	}
	fmt.Fprintf(env.Stdout, "reassigning %s-%d to %s: adding %s, then dropping %s\n", topic, partition, ids(p.TargetReplicas), ids(p.AddingReplicas), ids(p.RemovingReplicas()))
	if *wf.noWait {
		return nil
	}
	err = wf.wait(ctx, env, func(ctx context.Context, w *moveWatcher) bool {
		t, err := w.meta.DescribeTopic(ctx, topic)
		if err != nil || int(partition) >= len(t.Partitions) {
			return false
		}
		p := t.Partitions[partition]
		if !p.Reassigning() {
			fmt.Fprintf(env.Stdout, "reassignment of %s-%d done: replicas %s, leader %d, ISR %s\n", topic, partition, ids(p.Replicas), p.Leader, ids(p.ISR))
			return true
		}
		w.progress(ctx, t, partition)
		return false
	})
	if err != nil {
		return fmt.Errorf("reassignment of %s-%d still in progress (it goes on; see topic describe): %w", topic, partition, err)
	}
	return nil
}

// nodeDecommission moves every replica off a node and waits until it holds
// none; nodeRecommission lifts the mark.
func nodeDecommission(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("node decommission", flag.ContinueOnError)
	wf := addWaitFlags(fs)
	id, err := nodeArg(fs, args)
	if err != nil {
		return err
	}
	r, err := env.frontendAdmin().DecommissionNode(ctx, id)
	if err != nil {
		return fmt.Errorf("decommission node %d: %w", id, err)
	}
	fmt.Fprintf(env.Stdout, "node %d decommissioned: no new replicas go there; %d partition(s) start moving, %d replica(s) still on it\n", id, len(r.Started), r.Replicas)
	for _, m := range r.Started {
		fmt.Fprintf(env.Stdout, "  %s-%d -> %s\n", m.Topic, m.Partition, ids(m.Replicas))
	}
	if *wf.noWait || r.Replicas == 0 {
		return nil
	}
	last := -1
	err = wf.wait(ctx, env, func(ctx context.Context, w *moveWatcher) bool {
		ts, err := w.meta.ListTopics(ctx)
		if err != nil {
			return false
		}
		held, moving := 0, 0
		for _, t := range ts {
			for _, p := range t.Partitions {
				if slices.Contains(p.Replicas, id) {
					held++
					if p.Reassigning() {
						moving++
					}
				}
			}
		}
		if held == 0 {
			fmt.Fprintf(env.Stdout, "node %d holds no replicas: it can be stopped\n", id)
			return true
		}
		if held != last {
			fmt.Fprintf(env.Stdout, "node %d still holds %d replica(s), %d moving\n", id, held, moving)
			last = held
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("node %d still holds replicas (the moves go on; see cluster status): %w", id, err)
	}
	return nil
}

func nodeRecommission(ctx context.Context, env Env, args []string) error {
	id, err := nodeArg(flag.NewFlagSet("node recommission", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	if err := env.frontendAdmin().RecommissionNode(ctx, id); err != nil {
		return fmt.Errorf("recommission node %d: %w", id, err)
	}
	fmt.Fprintf(env.Stdout, "node %d may take new replicas again\n", id)
	return nil
}

// moveWatcher reads the cluster while a command waits for a move, and
// prints each adding replica's catch-up when it changes.
type moveWatcher struct {
	env  Env
	meta *cluster.Client
	pool *storageclient.Pool
	seen map[string]string
}

func newMoveWatcher(env Env) *moveWatcher {
	return &moveWatcher{env: env, meta: env.metadataClient(), pool: env.storagePool(), seen: map[string]string{}}
}

func (w *moveWatcher) close() { w.pool.Close() }

// progress prints, for each replica partition p is adding, whether it is in
// sync or how far it lags, when that changed since the last call.
func (w *moveWatcher) progress(ctx context.Context, t *cluster.Topic, partition int32) {
	snap, err := w.meta.Snapshot(ctx)
	if err != nil {
		return
	}
	p := t.Partitions[partition]
	one := *t
	one.Partitions = []cluster.Partition{p}
	for _, r := range replicaStates(ctx, snap, w.pool, &one) {
		if !slices.Contains(p.AddingReplicas, r.Node) {
			continue
		}
		line := fmt.Sprintf("  replica on node %d: log end %d, lag %d, in sync %v", r.Node, r.LogEndOffset, r.Lag, r.InSync)
		key := fmt.Sprint(r.Node)
		if w.seen[key] != line {
			w.seen[key] = line
			fmt.Fprintln(w.env.Stdout, line)
		}
	}
}

// parseTopicPartition parses TOPIC/PARTITION.
func parseTopicPartition(s string) (string, int32, error) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return "", 0, fmt.Errorf("%w: %q is not TOPIC/PARTITION", errUsage, s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", 0, fmt.Errorf("%w: partition %q in %q is not a non-negative number", errUsage, s[i+1:], s)
	}
	return s[:i], int32(p), nil
}

// nodeArg parses the flags of a node command and its one argument, a node id.
func nodeArg(fs *flag.FlagSet, args []string) (int32, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return 0, err
	}
	if err := exactly(pos, 1, "a node id"); err != nil {
		return 0, err
	}
	return parseNodeID(pos[0])
}

func parseNodeID(s string) (int32, error) {
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("%w: node id %q is not a non-negative number", errUsage, s)
	}
	return int32(id), nil
}

// parseNodeIDs parses --replicas.
func parseNodeIDs(s string) ([]int32, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: partition reassign needs --replicas ID,ID,... (or --cancel)", errUsage)
	}
	var out []int32
	for _, f := range strings.Split(s, ",") {
		id, err := parseNodeID(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
