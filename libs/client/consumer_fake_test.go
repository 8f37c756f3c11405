package client

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// This file holds in-process fakes of the three services a Consumer talks
// to, so its goroutines run for real (on real sockets) without a cluster:
// a metadata snapshot over HTTP, one storage node speaking the storage
// protocol (fetch and list-offsets over in-memory logs), and a scriptable
// group coordinator (the test decides each member's assignment).

// fakeTopicID is the incarnation of topic "t" the fake metadata serves.
const fakeTopicID = "t-incarnation-2"

// fakeCluster ties the fakes together.
type fakeCluster struct {
	t       *testing.T
	storage *fakeStorage
	coord   *fakeCoordinator
	metaURL string
}

// newFakeCluster serves topic "t" with the given number of partitions.
func newFakeCluster(t *testing.T, partitions int) *fakeCluster {
	t.Helper()
	st := newFakeStorage(t, partitions)
	snap := cluster.Snapshot{Version: 1, ClusterID: "fake",
		Nodes: []cluster.Node{{ID: 1, Addr: st.addr, Alive: true}}}
	top := cluster.Topic{Name: "t", ID: fakeTopicID, ReplicationFactor: 1}
	for p := range partitions {
		top.Partitions = append(top.Partitions, cluster.Partition{ID: int32(p), Replicas: []int32{1}, Leader: 1, ISR: []int32{1}})
	}
	snap.Topics = []cluster.Topic{top}
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(snap)
	}))
	t.Cleanup(meta.Close)
	return &fakeCluster{t: t, storage: st, coord: newFakeCoordinator(t), metaURL: meta.URL}
}

// config returns a consumer config pointed at the fakes, with short timers.
func (fc *fakeCluster) config() ConsumerConfig {
	cfg := DefaultConsumerConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(testLogWriter{fc.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Metadata = []string{fc.metaURL}
	cfg.Offsets = []string{fc.coord.url}
	cfg.Group = "g"
	cfg.Topics = []string{"t"}
	cfg.AutoOffsetReset = OffsetResetEarliest
	cfg.FetchMaxWait = 20 * time.Millisecond
	cfg.SessionTimeout = 2 * time.Second
	cfg.AutoCommitInterval = time.Hour
	return cfg
}

// fakeStorage is one storage node leading every partition of topic "t".
type fakeStorage struct {
	addr string

	mu   sync.Mutex
	logs [][]record.Record // per partition, offsets from 0
	// logStart per partition: offsets below it are "deleted by retention".
	logStart []int64
}

func newFakeStorage(t *testing.T, partitions int) *fakeStorage {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeStorage{addr: ln.Addr().String(), logs: make([][]record.Record, partitions), logStart: make([]int64, partitions)}
	var wg sync.WaitGroup
	var connsMu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns = append(conns, nc)
			connsMu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(nc) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	return s
}

// append adds n records with values "p<partition>-<offset>".
func (s *fakeStorage) append(partition int32, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		off := int64(len(s.logs[partition]))
		s.logs[partition] = append(s.logs[partition], record.Record{Offset: off, Timestamp: 1000 + off,
			Value: fmt.Appendf(nil, "p%d-%d", partition, off)})
	}
}

// serve answers one connection; each request is handled on its own
// goroutine so a long-polling fetch does not hold up the others.
func (s *fakeStorage) serve(nc net.Conn) {
	defer nc.Close()
	var wmu sync.Mutex
	enc := protocol.NewEncoder()
	respond := func(h protocol.ResponseHeader, body protocol.Body, payload []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		prefix, err := enc.Response(&h, body, len(payload))
		if err == nil {
			_, _ = (&net.Buffers{prefix, payload}).WriteTo(nc)
		}
	}
	fr := protocol.NewFrameReader(nc, 0)
	dec := protocol.NewDecoder()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		frame, err := fr.Next()
		if err != nil {
			return
		}
		var h protocol.RequestHeader
		if dec.Request(frame, &h) != nil {
			return
		}
		switch h.APIKey {
		case protocol.APIFetch:
			var req protocol.FetchRequest
			if dec.Body(&req) != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); respond(s.fetch(h.CorrelationID, &req)) }()
		case protocol.APIListOffsets:
			var req protocol.ListOffsetsRequest
			if dec.Body(&req) != nil {
				return
			}
			respond(s.listOffsets(h.CorrelationID, &req))
		default:
			respond(protocol.ResponseHeader{CorrelationID: h.CorrelationID, ErrorCode: protocol.UnknownAPI}, nil, nil)
		}
	}
}

