package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/jsonhttp"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

func TestGroupUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"group"},
		{"group", "frobnicate"},
		{"group", "list", "extra"},
		{"group", "list", "-o", "yaml"},
		{"group", "describe"},
		{"group", "describe", "a", "b"},
		{"group", "delete"},
		{"group", "reset-offsets", "g", "--to-earliest"},
		{"group", "reset-offsets", "g", "--topic", "t"},
		{"group", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--to-latest"},
		{"group", "reset-offsets", "g", "--topic", "t", "--to-datetime", "yesterday"},
		{"group", "reset-offsets", "g", "--topic", "t", "--to-offset", "-3"},
		{"group", "reset-offsets", "g", "--topic", "t", "--to-latest", "--partitions", "0,x"},
		{"group", "reset-offsets", "bad/group", "--topic", "t", "--to-latest"},
		{"consume", "t", "--group", "g", "--partition", "1"},
		{"consume", "t", "--group", "g", "--offset", "3"},
		{"consume", "t", "--group", "no spaces"},
		{"share-group", "frobnicate"},
		{"share-group", "describe"},
		{"share-group", "list", "-o", "yaml"},
		{"share-group", "delete", "a", "b"},
		{"share-group", "config", "g"},
		{"share-group", "config", "g", "novalue"},
		{"share-group", "reset-offsets", "g", "--to-earliest"},
	} {
		var out, errb bytes.Buffer
		if code := Main(append([]string{"--offsets", "http://127.0.0.1:1"}, args...), strings.NewReader(""), &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

func TestParseResetArgs(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		args []string
		want groups.ResetRequest
		out  string
	}{
		{[]string{"g", "--topic", "t", "--to-earliest"}, groups.ResetRequest{Topic: "t", To: groups.ResetEarliest}, "table"},
		{[]string{"--to-latest", "g", "--topic", "t", "--partitions", "2, 0", "--dry-run"},
			groups.ResetRequest{Topic: "t", To: groups.ResetLatest, Partitions: []int32{2, 0}, DryRun: true}, "table"},
		{[]string{"g", "--topic", "t", "--to-datetime", "2024-05-01T14:00:00+02:00", "-o", "json"},
			groups.ResetRequest{Topic: "t", To: groups.ResetTimestamp, TimestampMs: at.UnixMilli()}, "json"},
		{[]string{"g", "--topic", "t", "--to-offset", "0"}, groups.ResetRequest{Topic: "t", To: groups.ResetOffset, Offset: 0}, "table"},
		{[]string{"g", "--topic", "t", "--to-offset", "42"}, groups.ResetRequest{Topic: "t", To: groups.ResetOffset, Offset: 42}, "table"},
	} {
		cmd, err := parseResetArgs(tc.args)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		got, _ := json.Marshal(cmd.req)
		want, _ := json.Marshal(tc.want)
		if cmd.group != "g" || string(got) != string(want) || cmd.output != tc.out {
			t.Errorf("%v: group %q req %s output %s; want %s %s", tc.args, cmd.group, got, cmd.output, want, tc.out)
		}
	}
}

func sampleDescription() *groups.Description {
	return &groups.Description{
		Group: "billing", State: groups.StateReconciling, GroupEpoch: 7, Assignor: "sticky",
		Members: []groups.MemberDescription{
			{MemberID: "m2", ClientID: "svc", MemberEpoch: 7, Topics: []string{"orders"},
				Assignment: []groups.TopicPartitions{{Topic: "orders", Partitions: []int32{1}}}},
			{MemberID: "m1", MemberEpoch: 6, Topics: []string{"orders"},
				Assignment: []groups.TopicPartitions{{Topic: "orders", Partitions: []int32{0}}},
				Revoking:   []groups.TopicPartitions{{Topic: "orders", Partitions: []int32{2}}}},
		},
		Partitions: []groups.PartitionLag{
			{Topic: "orders", Partition: 2, Owner: "m1", Committed: -1, LogStart: -1, LogEnd: -1, LastStable: -1, Lag: -1, Error: "LEADER_NOT_AVAILABLE"},
			{Topic: "orders", Partition: 0, Owner: "m1", Committed: 10, LogStart: 0, LogEnd: 15, LastStable: 12, Lag: 2},
			{Topic: "orders", Partition: 1, Committed: -1, LogStart: 2, LogEnd: 3, LastStable: 3, Lag: 1},
		},
		Isolation: groups.ReadCommitted,
		TotalLag:  3,
	}
}

func TestWriteGroupDescription(t *testing.T) {
	d := sampleDescription()
	sortDescription(d)
	var out bytes.Buffer
	if err := writeGroupDescription(&out, d); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	want := []string{
		"Group: billing  Protocol: consumer  State: reconciling  Epoch: 7  Assignor: sticky  Isolation: read_committed  Members: 2",
		"",
		"TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAST-STABLE-OFFSET  LAG  OWNER",
		"orders  0          10              15              12                  2    m1",
		"orders  1          -               3               3                   1    -",
		"orders  2          -               -               -                   -    m1",
		"",
		"Errors:",
		"  orders-2: LEADER_NOT_AVAILABLE",
		"",
		"MEMBER  CLIENT-ID  HOST  INSTANCE  EPOCH  TOPICS  ASSIGNMENT  REVOKING",
		"m1      -          -     -         6      orders  orders:0    orders:2",
		"m2      svc        -     -         7      orders  orders:1    -",
		"",
		"Total lag: 3",
	}
	for i, w := range want {
		if i >= len(lines) || strings.TrimRight(lines[i], " ") != w {
			t.Fatalf("line %d:\n%s\nwant %q", i, out.String(), w)
		}
	}
	// A Kafka classic group: its protocol type, the leader's assignor, and
	// its members' hosts and instance ids.
	d.Protocol, d.ProtocolType, d.ProtocolName = groups.ProtocolClassic, "consumer", "range"
	d.Members[1].ClientHost, d.Members[1].InstanceID = "/10.0.0.2", "svc-1"
	out.Reset()
	if err := writeGroupDescription(&out, d); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Protocol: classic/consumer", "Assignor: range", "/10.0.0.2  svc-1"} {
		if !strings.Contains(out.String(), w) {
			t.Fatalf("classic group description lacks %q:\n%s", w, out.String())
		}
	}
	empty := &groups.Description{Group: "idle", State: groups.StateEmpty}
	sortDescription(empty)
	out.Reset()
	_ = writeGroupDescription(&out, empty)
	if !strings.Contains(out.String(), "Group idle has no active members.") || !strings.Contains(out.String(), "Total lag: 0") {
		t.Errorf("empty group:\n%s", out.String())
	}
}

