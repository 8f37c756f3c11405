package fakecluster

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Metadata is a fake metadata service on 127.0.0.1. It is safe for concurrent
// use.
type Metadata struct {
	srv *httptest.Server

	mu        sync.Mutex
	snap      cluster.Snapshot // guarded by mu
	changed   chan struct{}    // closed and replaced on every change; guarded by mu
	snapshots int              // GET /v1/cluster answered without since; guarded by mu
	down      bool             // answer 503 to everything; guarded by mu
	producers int64            // producer ids handed out; guarded by mu

	lagging     *cluster.Snapshot // served to watches when set (a member behind); guarded by mu
	consistents int               // linearizable reads answered; guarded by mu
	watches     int               // watches (GET /v1/cluster?since=) received; guarded by mu
	epoch       int64             // the last registration epoch handed out; guarded by mu
	registers   int               // registrations; guarded by mu
	fenceNext   bool              // answer the next heartbeat STALE_BROKER_EPOCH; guarded by mu
}

// NewMetadata starts a fake metadata service with the given storage nodes.
// Close it when done.
func NewMetadata(nodes ...cluster.Node) *Metadata {
	m := &Metadata{changed: make(chan struct{})}
	m.snap = cluster.Snapshot{Version: 1, ClusterID: "fake", Nodes: nodes}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// URL returns the service's base URL.
func (m *Metadata) URL() string { return m.srv.URL }

// Close stops the server.
func (m *Metadata) Close() {
	m.srv.CloseClientConnections()
	m.srv.Close()
}

// Update changes the model under the lock and publishes a new version.
func (m *Metadata) Update(f func(s *cluster.Snapshot)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.snap)
	m.bumpLocked()
}

func (m *Metadata) bumpLocked() {
	m.snap.Version++
	close(m.changed)
	m.changed = make(chan struct{})
}

// AddTopic creates a topic whose partition p is led by leaders[p] (-1: none).
func (m *Metadata) AddTopic(name string, leaders ...int32) {
	m.Update(func(s *cluster.Snapshot) {
		t := cluster.Topic{Name: name, ReplicationFactor: 1, Config: map[string]string{}}
		for p, l := range leaders {
			t.Partitions = append(t.Partitions, cluster.Partition{ID: int32(p), Replicas: []int32{l}, Leader: l, ISR: []int32{l}})
		}
		s.Topics = append(s.Topics, t)
		s.SortStable()
	})
}

// SetLeader moves a partition's leadership.
func (m *Metadata) SetLeader(topic string, partition, leader int32) {
	m.Update(func(s *cluster.Snapshot) {
		if t, ok := s.Topic(topic); ok {
			t.Partitions[partition].Leader = leader
			t.Partitions[partition].LeaderEpoch++
		}
	})
}

// SetDown makes every request fail with 503 (or work again).
func (m *Metadata) SetDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

// Snapshots returns how many GET /v1/cluster requests without since (plain
// or linearizable) were answered.
func (m *Metadata) Snapshots() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snapshots
}

// SetLagging makes watches and plain reads of the cluster answer s, as a
// member behind the leader would (after a short pause, in place of the long
// poll), while linearizable reads (?consistent=true) answer the current
// model; nil ends it. Registered nodes are in both.
func (m *Metadata) SetLagging(s *cluster.Snapshot) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lagging = s
}

// ConsistentReads returns how many linearizable reads of the cluster were
// answered.
func (m *Metadata) ConsistentReads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.consistents
}

// Watches returns how many watches (GET /v1/cluster?since=, lagging or
// not) were received: a watcher that polls one after the other has handled
// the answers of all but the last.
func (m *Metadata) Watches() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.watches
}

// Registrations returns how many storage node registrations were answered.
func (m *Metadata) Registrations() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.registers
}

// FenceNextHeartbeat answers the next node heartbeat STALE_BROKER_EPOCH, as
// metadata does to a node it fenced.
func (m *Metadata) FenceNextHeartbeat() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fenceNext = true
}

// Version returns the current version.
func (m *Metadata) Version() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snap.Version
}

// current returns a deep-enough copy of the snapshot (the JSON encoding
// happens outside the lock).
func (m *Metadata) currentLocked() cluster.Snapshot {
	b, _ := json.Marshal(m.snap)
	var s cluster.Snapshot
	_ = json.Unmarshal(b, &s)
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code protocol.Code, msg string) {
	writeJSON(w, status, cluster.ErrorBody{ErrorCode: int16(code), Error: msg})
}

