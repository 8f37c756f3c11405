package ctl

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/sluicemq/sluice/libs/cluster"
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
}

func clusterStatus(ctx context.Context, env Env, args []string) error {
	_, o, err := parseOutputCommand("cluster status", args, 0, "no arguments")
	if err != nil {
		return err
	}
	snap, err := cluster.NewClient(addrs(env.Metadata)).Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("cluster status: %w", err)
	}
	st := Status{ClusterID: snap.ClusterID, Version: snap.Version, MetadataLeader: snap.Leader, Nodes: snap.Nodes, Topics: len(snap.Topics)}
	alive := map[int32]bool{}
	for _, n := range snap.Nodes {
		alive[n.ID] = n.Alive
	}
	for _, t := range snap.Topics {
		for _, p := range t.Partitions {
			st.Partitions++
			if p.Leader < 0 || !alive[p.Leader] {
				st.OfflinePartitions++
			}
			if len(p.ISR) < len(p.Replicas) {
				st.UnderReplicated++
			}
		}
	}
	if st.Nodes == nil {
		st.Nodes = []cluster.Node{}
	}
	if o == "json" {
		return writeJSON(env, st)
	}
	fmt.Fprintf(env.Stdout, "cluster %s  metadata version %d  controller (metadata leader) %s\n", st.ClusterID, st.Version, st.MetadataLeader)
	fmt.Fprintf(env.Stdout, "topics %d  partitions %d  under-replicated %d  offline %d\n\n", st.Topics, st.Partitions, st.UnderReplicated, st.OfflinePartitions)
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tADDRESS\tADVERTISED\tRACK\tSTATE")
	for _, n := range st.Nodes {
		state := "alive"
		if !n.Alive {
			state = "dead"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", n.ID, n.Addr, n.AdvertisedAddr, n.Rack, state)
	}
	return w.Flush()
}
