package ctl

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// Status is `cluster status -o json`.
type Status struct {
	ClusterID         string         `json:"cluster_id"`
	Version           uint64         `json:"version"`
	MetadataLeader    string         `json:"metadata_leader,omitempty"`
	Nodes             []cluster.Node `json:"nodes"`
	Topics            int            `json:"topics"`
	Partitions        int            `json:"partitions"`
	OfflinePartitions int            `json:"offline_partitions"`
	// UnderReplicated counts partitions whose ISR is smaller than their replicas.
	UnderReplicated int `json:"under_replicated_partitions"`
	// Load is each node's share: replicas, leaderships, replicas out of the ISR.
	Load []NodeLoad `json:"load"`
	// Lagging lists the replicas of the under-replicated partitions as their
	// nodes report them (log range, high watermark, lag behind the leader).
	Lagging []LaggingReplica `json:"lagging"`
}

// NodeLoad is one storage node's share of the partitions.
type NodeLoad struct {
	Node      int32 `json:"node"`
	Replicas  int   `json:"replicas"`
	Leaders   int   `json:"leaders"`
	OutOfSync int   `json:"out_of_sync"`
}

// LaggingReplica is a replica of an under-replicated partition.
type LaggingReplica struct {
	Topic string `json:"topic"`
	replicaState
}

func clusterStatus(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("cluster status", args, 0, "no arguments")
	if err != nil {
		return err
	}
	snap, err := env.metadataClient().Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("cluster status: %w", err)
	}
	st, under := statusOf(snap)
	st.Lagging = []LaggingReplica{}
	if len(under) > 0 {
		pool := env.storagePool()
		defer pool.Close()
		st.Lagging = laggingReplicas(ctx, snap, pool, under)
	}
	if o == "json" {
		return writeJSON(env, st)
	}
	return printStatus(env, st)
}

// statusOf counts the snapshot's partitions and each node's load, and
// returns the under-replicated partitions of each topic.
func statusOf(snap *cluster.Snapshot) (Status, map[string]map[int32]bool) {
	st := Status{ClusterID: snap.ClusterID, Version: snap.Version, MetadataLeader: snap.Leader, Nodes: snap.Nodes, Topics: len(snap.Topics),
		Load: []NodeLoad{}}
	if st.Nodes == nil {
		st.Nodes = []cluster.Node{}
	}
	alive, load := map[int32]bool{}, map[int32]*NodeLoad{}
	for _, n := range snap.Nodes {
		alive[n.ID], load[n.ID] = n.Alive, &NodeLoad{Node: n.ID}
	}
	under := map[string]map[int32]bool{}
	for _, t := range snap.Topics {
		for _, p := range t.Partitions {
			st.Partitions++
			if p.Leader < 0 || !alive[p.Leader] {
				st.OfflinePartitions++
			}
			if p.UnderReplicated() {
				st.UnderReplicated++
				if under[t.Name] == nil {
					under[t.Name] = map[int32]bool{}
				}
				under[t.Name][p.ID] = true
			}
			for _, id := range p.Replicas {
				if l := load[id]; l != nil {
					l.Replicas++
					if id == p.Leader {
						l.Leaders++
					}
					if !slices.Contains(p.ISR, id) {
						l.OutOfSync++
					}
				}
			}
		}
	}
	for _, n := range snap.Nodes {
		st.Load = append(st.Load, *load[n.ID])
	}
	return st, under
}

// laggingReplicas asks the replicas of the under-replicated partitions
// where they stand.
func laggingReplicas(ctx context.Context, snap *cluster.Snapshot, pool *storageclient.Pool, under map[string]map[int32]bool) []LaggingReplica {
	out := []LaggingReplica{}
	for _, t := range snap.Topics {
		if len(under[t.Name]) == 0 {
			continue
		}
		for _, r := range replicaStates(ctx, snap, pool, &t) {
			if under[t.Name][r.Partition] {
				out = append(out, LaggingReplica{Topic: t.Name, replicaState: r})
			}
		}
	}
	return out
}

// printStatus writes the status as tables.
func printStatus(env Env, st Status) error {
	fmt.Fprintf(env.Stdout, "cluster %s  metadata version %d  controller (metadata leader) %s\n", st.ClusterID, st.Version, st.MetadataLeader)
	fmt.Fprintf(env.Stdout, "topics %d  partitions %d  under-replicated %d  offline %d\n\n", st.Topics, st.Partitions, st.UnderReplicated, st.OfflinePartitions)
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tADDRESS\tADVERTISED\tRACK\tSTATE\tREPLICAS\tLEADERS\tOUT-OF-SYNC")
	for i, n := range st.Nodes {
		state := "alive"
		if !n.Alive {
			state = "dead"
		}
		if n.Decommissioned {
			state += ",decommissioned"
		}
		l := st.Load[i]
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.ID, n.Addr, n.AdvertisedAddr, n.Rack, state, l.Replicas, l.Leaders, l.OutOfSync)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(st.Lagging) == 0 {
		return nil
	}
	fmt.Fprintln(env.Stdout, "\nunder-replicated partitions, replica by replica:")
	w = tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tNODE\tROLE\tIN-SYNC\tLOG-END\tHIGH-WATERMARK\tLAG")
	for _, r := range st.Lagging {
		role, lag := "follower", "-"
		if r.Leader {
			role = "leader"
		}
		if r.Lag >= 0 {
			lag = fmt.Sprint(r.Lag)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%v\t%d\t%d\t%s\n", r.Topic, r.Partition, r.Node, role, r.InSync, r.LogEndOffset, r.HighWatermark, lag)
	}
	return w.Flush()
}