func (m *Metadata) serve(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	down := m.down
	m.mu.Unlock()
	if down {
		writeErr(w, http.StatusServiceUnavailable, protocol.NotController, "fake metadata is down")
		return
	}
	switch {
	case r.URL.Path == "/v1/cluster" && r.Method == http.MethodGet:
		m.cluster(w, r)
	case r.URL.Path == "/v1/topics" && r.Method == http.MethodGet:
		m.mu.Lock()
		s := m.currentLocked()
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"topics": s.Topics})
	case r.URL.Path == "/v1/topics" && r.Method == http.MethodPost:
		m.create(w, r)
	case r.URL.Path == "/v1/nodes/register" && r.Method == http.MethodPost:
		m.register(w, r)
	case r.URL.Path == "/v1/nodes/heartbeat" && r.Method == http.MethodPost:
		m.mu.Lock()
		fenced := m.fenceNext
		m.fenceNext = false
		m.mu.Unlock()
		if fenced {
			writeErr(w, http.StatusConflict, protocol.StaleBrokerEpoch, "fenced: register again")
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	case r.URL.Path == "/v1/producers" && r.Method == http.MethodPost:
		m.mu.Lock()
		m.producers++
		id := 1000 + m.producers
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, cluster.InitProducerIDResponse{ProducerID: id, ProducerEpoch: 0})
	case strings.HasPrefix(r.URL.Path, "/v1/topics/"):
		m.topic(w, r, strings.TrimPrefix(r.URL.Path, "/v1/topics/"))
	default:
		writeErr(w, http.StatusNotFound, protocol.InvalidRequest, "no route")
	}
}

// register gives a storage node a new epoch (10 more than the last) and
// lists it alive.
func (m *Metadata) register(w http.ResponseWriter, r *http.Request) {
	var req cluster.RegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, protocol.InvalidRequest, err.Error())
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.registers++
	m.epoch += 10
	node := cluster.Node{ID: req.ID, Addr: req.Addr, Epoch: m.epoch, Alive: true}
	nodes := m.snap.Nodes[:0]
	for _, n := range m.snap.Nodes {
		if n.ID != req.ID {
			nodes = append(nodes, n)
		}
	}
	m.snap.Nodes = append(nodes, node)
	m.bumpLocked()
	writeJSON(w, http.StatusOK, cluster.RegisterResponse{Epoch: m.epoch})
}

// laggingPause stands for the long poll of a member behind the leader.
const laggingPause = 20 * time.Millisecond

func (m *Metadata) cluster(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("consistent") == "true" {
		m.mu.Lock()
		m.consistents++
		m.snapshots++
		s := m.currentLocked()
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, s)
		return
	}
	m.mu.Lock()
	if q.Has("since") {
		m.watches++
	}
	lagging := m.lagging != nil
	var behind cluster.Snapshot
	if lagging {
		behind = *m.lagging
		behind.Nodes = m.currentLocked().Nodes
	}
	m.mu.Unlock()
	if lagging {
		time.Sleep(laggingPause)
		writeJSON(w, http.StatusOK, behind)
		return
	}
	if !q.Has("since") {
		m.mu.Lock()
		m.snapshots++
		s := m.currentLocked()
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, s)
		return
	}
	since, _ := strconv.ParseUint(q.Get("since"), 10, 64)
	waitMs, _ := strconv.ParseInt(q.Get("wait_ms"), 10, 64)
	deadline := time.NewTimer(time.Duration(waitMs) * time.Millisecond)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		s, ch := m.currentLocked(), m.changed
		m.mu.Unlock()
		if s.Version > since {
			writeJSON(w, http.StatusOK, s)
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			writeJSON(w, http.StatusOK, s)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (m *Metadata) create(w http.ResponseWriter, r *http.Request) {
	var req cluster.CreateTopicRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, protocol.InvalidRequest, err.Error())
		return
	}
	if err := cluster.ValidateTopicName(req.Name); err != nil {
		writeErr(w, http.StatusBadRequest, protocol.InvalidTopic, err.Error())
		return
	}
	if req.Partitions < 1 {
		writeErr(w, http.StatusBadRequest, protocol.InvalidPartitions, "partitions must be at least 1")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.snap.Topic(req.Name); ok {
		writeErr(w, http.StatusConflict, protocol.TopicAlreadyExists, "topic "+req.Name+" exists")
		return
	}
	t := cluster.Topic{Name: req.Name, ReplicationFactor: req.ReplicationFactor, Config: req.Config}
	for p := 0; p < req.Partitions; p++ {
		leader := int32(-1)
		if n := len(m.snap.Nodes); n > 0 {
			leader = m.snap.Nodes[p%n].ID
		}
		t.Partitions = append(t.Partitions, cluster.Partition{ID: int32(p), Replicas: []int32{leader}, Leader: leader, ISR: []int32{leader}})
	}
	m.snap.Topics = append(m.snap.Topics, t)
	m.snap.SortStable()
	m.bumpLocked()
	writeJSON(w, http.StatusCreated, t)
}

func (m *Metadata) topic(w http.ResponseWriter, r *http.Request, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.snap.Topic(name)
	if !ok {
		writeErr(w, http.StatusNotFound, protocol.UnknownTopicOrPartition, "unknown topic "+name)
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, t)
	case http.MethodDelete:
		kept := m.snap.Topics[:0]
		for _, x := range m.snap.Topics {
			if x.Name != name {
				kept = append(kept, x)
			}
		}
		m.snap.Topics = kept
		m.bumpLocked()
		writeJSON(w, http.StatusOK, struct{}{})
	default:
		writeErr(w, http.StatusMethodNotAllowed, protocol.InvalidRequest, "method")
	}
}
