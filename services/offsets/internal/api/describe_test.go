package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/services/offsets/internal/fsm"
)

func TestLag(t *testing.T) {
	for _, tc := range []struct {
		committed, start, end, want int64
	}{
		{committed: 40, start: 0, end: 100, want: 60},
		{committed: 100, start: 0, end: 100, want: 0},
		{committed: -1, start: 0, end: 100, want: 100}, // nothing committed: everything readable
		{committed: -1, start: 30, end: 100, want: 70},
		{committed: 10, start: 30, end: 100, want: 70}, // retention passed the commit: 10..29 are gone
		{committed: 120, start: 0, end: 100, want: 0},  // a commit past the end (log truncated) is not negative lag
	} {
		if got := Lag(tc.committed, tc.start, tc.end); got != tc.want {
			t.Errorf("Lag(%d, %d, %d) = %d, want %d", tc.committed, tc.start, tc.end, got, tc.want)
		}
	}
}

// TestEveryCodeAnswersWithItsStatus walks every wire code through the
// service's error answer: the status is the code's in protocol's table, or
// the one an upstream service gave a relayed error, and the body keeps the
// code and message.
func TestEveryCodeAnswersWithItsStatus(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for _, info := range protocol.Codes() {
		if info.Code == protocol.None {
			continue
		}
		for _, err := range []error{info.Code.Err("because"), &protocol.Error{Code: info.Code, Message: "because", Status: 599}} {
			var ctx fasthttp.RequestCtx
			s.fail(&ctx, err)
			want := protocol.HTTPStatusOf(err)
			var body cluster.ErrorBody
			if jerr := json.Unmarshal(ctx.Response.Body(), &body); jerr != nil || ctx.Response.StatusCode() != want ||
				protocol.Code(body.ErrorCode) != info.Code || body.Error != "because" {
				t.Errorf("%v: HTTP %d %s, want %d", info.Name, ctx.Response.StatusCode(), ctx.Response.Body(), want)
			}
		}
	}
	var ctx fasthttp.RequestCtx
	s.fail(&ctx, errors.New("no code"))
	if ctx.Response.StatusCode() != http.StatusInternalServerError || !strings.Contains(string(ctx.Response.Body()), `"error_code":-1`) {
		t.Errorf("an error without a code: HTTP %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}

// fakeEnds serves a metadata snapshot; no partition has log offsets.
type fakeEnds struct{ snap *cluster.Snapshot }

func (f fakeEnds) LastStable(context.Context, string, int32) (int64, error) {
	return 0, protocol.UnknownTopicOrPartition.Err("no log")
}

func (f fakeEnds) ListOffset(context.Context, string, int32, int64) (int64, error) {
	return 0, protocol.UnknownTopicOrPartition.Err("no log")
}
func (f fakeEnds) Topic(string) (int32, bool) { return 0, false }
func (f fakeEnds) Access() *cluster.Snapshot  { return f.snap }

// TestStampTopicIDs: an offset committed without the topic's incarnation
// gets the one this service's metadata knows; one naming an incarnation
// keeps it; a topic the metadata does not know stays without.
func TestStampTopicIDs(t *testing.T) {
	s := &Server{ends: fakeEnds{&cluster.Snapshot{Topics: []cluster.Topic{{Name: "a", ID: "a-2"}, {Name: "b", ID: "b-1"}}}}}
	offs := []groups.Offset{{Topic: "a"}, {Topic: "b", TopicID: "b-0"}, {Topic: "gone"}}
	s.stampTopicIDs(offs)
	for i, want := range []string{"a-2", "b-0", ""} {
		if offs[i].TopicID != want {
			t.Errorf("%s: topic id %q, want %q", offs[i].Topic, offs[i].TopicID, want)
		}
	}
}

// TestLagsSkipOffsetsOfAnEarlierTopic: describe reports no commit for a
// partition whose committed offset is of an earlier incarnation of its
// topic.
func TestLagsSkipOffsetsOfAnEarlierTopic(t *testing.T) {
	s := &Server{ends: fakeEnds{&cluster.Snapshot{Topics: []cluster.Topic{{Name: "a", ID: "a-2"}}}}}
	committed := []groups.Committed{
		{Topic: "a", Partition: 0, Offset: 50, TopicID: "a-1"},
		{Topic: "a", Partition: 1, Offset: 7, TopicID: "a-2"},
		{Topic: "a", Partition: 2, Offset: 9},
	}
	lags := s.lags(context.Background(), &fsm.Group{Name: "g"}, committed, true)
	if len(lags) != 2 || lags[0].Partition != 1 || lags[0].Committed != 7 || lags[1].Partition != 2 || lags[1].Committed != 9 {
		t.Fatalf("lags %+v, want partitions 1 (7) and 2 (9) only", lags)
	}
}

// TestRouteTable: every route of the offsets API is the coordinator's, and
// the paths the SDK's and the frontends' clients use find theirs.
func TestRouteTable(t *testing.T) {
	routes := (&Server{}).newRoutes()
	for _, r := range routes.Routes() {
		if !r.Leader || r.NeedOf == nil {
			t.Errorf("%s %s: leader %v, need rule %v", r.Method, r.Pattern, r.Leader, r.NeedOf != nil)
		}
	}
	for _, tc := range []struct{ method, path, pattern, op string }{
		{http.MethodGet, "/v1/groups", "/v1/groups", ""},
		{http.MethodGet, "/v1/groups/g", "/v1/groups/{group}", ""},
		{http.MethodDelete, "/v1/groups/g", "/v1/groups/{group}", ""},
		{http.MethodPost, "/v1/groups/g/heartbeat", "/v1/groups/{group}/heartbeat", ""},
		{http.MethodGet, "/v1/groups/g/offsets", "/v1/groups/{group}/offsets", ""},
		{http.MethodPost, "/v1/groups/g/offsets", "/v1/groups/{group}/offsets", ""},
		{http.MethodPost, "/v1/groups/g/classic/join", "/v1/groups/{group}/classic/{op}", "join"},
	} {
		r, p, _ := routes.Lookup(tc.method, tc.path)
		if r == nil || r.Pattern != tc.pattern || p.Get("op") != tc.op || (r.Pattern != "/v1/groups" && p.Get("group") != "g") {
			t.Errorf("%s %s: %+v %v", tc.method, tc.path, r, p)
		}
	}
	if r, _, allowed := routes.Lookup(http.MethodPut, "/v1/groups/g/offsets"); r != nil || len(allowed) != 2 {
		t.Errorf("PUT offsets: %v, allowed %v", r, allowed)
	}
	if r, _, allowed := routes.Lookup(http.MethodGet, "/v1/groups/g/offsets/x"); r != nil || allowed != nil {
		t.Errorf("a longer path: %v %v", r, allowed)
	}
}

// rangeEnds serves one log range and last stable offset for every
// partition.
type rangeEnds struct{ start, end, stable int64 }

func (r rangeEnds) LastStable(context.Context, string, int32) (int64, error) { return r.stable, nil }
func (r rangeEnds) Topic(string) (int32, bool)                               { return 1, true }
func (r rangeEnds) Access() *cluster.Snapshot                                { return &cluster.Snapshot{} }
func (r rangeEnds) ListOffset(_ context.Context, _ string, _ int32, ts int64) (int64, error) {
	if ts == protocol.TimestampEarliest {
		return r.start, nil
	}
	return r.end, nil
}

// TestLagOfReadCommittedGroups: a group whose members read at
// read_committed lags to the last stable offset (it reads no further while
// a transaction is open there); one with a read_uncommitted member, or
// with members that do not say (Kafka clients), to the log end.
func TestLagOfReadCommittedGroups(t *testing.T) {
	s := &Server{ends: rangeEnds{start: 0, end: 100, stable: 60}}
	committed := []groups.Committed{{Topic: "t", Partition: 0, Offset: 40}}
	for _, tc := range []struct {
		isolations []string
		want       string
		lag        int64
	}{
		{[]string{groups.ReadCommitted, groups.ReadCommitted}, groups.ReadCommitted, 20},
		{[]string{groups.ReadCommitted, ""}, groups.ReadCommitted, 20},
		{[]string{groups.ReadCommitted, groups.ReadUncommitted}, groups.ReadUncommitted, 60},
		{[]string{"", ""}, groups.ReadUncommitted, 60},
		{nil, groups.ReadUncommitted, 60},
	} {
		g := &fsm.Group{Name: "g", Members: map[string]*fsm.Member{}}
		for i, iso := range tc.isolations {
			g.Members[fmt.Sprint("m", i)] = &fsm.Member{ID: fmt.Sprint("m", i), Topics: []string{"t"}, Isolation: iso}
		}
		if got := isolationOf(g); got != tc.want {
			t.Errorf("members %q: isolation %s, want %s", tc.isolations, got, tc.want)
		}
		lags := s.lags(context.Background(), g, committed, true)
		if len(lags) != 1 || lags[0].Lag != tc.lag || lags[0].LastStable != 60 || lags[0].LogEnd != 100 {
			t.Errorf("members %q: lags %+v, want lag %d", tc.isolations, lags, tc.lag)
		}
	}
}

// TestOffsetsLogRefusesBadInput: a partition outside 0-49, or a bad from or
// limit, is refused with its code before anything is read.
func TestOffsetsLogRefusesBadInput(t *testing.T) {
	routes := (&Server{}).newRoutes()
	for _, tc := range []struct {
		path, query string
		want        protocol.Code
	}{
		{"/v1/offsets-log/50", "", protocol.UnknownTopicOrPartition},
		{"/v1/offsets-log/-1", "", protocol.UnknownTopicOrPartition},
		{"/v1/offsets-log/x", "", protocol.UnknownTopicOrPartition},
		{"/v1/offsets-log/3", "from=-5", protocol.InvalidRequest},
		{"/v1/offsets-log/3", "from=abc", protocol.InvalidRequest},
		{"/v1/offsets-log/3", "limit=-1", protocol.InvalidRequest},
	} {
		r, p, _ := routes.Lookup(http.MethodGet, tc.path)
		if r == nil || r.Pattern != "/v1/offsets-log/{partition}" {
			t.Fatalf("%s: route %+v", tc.path, r)
		}
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(tc.path + "?" + tc.query)
		err := (&Server{}).offsetsLog(context.Background(), &ctx, p)
		if protocol.CodeOf(err) != tc.want {
			t.Errorf("%s?%s: %v, want %v", tc.path, tc.query, err, tc.want)
		}
	}
}
