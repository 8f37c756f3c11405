package fsm

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/sluicemq/sluice/libs/cluster"
)

// snapshotFormat is bumped when the snapshot's JSON changes incompatibly.
const snapshotFormat = 1

// snapshotData is the JSON written to a raft snapshot: the whole state.
type snapshotData struct {
	Format    int             `json:"format"`
	ClusterID string          `json:"cluster_id"`
	Version   uint64          `json:"version"`
	Nodes     []cluster.Node  `json:"nodes"`
	Topics    []cluster.Topic `json:"topics"`
	// ShuttingDown lists the nodes in controlled shutdown, by id. Added
	// without a format change: older snapshots simply have none.
	ShuttingDown []int32 `json:"shutting_down,omitempty"`
	// NextProducerID is the producer id counter. Added without a format
	// change: absent (older snapshots) means FirstProducerID.
	NextProducerID int64 `json:"next_producer_id,omitempty"`
	// Quotas are the client quotas. Added without a format change: older
	// snapshots have none.
	Quotas []cluster.Quota `json:"quotas,omitempty"`
	// Principals and ACLs: added without a format change (older snapshots
	// have none).
	Principals []cluster.Principal `json:"principals,omitempty"`
	ACLs       []cluster.ACL       `json:"acls,omitempty"`
	// Frontends and Config (the cluster-wide settings): added without a
	// format change (older snapshots have none).
	Frontends []cluster.Frontend `json:"frontends,omitempty"`
	Config    map[string]string  `json:"config,omitempty"`
	// RemoteLogs (by topic and partition, only those with segments) and
	// RemoteGarbage: added without a format change (older snapshots have
	// none). The partitions' Remote summaries are derived from RemoteLogs
	// when restoring.
	RemoteLogs    []cluster.RemoteLog `json:"remote_logs,omitempty"`
	RemoteGarbage []cluster.RemoteLog `json:"remote_garbage,omitempty"`
}

// fsmSnapshot holds the encoded state taken at Snapshot time.
type fsmSnapshot struct{ data []byte }

// Snapshot captures the state. Raft calls it on the FSM goroutine, so the
// state cannot change meanwhile; the copy is encoded here and written later by
// Persist on another goroutine. The metadata state is small (kilobytes to a few
// megabytes), so encoding eagerly is simpler than a copy-on-write structure.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	d := snapshotData{
		Format:    snapshotFormat,
		ClusterID: f.st.clusterID,
		Version:   f.st.version,
		Nodes:     f.st.sortedNodes(),
		Topics:    f.st.sortedTopics(),
		// Always above zero, so omitempty never drops it.
		NextProducerID: f.st.nextProducerID,
		Quotas:         f.st.sortedQuotas(),
		Principals:     f.st.sortedPrincipals(),
		ACLs:           f.st.sortedACLs(),
		Frontends:      f.st.sortedFrontends(),
		Config:         maps.Clone(f.st.config),
		RemoteLogs:     remoteLogs(f.st.remote, f.st.remoteStart),
		RemoteGarbage:  remoteLogs(f.st.remoteGarbage, nil),
	}
	for id := range f.st.shuttingDown {
		d.ShuttingDown = append(d.ShuttingDown, id)
	}
	f.mu.RUnlock()
	slices.Sort(d.ShuttingDown)
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("fsm snapshot: %w", err)
	}
	return &fsmSnapshot{data: b}, nil
}

// Persist writes the snapshot to sink and closes it (cancels it on error).
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm snapshot persist: %w", err)
	}
	return sink.Close()
}

// Release frees nothing: the bytes are garbage collected.
func (s *fsmSnapshot) Release() {}

// Restore replaces the state with a snapshot's. Raft calls it on the FSM
// goroutine with no concurrent Apply. Watchers are woken.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var d snapshotData
	if err := json.NewDecoder(rc).Decode(&d); err != nil {
		return fmt.Errorf("fsm restore: %w: %w", ErrCorruptSnapshot, err)
	}
	if d.Format != snapshotFormat {
		return fmt.Errorf("fsm restore: %w: snapshot format %d, want %d", ErrCorruptSnapshot, d.Format, snapshotFormat)
	}
	st := newState()
	switch {
	case d.NextProducerID == 0: // written before producer ids existed
	case d.NextProducerID < FirstProducerID:
		return fmt.Errorf("fsm restore: %w: next producer id %d is below %d", ErrCorruptSnapshot, d.NextProducerID, FirstProducerID)
	default:
		st.nextProducerID = d.NextProducerID
	}
	st.clusterID = d.ClusterID
	st.version = d.Version
	for i := range d.Nodes {
		n := d.Nodes[i]
		st.nodes[n.ID] = &n
	}
	for i := range d.Topics {
		t := copyTopic(&d.Topics[i])
		st.topics[t.Name] = &t
	}
	for _, id := range d.ShuttingDown {
		st.shuttingDown[id] = true
	}
	for _, q := range d.Quotas {
		st.quotas[q.ClientID] = q
	}
	for _, p := range d.Principals {
		st.principals[p.Name] = p
	}
	for _, a := range d.ACLs {
		st.acls[a] = true
	}
	for i := range d.Frontends {
		fe := d.Frontends[i]
		st.frontends[fe.ID] = &fe
	}
	if len(d.Config) > 0 {
		st.config = d.Config
	}
	if err := restoreRemote(&st, d.RemoteLogs, d.RemoteGarbage); err != nil {
		return fmt.Errorf("fsm restore: %w", err)
	}
	f.mu.Lock()
	f.st = st
	f.notifyLocked()
	f.mu.Unlock()
	return nil
}
