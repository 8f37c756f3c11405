package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// kvFlags collects repeated --config k=v.
type kvFlags map[string]string

func (k kvFlags) String() string { return fmt.Sprint(map[string]string(k)) }
func (k kvFlags) Set(s string) error {
	key, val, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("config %q is not key=value", s)
	}
	k[key] = val
	return nil
}

func topicCreate(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("topic create", flag.ContinueOnError)
	partitions := fs.Int("partitions", 1, "number of partitions")
	rf := fs.Int("replication-factor", 0, "replicas per partition (0: the cluster's default.replication.factor, at most the live storage nodes)")
	cfg := kvFlags{}
	fs.Var(cfg, "config", "topic config key=value (repeatable)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a topic name"); err != nil {
		return err
	}
	if *partitions < 1 {
		return fmt.Errorf("%w: --partitions must be at least 1", errUsage)
	}
	if *rf < 0 {
		return fmt.Errorf("%w: --replication-factor must be at least 1 (or 0 for the cluster's default)", errUsage)
	}
	t, err := env.frontendAdmin().CreateTopic(ctx, cluster.CreateTopicRequest{Name: pos[0], Partitions: *partitions, ReplicationFactor: *rf, Config: cfg})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "created topic %s with %d partition(s), replication factor %d\n", t.Name, len(t.Partitions), t.ReplicationFactor)
	return nil
}