func (s *fakeStorage) listOffsets(id uint32, req *protocol.ListOffsetsRequest) (protocol.ResponseHeader, protocol.Body, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := int64(len(s.logs[req.Partition]))
	if req.Timestamp == protocol.TimestampEarliest {
		off = s.logStart[req.Partition]
	}
	return protocol.ResponseHeader{CorrelationID: id}, &protocol.ListOffsetsResponse{Offset: off}, nil
}

// fetch answers with up to 4 records from req.Offset as one batch, after
// waiting (up to MaxWaitMs) for records when there are none.
func (s *fakeStorage) fetch(id uint32, req *protocol.FetchRequest) (protocol.ResponseHeader, protocol.Body, []byte) {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMs) * time.Millisecond)
	for {
		s.mu.Lock()
		log, start := s.logs[req.Partition], s.logStart[req.Partition]
		s.mu.Unlock()
		hw := int64(len(log))
		if req.Offset < start || req.Offset > hw {
			return protocol.ResponseHeader{CorrelationID: id, ErrorCode: protocol.OffsetOutOfRange,
				ErrorMessage: fmt.Sprintf("offset %d not in [%d, %d]", req.Offset, start, hw)}, nil, nil
		}
		if req.Offset < hw || !time.Now().Before(deadline) {
			resp := &protocol.FetchResponse{HighWatermark: hw, LogStartOffset: start, LogEndOffset: hw}
			end := min(hw, req.Offset+4)
			if req.Offset == end {
				return protocol.ResponseHeader{CorrelationID: id}, resp, nil
			}
			b := record.NewBuilder(record.CodecNone)
			for _, r := range log[req.Offset:end] {
				b.Append(r)
			}
			batch, err := b.Build()
			if err != nil {
				panic(err)
			}
			record.SetBaseOffset(batch, req.Offset)
			return protocol.ResponseHeader{CorrelationID: id}, resp, batch
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fakeCoordinator is a scriptable group coordinator for group "g": members
// join, the test sets their assignments (each change bumps the member's
// epoch), commits are stored. It checks member ids and epochs loosely (a
// commit must name a current member) and records every request.
type fakeCoordinator struct {
	url string

	mu         sync.Mutex
	nextID     int
	members    map[string]*fakeMember
	committed  map[groups.TP]int64
	topicIDs   map[groups.TP]string // the topic incarnation of each committed offset
	heartbeats []groups.HeartbeatRequest
	commits    []groups.CommitRequest
	// initial is the assignment a joining member gets.
	initial []groups.TP
	// failWith, when set, answers every heartbeat with this code.
	failWith protocol.Code
	// fence lists member ids whose next heartbeat gets UNKNOWN_MEMBER_ID.
	fence map[string]bool
}

type fakeMember struct {
	epoch  int32
	assign []groups.TP
	owned  []groups.TP
}

func newFakeCoordinator(t *testing.T) *fakeCoordinator {
	c := &fakeCoordinator{members: map[string]*fakeMember{}, committed: map[groups.TP]int64{}, topicIDs: map[groups.TP]string{}, fence: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/groups/g/heartbeat", c.heartbeat)
	mux.HandleFunc("POST /v1/groups/g/offsets", c.commit)
	mux.HandleFunc("GET /v1/groups/g/offsets", c.offsets)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

func writeCode(w http.ResponseWriter, status int, code protocol.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(jsonhttp.ErrorBody{ErrorCode: int16(code), Error: msg})
}

func (c *fakeCoordinator) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req groups.HeartbeatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeCode(w, 400, protocol.InvalidRequest, err.Error())
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.heartbeats = append(c.heartbeats, req)
	if c.failWith != protocol.None {
		writeCode(w, 503, c.failWith, "injected")
		return
	}
	switch {
	case req.MemberEpoch == groups.LeaveEpoch:
		delete(c.members, req.MemberID)
		_ = json.NewEncoder(w).Encode(groups.HeartbeatResponse{MemberID: req.MemberID, MemberEpoch: groups.LeaveEpoch})
		return
	case req.MemberEpoch == groups.JoinEpoch:
		c.nextID++
		req.MemberID = fmt.Sprintf("m%d", c.nextID)
		c.members[req.MemberID] = &fakeMember{epoch: 1, assign: c.initial}
	}
	m := c.members[req.MemberID]
	if m == nil || c.fence[req.MemberID] {
		delete(c.members, req.MemberID)
		writeCode(w, 400, protocol.UnknownMemberID, "unknown member "+req.MemberID)
		return
	}
	if req.MemberEpoch == m.epoch || req.MemberEpoch == groups.JoinEpoch {
		m.owned = groups.Flatten(req.Owned)
	}
	_ = json.NewEncoder(w).Encode(groups.HeartbeatResponse{MemberID: req.MemberID, MemberEpoch: m.epoch,
		HeartbeatIntervalMs: 50, Assignment: groups.Group(m.assign)})
}

func (c *fakeCoordinator) commit(w http.ResponseWriter, r *http.Request) {
	var req groups.CommitRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeCode(w, 400, protocol.InvalidRequest, err.Error())
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits = append(c.commits, req)
	m := c.members[req.MemberID]
	if m == nil {
		writeCode(w, 400, protocol.UnknownMemberID, "unknown member "+req.MemberID)
		return
	}
	if req.MemberEpoch != m.epoch {
		writeCode(w, 400, protocol.StaleMemberEpoch, "stale epoch")
		return
	}
	for _, o := range req.Offsets {
		tp := groups.TP{Topic: o.Topic, Partition: o.Partition}
		c.committed[tp], c.topicIDs[tp] = o.Offset, o.TopicID
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *fakeCoordinator) offsets(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := groups.OffsetsResponse{Group: "g", Offsets: []groups.Committed{}}
	for tp, off := range c.committed {
		if topic := r.URL.Query().Get("topic"); topic == "" || topic == tp.Topic {
			out.Offsets = append(out.Offsets, groups.Committed{Topic: tp.Topic, Partition: tp.Partition, Offset: off, TopicID: c.topicIDs[tp]})
		}
	}
	_ = json.NewEncoder(w).Encode(out)
}

// setAssignment gives a member a new assignment and bumps its epoch.
func (c *fakeCoordinator) setAssignment(member string, tps ...groups.TP) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[member]
	m.epoch++
	m.assign = tps
}

// ownedBy returns what a member last reported owning at its current epoch.
func (c *fakeCoordinator) ownedBy(member string) ([]groups.TP, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[member]
	if m == nil {
		return nil, false
	}
	return m.owned, true
}

func (c *fakeCoordinator) committedOffset(tp groups.TP) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	off, ok := c.committed[tp]
	return off, ok
}

func (c *fakeCoordinator) committedTopicID(tp groups.TP) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topicIDs[tp]
}

func (c *fakeCoordinator) commitCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.commits)
}

func (c *fakeCoordinator) heartbeatLog() []groups.HeartbeatRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]groups.HeartbeatRequest(nil), c.heartbeats...)
}

func (c *fakeCoordinator) set(f func(c *fakeCoordinator)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(c)
}

// testLogWriter sends log lines to the test's log (shown on failure or -v).
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// tps builds TPs of topic "t".
func tps(ps ...int32) []groups.TP {
	out := make([]groups.TP, len(ps))
	for i, p := range ps {
		out[i] = groups.TP{Topic: "t", Partition: p}
	}
	return out
}

func tpList(ts []groups.TP) string {
	s := make([]string, len(ts))
	for i, tp := range ts {
		s[i] = tp.String()
	}
	return strings.Join(s, ",")
}
