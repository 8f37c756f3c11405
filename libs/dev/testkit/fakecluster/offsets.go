package fakecluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
)

// Offsets is a scriptable offsets service on 127.0.0.1. For one group it is
// a coordinator: members join with the SDK's heartbeat and get the
// assignment the test set (SetInitial, SetAssignment, each change bumping
// the member's epoch); commits are kept, and a commit must name a current
// member at its current epoch. Every heartbeat and commit is recorded. It
// lists and describes the groups the test describes (Describe), and can be
// made to fail (SetDown), to hang (SetHang), or to answer every request
// with a set status and body (SetAnswer); LastRequest shows what came. It
// is safe for concurrent use.
type Offsets struct {
	group string
	srv   *httptest.Server
	mux   *http.ServeMux

	mu           sync.Mutex
	described    map[string]groups.Description
	down, hang   bool
	answerStatus int // 0: no set answer
	answerBody   string
	last         *http.Request // the last request, its body read into lastBody
	lastBody     string

	nextID     int
	members    map[string]*member
	committed  map[groups.TP]groups.Committed
	heartbeats []groups.HeartbeatRequest
	commits    int
	initial    []groups.TP     // what a joining member is assigned
	failWith   protocol.Code   // answers every heartbeat when set
	fence      map[string]bool // members whose next heartbeat is UNKNOWN_MEMBER_ID
}

type member struct {
	epoch  int32
	assign []groups.TP
	owned  []groups.TP
}

// NewOffsets starts the service, coordinating group ("": none). Close it
// when done.
func NewOffsets(group string) *Offsets {
	o := &Offsets{group: group, members: map[string]*member{}, committed: map[groups.TP]groups.Committed{}, fence: map[string]bool{},
		described: map[string]groups.Description{}}
	o.mux = http.NewServeMux()
	if group != "" {
		o.mux.HandleFunc("POST /v1/groups/"+group+"/heartbeat", o.heartbeat)
		o.mux.HandleFunc("POST /v1/groups/"+group+"/offsets", o.commit)
		o.mux.HandleFunc("GET /v1/groups/"+group+"/offsets", o.offsets)
	}
	o.mux.HandleFunc("GET /v1/groups", o.list)
	o.mux.HandleFunc("GET /v1/groups/{group}", o.describe)
	o.srv = httptest.NewServer(http.HandlerFunc(o.serve))
	return o
}

// serve records the request, then answers as the test set: hanging, down,
// a set answer, or the routes.
func (o *Offsets) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	o.mu.Lock()
	o.last, o.lastBody = r.Clone(context.Background()), string(body)
	hang, down, status, answer := o.hang, o.down, o.answerStatus, o.answerBody
	o.mu.Unlock()
	switch {
	case hang:
		<-r.Context().Done()
	case down:
		writeErr(w, http.StatusServiceUnavailable, protocol.LeaderNotAvailable, "the offsets group has no leader")
	case status != 0:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	default:
		o.mux.ServeHTTP(w, r)
	}
}

// Describe sets what the group's description is (GET /v1/groups/{group},
// and its line in GET /v1/groups).
func (o *Offsets) Describe(d groups.Description) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.described[d.Group] = d
}

// SetDown answers every request 503 LEADER_NOT_AVAILABLE (or not).
func (o *Offsets) SetDown(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = down
}

// SetHang leaves every request unanswered until the client gives up (or
// not).
func (o *Offsets) SetHang(hang bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hang = hang
}

// SetAnswer answers every request with status and body (status 0: the
// routes again).
func (o *Offsets) SetAnswer(status int, body string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answerStatus, o.answerBody = status, body
}

// LastRequest returns the last request and its body (nil before any).
func (o *Offsets) LastRequest() (*http.Request, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last, o.lastBody
}

func (o *Offsets) list(w http.ResponseWriter, _ *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := groups.ListResponse{Groups: []groups.Listing{}}
	for _, d := range o.described {
		l.Groups = append(l.Groups, groups.Listing{Group: d.Group, State: d.State, Members: len(d.Members)})
	}
	writeJSON(w, http.StatusOK, l)
}

