package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecords are n bytes of records; released records count.
type testRecords struct {
	n        int
	released *int
}

func (r testRecords) Len() int                { return r.n }
func (r testRecords) WriteTo(w *Writer) error { return nil }
func (r testRecords) Release()                { *r.released++ }

// fetchOf is a fetch of version v in session id at epoch, of the topics'
// partitions at the given offsets (topic "a" is id {1}, "b" id {2}).
func fetchOf(v int16, id, epoch int32, parts map[string]map[int32]int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.SessionID, r.SessionEpoch = v, id, epoch
	for _, name := range []string{"a", "b"} {
		ps, ok := parts[name]
		if !ok {
			continue
		}
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = name, [16]byte{name[0] - 'a' + 1}
		for _, p := range []int32{0, 1, 2, 3} {
			if off, ok := ps[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				t.Partitions = append(t.Partitions, rp)
			}
		}
		r.Topics = append(r.Topics, t)
	}
	return r
}

// answer is what a handler answers for every partition of r: hw as the
// high watermark, records for those in withRecords.
func answer(r *kmsg.FetchRequest, hw int64, withRecords map[string]int32, released *int) *FetchBody {
	body := &FetchBody{Version: r.Version}
	for _, rt := range r.Topics {
		ft := FetchTopic{Topic: rt.Topic, TopicID: rt.TopicID}
		for _, rp := range rt.Partitions {
			p := NewFetchPartition(rp.Partition)
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = hw, hw, 0
			if want, ok := withRecords[rt.Topic]; ok && want == rp.Partition {
				p.Records = testRecords{n: 10, released: released}
			}
			ft.Partitions = append(ft.Partitions, p)
		}
		body.Topics = append(body.Topics, ft)
	}
	return body
}

// listed is what an answer names: topic/partition pairs in order.
func listed(body *FetchBody) []string {
	var out []string
	for _, t := range body.Topics {
		for _, p := range t.Partitions {
			out = append(out, t.Topic+string(rune('0'+p.Partition)))
		}
	}
	return out
}

func requested(r *kmsg.FetchRequest) map[string]int64 {
	out := map[string]int64{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[t.Topic+string(rune('0'+p.Partition))] = p.FetchOffset
		}
	}
	return out
}

// TestFetchSessionIncremental: a full fetch opens a session; an
// incremental one names only what changed and is answered as a fetch of
// every partition at the offsets the client last gave, its answer keeping
// only partitions with news (records, a moved high watermark), those with
// records moving to the end; forgotten partitions leave; a final fetch
// closes the session.
func TestFetchSessionIncremental(t *testing.T) {
	fs := NewFetchSessions(DefaultFetchSessionsConfig(), nil)
	released := 0
	first := fetchOf(12, 0, 0, map[string]map[int32]int64{"a": {0: 5, 1: 7}, "b": {0: 9}})
	r, use, refused := fs.Begin(first, "alice")
	if refused != nil || r != first {
		t.Fatalf("a full fetch: %v", refused)
	}
	body := answer(r, 100, nil, &released)
	use.Finish(body)
	if body.SessionID == 0 || len(listed(body)) != 3 {
		t.Fatalf("the full answer: session %d, partitions %v", body.SessionID, listed(body))
	}
	id := body.SessionID

	// Only a0 moved, and has records; the high watermark is the same.
	inc := fetchOf(12, id, 1, map[string]map[int32]int64{"a": {0: 6}})
	r, use, refused = fs.Begin(inc, "alice")
	if refused != nil {
		t.Fatal("incremental fetch refused")
	}
	if got := requested(r); len(got) != 3 || got["a0"] != 6 || got["a1"] != 7 || got["b0"] != 9 {
		t.Fatalf("the incremental fetch read as %v", got)
	}
	body = answer(r, 100, map[string]int32{"a": 0}, &released)
	use.Finish(body)
	if got := listed(body); len(got) != 1 || got[0] != "a0" || body.SessionID != id {
		t.Fatalf("the incremental answer names %v (session %d), want a0 alone", got, body.SessionID)
	}

	// A moved high watermark is news for every partition; a0, which had
	// records, now comes last.
	r, use, _ = fs.Begin(fetchOf(12, id, 2, nil), "alice")
	body = answer(r, 101, nil, &released)
	use.Finish(body)
	if got := listed(body); len(got) != 3 || got[0] != "a1" || got[1] != "b0" || got[2] != "a0" {
		t.Fatalf("after a high watermark moved: %v, want every partition, a0 last", got)
	}

	// Forgetting a1; records of an unchanged partition are never dropped,
	// but an empty one is.
	forget := fetchOf(12, id, 3, nil)
	ft := kmsg.NewFetchRequestForgottenTopic()
	ft.Topic, ft.Partitions = "a", []int32{1}
	forget.ForgottenTopics = append(forget.ForgottenTopics, ft)
	r, use, _ = fs.Begin(forget, "alice")
	if got := requested(r); len(got) != 2 || got["a1"] != 0 {
		t.Fatalf("after forgetting a1 the session reads %v", got)
	}
	body = answer(r, 101, nil, &released)
	use.Finish(body)
	if len(listed(body)) != 0 {
		t.Fatalf("nothing new, yet the answer names %v", listed(body))
	}

	// The final epoch closes it.
	if _, _, refused = fs.Begin(fetchOf(12, id, -1, map[string]map[int32]int64{"a": {0: 6}}), "alice"); refused != nil {
		t.Fatal("a final fetch refused")
	}
	if n, _ := fs.Stats(); n != 0 {
		t.Fatalf("%d sessions after the final fetch", n)
	}
	if released != 0 {
		t.Fatalf("%d records released; a partition with records is always answered", released)
	}
}