func topicList(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("topic list", args, 0, "no arguments")
	if err != nil {
		return err
	}
	topics, err := env.metadataClient().ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	if o == "json" {
		if topics == nil {
			topics = []cluster.Topic{}
		}
		return writeJSON(env, topics)
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITIONS\tREPLICATION")
	for _, t := range topics {
		fmt.Fprintf(w, "%s\t%d\t%d\n", t.Name, len(t.Partitions), t.ReplicationFactor)
	}
	return w.Flush()
}

func topicDescribe(ctx context.Context, env Env, args []string) error {
	pos, o, err := parseOutputCommand("topic describe", args, 1, "a topic name")
	if err != nil {
		return err
	}
	t, err := env.metadataClient().DescribeTopic(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("describe topic %s: %w", pos[0], err)
	}
	// One metadata view and one connection pool serve both look-ups.
	meta := client.NewMetadata(env.metadataClient())
	pool := env.storagePool()
	defer pool.Close()
	hws := highWatermarks(ctx, meta, pool, t)
	replicas := []replicaState{}
	if snap, err := meta.Refresh(ctx); err == nil {
		replicas = replicaStates(ctx, snap, pool, t)
	}
	if o == "json" {
		out := describedTopic{Topic: *t, Replicas: replicas}
		for i := range t.Partitions {
			out.HighWatermarks = append(out.HighWatermarks, hws[i])
		}
		return writeJSON(env, out)
	}
	minISR := "-"
	if snap, err := meta.Refresh(ctx); err == nil {
		if cfg, err := snap.TopicConfig(t); err == nil {
			minISR = strconv.Itoa(cfg.MinInsyncReplicas)
		}
	}
	fmt.Fprintf(env.Stdout, "Topic: %s  Partitions: %d  ReplicationFactor: %d  MinInsyncReplicas: %s\n", t.Name, len(t.Partitions), t.ReplicationFactor, minISR)
	if len(t.Config) > 0 {
		keys := make([]string, 0, len(t.Config))
		for k := range t.Config {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(env.Stdout, "  config %s=%s\n", k, t.Config[k])
		}
	}
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tHIGH-WATERMARK\tMOVING-TO")
	for i, p := range t.Partitions {
		hw, moving := "-", "-"
		if hws[i] >= 0 {
			hw = fmt.Sprint(hws[i])
		}
		if p.Reassigning() {
			moving = fmt.Sprintf("%s (adding %s)", ids(p.TargetReplicas), ids(p.AddingReplicas))
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\t%s\n", p.ID, p.Leader, p.LeaderEpoch, ids(p.Replicas), ids(p.ISR), hw, moving)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout)
	w = tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tNODE\tROLE\tIN-SYNC\tLOG-START\tLOG-END\tHIGH-WATERMARK\tLAG\tCLEANABLE-BYTES\tFIRST-DIRTY")
	for _, r := range replicas {
		role, lag, cleanable, dirty := "follower", "-", "-", "-"
		if r.Leader {
			role = "leader"
		}
		if r.Lag >= 0 {
			lag = fmt.Sprint(r.Lag)
		}
		if r.CleanableBytes >= 0 {
			cleanable, dirty = fmt.Sprint(r.CleanableBytes), fmt.Sprint(r.FirstDirtyOffset)
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%v\t%d\t%d\t%d\t%s\t%s\t%s\n", r.Partition, r.Node, role, r.InSync, r.LogStartOffset, r.LogEndOffset, r.HighWatermark, lag, cleanable, dirty)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return printTiers(env, t, replicas)
}

// printTiers shows, for a topic with remote storage, each partition's
// local log (at its leader) beside its remote log.
func printTiers(env Env, t *cluster.Topic, replicas []replicaState) error {
	if t.Config[cluster.ConfigRemoteStorageEnable] != "true" {
		return nil
	}
	fmt.Fprintln(env.Stdout)
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tLOCAL-START\tLOCAL-END\tLOCAL-BYTES\tREMOTE-START\tREMOTE-END\tREMOTE-BYTES\tREMOTE-SEGMENTS")
	for _, p := range t.Partitions {
		local := "-\t-\t-"
		for _, r := range replicas {
			if r.Partition == p.ID && r.Leader {
				local = fmt.Sprintf("%d\t%d\t%d", r.LogStartOffset, r.LogEndOffset, r.SizeBytes)
			}
		}
		remote := "-\t-\t0\t0"
		if rs := p.Remote; rs != nil && rs.Segments > 0 {
			remote = fmt.Sprintf("%d\t%d\t%d\t%d", rs.Start, rs.End, rs.Bytes, rs.Segments)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\n", p.ID, local, remote)
	}
	return w.Flush()
}

func topicDelete(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("topic delete", flag.ContinueOnError)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a topic name"); err != nil {
		return err
	}
	if err := env.frontendAdmin().DeleteTopic(ctx, pos[0]); err != nil {
		return fmt.Errorf("delete topic %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "deleted topic %s\n", pos[0])
	return nil
}

// listFlag collects a repeatable flag's values.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// topicAlter changes a topic's configuration; storage nodes apply it live.
func topicAlter(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("topic alter", flag.ContinueOnError)
	set := kvFlags{}
	var del listFlag
	fs.Var(set, "config", "topic config key=value to set (repeatable)")
	fs.Var(&del, "delete-config", "topic config key to return to its default (repeatable)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a topic name"); err != nil {
		return err
	}
	if len(set) == 0 && len(del) == 0 {
		return fmt.Errorf("%w: topic alter needs --config k=v or --delete-config k", errUsage)
	}
	t, err := env.frontendAdmin().AlterTopicConfig(ctx, pos[0], cluster.AlterTopicConfigRequest{Set: set, Delete: del})
	if err != nil {
		return fmt.Errorf("alter topic %s: %w", pos[0], err)
	}
	keys := make([]string, 0, len(t.Config))
	for k := range t.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(env.Stdout, "altered topic %s; its config is now:\n", t.Name)
	for _, k := range keys {
		fmt.Fprintf(env.Stdout, "  %s=%s\n", k, t.Config[k])
	}
	return nil
}

// topicAddPartitions grows a topic; keyed records may map to other
// partitions afterwards, which it says before it asks.
func topicAddPartitions(ctx context.Context, env Env, args []string) error {
	fs := flag.NewFlagSet("topic add-partitions", flag.ContinueOnError)
	total := fs.Int("partitions", 0, "the new partition count (larger than the current one)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, 1, "a topic name"); err != nil {
		return err
	}
	if *total < 1 {
		return fmt.Errorf("%w: topic add-partitions needs --partitions N, the new total", errUsage)
	}
	fmt.Fprintf(env.Stderr, "warning: keys of %s hash over the new partition count from now on: records of one key may land on another partition than before, so per-key order across the change is not kept\n", pos[0])
	t, err := env.frontendAdmin().AddPartitions(ctx, pos[0], cluster.AddPartitionsRequest{Partitions: *total})
	if err != nil {
		return fmt.Errorf("add partitions to %s: %w", pos[0], err)
	}
	fmt.Fprintf(env.Stdout, "topic %s now has %d partitions\n", t.Name, len(t.Partitions))
	return nil
}

func ids(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func writeJSON(env Env, v any) error {
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// describedTopic is `topic describe -o json`: the topic as metadata holds it
// plus each partition's high watermark from its leader (-1 when unreachable).
type describedTopic struct {
	cluster.Topic
	HighWatermarks []int64 `json:"high_watermarks"`
	// Replicas is every replica's state as its node reports it (a node
	// that does not answer is left out).
	Replicas []replicaState `json:"replicas"`
}

// replicaState is one replica of a partition as sluicectl shows it.
type replicaState struct {
	Partition      int32 `json:"partition"`
	Node           int32 `json:"node"`
	Leader         bool  `json:"leader"`
	InSync         bool  `json:"in_sync"`
	LogStartOffset int64 `json:"log_start_offset"`
	LogEndOffset   int64 `json:"log_end_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	// SizeBytes is the replica's log on the node's disk (-1: not told).
	SizeBytes int64 `json:"size_bytes"`
	// Lag is the leader's log end minus this replica's (0 for the leader,
	// -1 when the leader did not answer).
	Lag int64 `json:"lag"`
	// CleanableBytes and FirstDirtyOffset describe a compacted replica's
	// cleaner: the bytes of closed segments not yet cleaned and the offset
	// below which every record was cleaned (-1 when not compacted).
	CleanableBytes   int64 `json:"cleanable_bytes"`
	FirstDirtyOffset int64 `json:"first_dirty_offset"`
}

// replicaStates asks every node of snap holding a replica of t for its
// replicas' state (DescribeReplicas) and lists them by partition and node.
func replicaStates(ctx context.Context, snap *cluster.Snapshot, pool *storageclient.Pool, t *cluster.Topic) []replicaState {
	type key struct{ partition, node int32 }
	got := map[key]protocol.ReplicaInfo{}
	nodes := map[int32]bool{}
	for _, p := range t.Partitions {
		for _, id := range p.Replicas {
			nodes[id] = true
		}
	}
	for id := range nodes {
		n, ok := snap.Node(id)
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var resp protocol.DescribeReplicasResponse
		if c, err := pool.Get(cctx, n.ClientAddr()); err == nil {
			if _, err := c.Call(cctx, protocol.APIDescribeReplicas, &protocol.DescribeReplicasRequest{Topic: t.Name}, nil, &resp); err == nil {
				for _, r := range resp.Replicas {
					got[key{r.Partition, id}] = r
				}
			}
		}
		cancel()
	}
	out := []replicaState{}
	for _, p := range t.Partitions {
		leader, leaderOK := got[key{p.ID, p.Leader}]
		for _, id := range p.Replicas {
			r, ok := got[key{p.ID, id}]
			if !ok {
				continue
			}
			lag := int64(-1)
			if leaderOK {
				lag = max(leader.LogEndOffset-r.LogEndOffset, 0)
			}
			out = append(out, replicaState{Partition: p.ID, Node: id, Leader: id == p.Leader, InSync: slices.Contains(p.ISR, id),
				LogStartOffset: r.LogStartOffset, LogEndOffset: r.LogEndOffset, HighWatermark: r.HighWatermark, SizeBytes: r.SizeBytes, Lag: lag,
				CleanableBytes: r.CleanableBytes, FirstDirtyOffset: r.FirstDirtyOffset})
		}
	}
	return out
}

// highWatermarks asks each partition's leader for its high watermark; -1 for a
// partition whose leader does not answer.
func highWatermarks(ctx context.Context, meta *client.Metadata, pool *storageclient.Pool, t *cluster.Topic) []int64 {
	out := make([]int64, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = -1
		if p.Leader < 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if hw, err := client.ListOffset(cctx, meta, pool, t.Name, p.ID, protocol.TimestampLatest); err == nil {
			out[i] = hw
		}
		cancel()
	}
	return out
}