func (o *Offsets) describe(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	d, ok := o.described[r.PathValue("group")]
	if !ok {
		writeErr(w, http.StatusNotFound, protocol.GroupIDNotFound, "no group "+r.PathValue("group"))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// URL returns the service's base URL.
func (o *Offsets) URL() string { return o.srv.URL }

// Close stops the server.
func (o *Offsets) Close() {
	o.srv.CloseClientConnections()
	o.srv.Close()
}

// SetInitial sets what members joining from now on are assigned.
func (o *Offsets) SetInitial(tps ...groups.TP) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.initial = tps
}

// SetCommitted stores a committed offset, as a member's commit would.
func (o *Offsets) SetCommitted(tp groups.TP, offset int64, topicID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.committed[tp] = groups.Committed{Topic: tp.Topic, Partition: tp.Partition, Offset: offset, TopicID: topicID}
}

// FailHeartbeats answers every heartbeat with code (503) until called with
// protocol.None.
func (o *Offsets) FailHeartbeats(code protocol.Code) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failWith = code
}

// Fence answers the member's next heartbeat UNKNOWN_MEMBER_ID and removes
// it, as a coordinator does to a member whose session expired.
func (o *Offsets) Fence(memberID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fence[memberID] = true
}

// Remove drops a member at once: its commits are refused from now on.
func (o *Offsets) Remove(memberID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.members, memberID)
}

// SetAssignment gives a member a new assignment and bumps its epoch.
func (o *Offsets) SetAssignment(memberID string, tps ...groups.TP) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.members[memberID]
	m.epoch++
	m.assign = tps
}

// OwnedBy returns what a member last reported owning at its current epoch.
func (o *Offsets) OwnedBy(memberID string) ([]groups.TP, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.members[memberID]
	if m == nil {
		return nil, false
	}
	return m.owned, true
}

// Committed returns a partition's committed offset and its topic
// incarnation.
func (o *Offsets) Committed(tp groups.TP) (groups.Committed, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.committed[tp]
	return c, ok
}

// Commits returns how many commit requests arrived.
func (o *Offsets) Commits() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.commits
}

// Heartbeats returns every heartbeat request, in order.
func (o *Offsets) Heartbeats() []groups.HeartbeatRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]groups.HeartbeatRequest(nil), o.heartbeats...)
}

func (o *Offsets) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req groups.HeartbeatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, protocol.InvalidRequest, err.Error())
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.heartbeats = append(o.heartbeats, req)
	if o.failWith != protocol.None {
		writeErr(w, http.StatusServiceUnavailable, o.failWith, "injected")
		return
	}
	switch req.MemberEpoch {
	case groups.LeaveEpoch:
		delete(o.members, req.MemberID)
		writeJSON(w, http.StatusOK, groups.HeartbeatResponse{MemberID: req.MemberID, MemberEpoch: groups.LeaveEpoch})
		return
	case groups.JoinEpoch:
		o.nextID++
		req.MemberID = fmt.Sprintf("m%d", o.nextID)
		o.members[req.MemberID] = &member{epoch: 1, assign: o.initial}
	}
	m := o.members[req.MemberID]
	if m == nil || o.fence[req.MemberID] {
		delete(o.members, req.MemberID)
		delete(o.fence, req.MemberID)
		writeErr(w, http.StatusConflict, protocol.UnknownMemberID, "unknown member "+req.MemberID)
		return
	}
	if req.MemberEpoch == m.epoch || req.MemberEpoch == groups.JoinEpoch {
		m.owned = groups.Flatten(req.Owned)
	}
	writeJSON(w, http.StatusOK, groups.HeartbeatResponse{MemberID: req.MemberID, MemberEpoch: m.epoch,
		HeartbeatIntervalMs: 50, Assignment: groups.Group(m.assign)})
}

func (o *Offsets) commit(w http.ResponseWriter, r *http.Request) {
	var req groups.CommitRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, protocol.InvalidRequest, err.Error())
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commits++
	m := o.members[req.MemberID]
	if m == nil {
		writeErr(w, http.StatusConflict, protocol.UnknownMemberID, "unknown member "+req.MemberID)
		return
	}
	if req.MemberEpoch != m.epoch {
		writeErr(w, http.StatusConflict, protocol.StaleMemberEpoch, "stale epoch")
		return
	}
	for _, c := range req.Offsets {
		tp := groups.TP{Topic: c.Topic, Partition: c.Partition}
		o.committed[tp] = groups.Committed{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset, TopicID: c.TopicID}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (o *Offsets) offsets(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := groups.OffsetsResponse{Group: o.group, Offsets: []groups.Committed{}}
	for tp, c := range o.committed {
		if topic := r.URL.Query().Get("topic"); topic == "" || topic == tp.Topic {
			out.Offsets = append(out.Offsets, c)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