// fakeOffsets serves the offsets HTTP API's group routes from canned data and
// records what it was asked.
type fakeOffsets struct {
	mu     sync.Mutex
	resets []groups.ResetRequest
	paths  []string
}

func newFakeOffsets(t *testing.T) (*fakeOffsets, string) {
	f := &fakeOffsets{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/groups", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		_ = json.NewEncoder(w).Encode(groups.ListResponse{Groups: []groups.Listing{
			{Group: "zeta", State: groups.StateEmpty}, {Group: "billing", State: groups.StateStable, Members: 2}}})
	})
	mux.HandleFunc("GET /v1/groups/{group}", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		if r.PathValue("group") != "billing" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(jsonhttp.ErrorBody{ErrorCode: int16(protocol.GroupIDNotFound), Error: "no such group"})
			return
		}
		_ = json.NewEncoder(w).Encode(sampleDescription())
	})
	mux.HandleFunc("POST /v1/groups/{group}/reset-offsets", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		var req groups.ResetRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.resets = append(f.resets, req)
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(groups.ResetResponse{Offsets: []groups.Committed{
			{Topic: req.Topic, Partition: 1, Offset: 7}, {Topic: req.Topic, Partition: 0, Offset: 3}}})
	})
	mux.HandleFunc("DELETE /v1/groups/{group}", func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		if r.PathValue("group") == "busy" {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(jsonhttp.ErrorBody{ErrorCode: int16(protocol.NonEmptyGroup), Error: "group busy has 1 member"})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeOffsets) record(r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
}

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestGroupCommandsAgainstOffsetsService(t *testing.T) {
	f, url := newFakeOffsets(t)
	// The list, sorted by group, as a table and as JSON.
	code, out, errs := run("--offsets", "http://127.0.0.1:1,"+url, "group", "list")
	if code != 0 || !strings.HasPrefix(out, "GROUP    PROTOCOL  STATE   MEMBERS\nbilling  consumer  stable  2\nzeta") {
		t.Errorf("group list: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = run("--offsets", url, "group", "list", "-o", "json")
	var ls []groups.Listing
	if code != 0 || json.Unmarshal([]byte(out), &ls) != nil || len(ls) != 2 || ls[0].Group != "billing" {
		t.Errorf("group list -o json: exit %d %s", code, out)
	}
	// Describe as JSON keeps every field, sorted.
	code, out, _ = run("--offsets", url, "group", "describe", "billing", "-o", "json")
	var d groups.Description
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.TotalLag != 3 || d.Partitions[0].Partition != 0 || d.Members[0].MemberID != "m1" {
		t.Errorf("group describe -o json: exit %d %s", code, out)
	}
	code, out, _ = run("--offsets", url, "group", "describe", "billing")
	if code != 0 || !strings.Contains(out, "LOG-END-OFFSET") || !strings.Contains(out, "Total lag: 3") {
		t.Errorf("group describe: exit %d\n%s", code, out)
	}
	code, _, errs = run("--offsets", url, "group", "describe", "nope")
	if code != 1 || !strings.Contains(errs, "describe group nope") || !strings.Contains(errs, "GROUP_ID_NOT_FOUND") {
		t.Errorf("describe of a missing group: exit %d %q", code, errs)
	}
	// Reset sends the request as parsed and prints the new offsets.
	code, out, _ = run("--offsets", url, "group", "reset-offsets", "billing", "--topic", "orders", "--to-earliest", "--dry-run")
	if code != 0 || !strings.Contains(out, "orders  0          3\norders  1          7\n") || !strings.Contains(out, "dry run") {
		t.Errorf("reset-offsets: exit %d\n%s", code, out)
	}
	if len(f.resets) != 1 || f.resets[0].To != groups.ResetEarliest || !f.resets[0].DryRun || f.resets[0].Topic != "orders" {
		t.Errorf("reset requests %+v", f.resets)
	}
	code, out, _ = run("--offsets", url, "group", "reset-offsets", "billing", "--topic", "orders", "--to-offset", "5", "-o", "json")
	var rr groups.ResetResponse
	if code != 0 || json.Unmarshal([]byte(out), &rr) != nil || len(rr.Offsets) != 2 || strings.Contains(out, "dry run") {
		t.Errorf("reset-offsets -o json: exit %d %s", code, out)
	}
	// Delete, and a refusal with its reason.
	if code, out, _ = run("--offsets", url, "group", "delete", "billing"); code != 0 || out != "deleted group billing\n" {
		t.Errorf("group delete: exit %d %q", code, out)
	}
	if code, _, errs = run("--offsets", url, "group", "delete", "busy"); code != 1 || !strings.Contains(errs, "NON_EMPTY_GROUP") {
		t.Errorf("delete of a busy group: exit %d %q", code, errs)
	}
	if !slices.Contains(f.paths, "DELETE /v1/groups/billing") {
		t.Errorf("requests %v", f.paths)
	}
}

func TestOffsetsAddressFromEnvironment(t *testing.T) {
	_, url := newFakeOffsets(t)
	t.Setenv("SLUICE_OFFSETS", url)
	if code, out, errs := run("group", "list"); code != 0 || !strings.Contains(out, "billing") {
		t.Errorf("SLUICE_OFFSETS: exit %d %q %q", code, out, errs)
	}
	code, _, errs := run("--offsets", "http://127.0.0.1:1", "group", "list")
	if code != 1 || !strings.Contains(errs, "list groups") || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("--offsets overrides SLUICE_OFFSETS: exit %d %q", code, errs)
	}
}

// scriptedConsumer replays polls and tracks positions like a Consumer.
type scriptedConsumer struct {
	polls [][]client.ConsumerRecord
	owned []groups.TP
	pos   map[groups.TP]int64
	hw    map[groups.TP]int64
	seeks map[groups.TP]int64
}

func (s *scriptedConsumer) Poll(ctx context.Context) ([]client.ConsumerRecord, error) {
	if len(s.polls) == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	recs := s.polls[0]
	s.polls = s.polls[1:]
	for _, r := range recs {
		s.pos[r.TP()] = r.Offset + 1
	}
	return recs, nil
}
func (s *scriptedConsumer) Assignment() []groups.TP { return s.owned }
func (s *scriptedConsumer) Position(tp groups.TP) (int64, bool) {
	p, ok := s.pos[tp]
	return p, ok
}
func (s *scriptedConsumer) HighWatermark(tp groups.TP) int64 {
	if hw, ok := s.hw[tp]; ok {
		return hw
	}
	return -1
}
func (s *scriptedConsumer) Seek(tp groups.TP, off int64) error {
	s.seeks[tp], s.pos[tp] = off, off
	return nil
}

func crec(p int32, off int64) client.ConsumerRecord {
	return client.ConsumerRecord{Topic: "t", Partition: p, Record: record.Record{Offset: off, Value: []byte{'a' + byte(off)}}}
}

func TestGroupConsumeMaxMessagesHandsBackTheRest(t *testing.T) {
	t0, t1 := groups.TP{Topic: "t", Partition: 0}, groups.TP{Topic: "t", Partition: 1}
	s := &scriptedConsumer{owned: []groups.TP{t0, t1}, pos: map[groups.TP]int64{}, hw: map[groups.TP]int64{}, seeks: map[groups.TP]int64{},
		polls: [][]client.ConsumerRecord{{crec(0, 0), crec(1, 0)}, {crec(0, 1), crec(1, 1), crec(0, 2), crec(1, 2)}}}
	f, _ := parseFormat(`%p:%o\n`)
	var out bytes.Buffer
	err := runGroupConsume(context.Background(), Env{Stdout: &out}, consumeOpts{maxMessages: 3, format: f}, s)
	if err != nil || out.String() != "0:0\n1:0\n0:1\n" {
		t.Fatalf("err %v output %q", err, out.String())
	}
	// t-0 printed up to 1, t-1 up to 0: positions go back to 2 and 1.
	if s.seeks[t0] != 2 || s.seeks[t1] != 1 || len(s.seeks) != 2 {
		t.Errorf("seeks %v", s.seeks)
	}
}

func TestGroupConsumeExitsAtEnd(t *testing.T) {
	t0, t1 := groups.TP{Topic: "t", Partition: 0}, groups.TP{Topic: "t", Partition: 1}
	s := &scriptedConsumer{owned: []groups.TP{t0, t1}, pos: map[groups.TP]int64{t1: 0}, hw: map[groups.TP]int64{t0: 2, t1: 0}, seeks: map[groups.TP]int64{},
		polls: [][]client.ConsumerRecord{{crec(0, 0)}, {crec(0, 1)}}}
	f, _ := parseFormat(`%o `)
	var out bytes.Buffer
	if err := runGroupConsume(context.Background(), Env{Stdout: &out}, consumeOpts{exitAtEnd: true, format: f}, s); err != nil || out.String() != "0 1 " {
		t.Errorf("err %v output %q", err, out.String())
	}
}

func TestAtEnd(t *testing.T) {
	t0, t1 := groups.TP{Topic: "t", Partition: 0}, groups.TP{Topic: "t", Partition: 1}
	for _, tc := range []struct {
		name  string
		owned []groups.TP
		pos   map[groups.TP]int64
		hw    map[groups.TP]int64
		want  bool
	}{
		{"nothing assigned yet", nil, nil, nil, false},
		{"all read", []groups.TP{t0, t1}, map[groups.TP]int64{t0: 5, t1: 0}, map[groups.TP]int64{t0: 5, t1: 0}, true},
		{"one behind", []groups.TP{t0, t1}, map[groups.TP]int64{t0: 4, t1: 0}, map[groups.TP]int64{t0: 5, t1: 0}, false},
		{"start offset unknown", []groups.TP{t0}, map[groups.TP]int64{}, map[groups.TP]int64{t0: 0}, false},
		{"no fetch answered yet", []groups.TP{t0}, map[groups.TP]int64{t0: 0}, map[groups.TP]int64{}, false},
	} {
		s := &scriptedConsumer{owned: tc.owned, pos: tc.pos, hw: tc.hw}
		if got := atEnd(s); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}