// TestFetchSessionRefusals: an unknown session, another principal's, a
// wrong epoch and a change between topic names and ids are refused with
// Kafka's codes and change nothing.
func TestFetchSessionRefusals(t *testing.T) {
	fs := NewFetchSessions(DefaultFetchSessionsConfig(), nil)
	r, use, _ := fs.Begin(fetchOf(13, 0, 0, map[string]map[int32]int64{"a": {0: 1}}), "alice")
	body := answer(r, 5, nil, new(int))
	use.Finish(body)
	id := body.SessionID
	for name, tc := range map[string]struct {
		r         *kmsg.FetchRequest
		principal string
		code      int16
	}{
		"unknown session":   {fetchOf(13, id+1, 1, nil), "alice", codeFetchSessionNotFound},
		"other principal":   {fetchOf(13, id, 1, nil), "bob", codeFetchSessionNotFound},
		"epoch ahead":       {fetchOf(13, id, 5, nil), "alice", codeInvalidFetchSessionEpoch},
		"names, not ids":    {fetchOf(12, id, 1, nil), "alice", codeFetchSessionTopicIDError},
		"no session, epoch": {fetchOf(13, 0, 3, nil), "alice", codeFetchSessionNotFound},
	} {
		_, _, refused := fs.Begin(tc.r, tc.principal)
		if refused == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if got := refused.Body.(*FetchBody).ErrorCode; got != tc.code {
			t.Errorf("%s: code %d, want %d", name, got, tc.code)
		}
	}
	if _, _, refused := fs.Begin(fetchOf(13, id, 1, nil), "alice"); refused != nil {
		t.Fatal("the session's next fetch was refused after the refusals")
	}
	// Before v7 there are no sessions.
	old := fetchOf(6, 0, 0, map[string]map[int32]int64{"a": {0: 1}})
	r, use, refused := fs.Begin(old, "alice")
	body = answer(r, 5, nil, new(int))
	use.Finish(body)
	if refused != nil || body.SessionID != 0 {
		t.Fatalf("a v6 fetch: %v, session %d", refused, body.SessionID)
	}
}

// TestFetchSessionSlots: a full cache answers without a session, evicts a
// session idle for EvictAfter, and otherwise lets a larger session take
// the smallest one's slot.
func TestFetchSessionSlots(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := NewFetchSessions(FetchSessionsConfig{Slots: 2, EvictAfter: time.Minute}, nil)
	fs.now = func() time.Time { return now }
	open := func(parts map[int32]int64) int32 {
		r, use, _ := fs.Begin(fetchOf(12, 0, 0, map[string]map[int32]int64{"a": parts}), "alice")
		body := answer(r, 5, nil, new(int))
		use.Finish(body)
		return body.SessionID
	}
	small := open(map[int32]int64{0: 0})
	now = now.Add(10 * time.Second)
	big := open(map[int32]int64{0: 0, 1: 0, 2: 0})
	if small == 0 || big == 0 {
		t.Fatal("sessions not opened below the limit")
	}
	now = now.Add(10 * time.Second)
	if id := open(map[int32]int64{0: 0}); id != 0 {
		t.Fatalf("a full cache gave a session of one partition (%d) without an idle or smaller one to evict", id)
	}
	if id := open(map[int32]int64{0: 0, 1: 0}); id == 0 {
		t.Fatal("a session of two partitions did not take the slot of the one-partition session")
	}
	if _, _, refused := fs.Begin(fetchOf(12, small, 1, nil), "alice"); refused == nil {
		t.Fatal("the evicted session still answers")
	}
	now = now.Add(2 * time.Minute) // every session idle past EvictAfter
	if id := open(map[int32]int64{0: 0}); id == 0 {
		t.Fatal("an idle session was not evicted for a new one")
	}
	if n, evicted := fs.Stats(); n != 2 || evicted != 2 {
		t.Fatalf("%d sessions, %d evicted; want 2 and 2", n, evicted)
	}
	if NewFetchSessions(FetchSessionsConfig{}, nil).open(fetchOf(12, 0, 0, nil), "x", false) != nil {
		t.Fatal("a cache of no slots opened a session")
	}
}

// TestConfigRefusesBadFetchSessionFlags: negative or absurd session
// settings are refused with a reason naming them.
func TestConfigRefusesBadFetchSessionFlags(t *testing.T) {
	for _, mod := range []func(*Config){
		func(c *Config) { c.FetchSessions.Slots = -1 },
		func(c *Config) { c.FetchSessions.Slots = 2_000_000 },
		func(c *Config) { c.FetchSessions.EvictAfter = -time.Second },
	} {
		c := DefaultConfig("127.0.0.1:9092")
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "fetch session") {
			t.Errorf("%+v: %v", c.FetchSessions, err)
		}
	}
	if err := DefaultConfig("127.0.0.1:9092").Validate(); err != nil {
		t.Fatal(err)
	}
}
