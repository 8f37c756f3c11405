package groups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/shares"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// startShareMember runs a share consumer process (sluice-sharemember); it
// is killed when the test ends.
func startShareMember(t *testing.T, c *localcluster.Cluster, name, group, topic string, args ...string) *itest.Member {
	t.Helper()
	return itest.StartMemberProc(t, "sluice-sharemember", name,
		append([]string{"-metadata", c.MetadataURL(), "-offsets", c.OffsetsURL(), "-group", group, "-topic", topic, "-client-id", name}, args...))
}

// TestShareGroupUnderKills: 8 share consumer processes take 100,000 records
// of 2 partitions, accepting, releasing and rejecting at random, while
// consumers, the offsets Raft leader (which holds the share-partition
// state) and a partition leader are killed with SIGKILL. Every record ends
// accepted or archived exactly once, no accepted record is delivered
// again, and delivery counts grow with each redelivery.
func TestShareGroupUnderKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	records := 100_000
	if n, err := strconv.Atoi(os.Getenv("SLUICE_SHARE_RECORDS")); err == nil && n > 0 {
		records = n
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "queue", 2, 3)
	itest.CreateTopic(t, ctx, c, "queue-dlt", 2, 3)
	itest.ConfigureShareGroup(t, ctx, c, "workers", map[string]string{shares.ConfigAutoOffsetReset: "earliest",
		shares.ConfigLockDurationMs: "2000", shares.ConfigDeliveryLimit: "4", shares.ConfigDeadLetterTopic: "queue-dlt"})
	itest.ProduceInRequests(t, c, "queue", "q", records, 5000)
	hws := map[int32]int64{}
	for p := range int32(2) {
		hws[p] = listOffset(t, ctx, c, "queue", p, protocol.TimestampLatest)
	}
	if hws[0]+hws[1] != int64(records) {
		t.Fatalf("high watermarks %v, want %d records in all", hws, records)
	}

	args := []string{"-accept", "0.8", "-release", "0.15", "-max-records", "200"}
	var members []*itest.Member
	start := func(i int) {
		members = append(members, startShareMember(t, c, fmt.Sprintf("sm-%d", i), "workers", "queue", append(args, "-seed", strconv.Itoa(i))...))
	}
	for i := range 8 {
		start(i)
	}
	sc := shares.NewClient(c.OffsetsURLs())
	progress := func() int64 {
		d, err := sc.Describe(ctx, "workers")
		if err != nil {
			return -1
		}
		var done int64
		for _, p := range d.Partitions {
			done += p.Accepted + p.Archived
		}
		return done
	}
	waitProgress := func(at int64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for progress() < at {
			if time.Now().After(deadline) {
				d, err := sc.Describe(ctx, "workers")
				t.Fatalf("the group did not reach %d records done (at %d): %+v, %v", at, progress(), d, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if d, err := sc.Describe(ctx, "workers"); err == nil {
			for _, p := range d.Partitions {
				t.Logf("%d done: partition %d at %d (in flight to %d of %d): %d acquired, %d available, %d accepted, %d archived, %d deliveries",
					at, p.Partition, p.StartOffset, p.EndOffset, p.HighWatermark, p.Acquired, p.Available, p.Accepted, p.Archived, p.Deliveries)
			}
		}
	}
	n := int64(records)
	waitProgress(n / 10)
	members[0].Kill()
	members[1].Kill()
	t.Logf("killed 2 consumers at %d records done", progress())
	start(8)
	start(9)
	waitProgress(n * 3 / 10)
	leader := itest.OffsetsLeader(t, c)
	c.StopProc(leader, true)
	t.Logf("killed the offsets leader %s", leader.Name)
	waitProgress(n * 5 / 10)
	storageLeader, _ := itest.LeaderOf(t, ctx, c, "queue", 0)
	c.StopProc(c.Proc("storage-"+strconv.Itoa(int(storageLeader))), true)
	t.Logf("killed storage-%d, the leader of queue-0, at %d records done", storageLeader, progress())
	members[2].Kill()
	start(10)
	waitProgress(n)
	for _, m := range members {
		m.Stop()
	}

	d, err := sc.Describe(ctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	var accepted, archived int64
	for _, p := range d.Partitions {
		if p.StartOffset != hws[p.Partition] || p.Lag != 0 || p.Acquired != 0 {
			t.Errorf("partition %d at the end: %+v; want everything up to %d done", p.Partition, p, hws[p.Partition])
		}
		accepted += p.Accepted
		archived += p.Archived
	}
	if accepted+archived != n {
		t.Fatalf("accepted %d + archived %d = %d, want every one of the %d records done exactly once", accepted, archived, accepted+archived, n)
	}
	confirmed := checkShareLogs(t, n, accepted, archived, 4, members...)
	checkDeadLetters(t, ctx, c, "queue-dlt", "workers", archived, 4, confirmed)
}

// checkDeadLetters reads a dead-letter topic and checks that it holds each
// archived record once, with the headers naming its source, none of them
// an accepted record, every confirmed reject among them.
func checkDeadLetters(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic, group string, archived int64, limit int, confirmed shareOutcome) {
	t.Helper()
	type key = shareKey
	seen := map[key]bool{}
	reasons := map[string]int{}
	for p := range int32(2) {
		for _, r := range readPartition(t, ctx, c, topic, p) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			part, _ := strconv.Atoi(h[shares.HeaderSourcePartition])
			off, _ := strconv.ParseInt(h[shares.HeaderSourceOffset], 10, 64)
			count, _ := strconv.Atoi(h[shares.HeaderDeliveryCount])
			k := key{int32(part), off}
			switch {
			case h[shares.HeaderSourceTopic] != "queue" || h[shares.HeaderGroup] != group:
				t.Fatalf("dead letter at %s-%d offset %d names source %q and group %q", topic, p, r.Offset, h[shares.HeaderSourceTopic], h[shares.HeaderGroup])
			case seen[k]:
				t.Fatalf("queue-%d offset %d is twice in the dead-letter topic", k.p, k.o)
			case confirmed.accepted[k]:
				t.Fatalf("queue-%d offset %d is in the dead-letter topic though its accept was confirmed", k.p, k.o)
			case count < 1 || count > limit:
				t.Fatalf("queue-%d offset %d: delivery count header %q", k.p, k.o, h[shares.HeaderDeliveryCount])
			case string(r.Key) != string(r.Value) || len(r.Value) == 0:
				t.Fatalf("queue-%d offset %d: dead letter key %q value %q, want the record's own", k.p, k.o, r.Key, r.Value)
			case int(p) != part%2:
				t.Fatalf("queue-%d offset %d went to dead-letter partition %d", k.p, k.o, p)
			}
			seen[k] = true
			reasons[h[shares.HeaderReason]]++
		}
	}
	if int64(len(seen)) != archived {
		t.Fatalf("the dead-letter topic holds %d records; the group archived %d", len(seen), archived)
	}
	for k := range confirmed.rejected {
		if !seen[k] {
			t.Fatalf("queue-%d offset %d: a confirmed reject is not in the dead-letter topic", k.p, k.o)
		}
	}
	t.Logf("dead-letter topic: %d records, reasons %v", len(seen), reasons)
}

// readPartition reads a partition from its start to its high watermark.
func readPartition(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, p int32) []record.Record {
	t.Helper()
	pool := storageclient.NewPool("test-read")
	defer pool.Close()
	r := client.NewPartitionReader(client.NewMetadata(client.NewAdmin(c.MetadataURLs())), pool, topic, p, 0, client.ReaderConfig{MaxWait: 50 * time.Millisecond})
	hw := listOffset(t, ctx, c, topic, p, protocol.TimestampLatest)
	var out []record.Record
	for r.Offset() < hw {
		recs, err := r.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out
}

// checkShareLogs checks what the share members reported against the
// group's totals: no record confirmed accepted twice, or delivered after
// its accept was confirmed; delivery counts that grow with each delivery
// and stay within the limit; and accepted counts that the confirmed and
// unconfirmed acknowledgements explain.
// shareKey is a record of a share test: partition and offset.
type shareKey struct {
	p int32
	o int64
}

// shareOutcome is what share members confirmed.
type shareOutcome struct {
	accepted, rejected map[shareKey]bool
}

func checkShareLogs(t *testing.T, records, accepted, archived int64, limit int16, members ...*itest.Member) shareOutcome {
	t.Helper()
	type key = shareKey
	out := shareOutcome{accepted: map[key]bool{}, rejected: map[key]bool{}}
	var all []itest.MemberEvent
	for _, m := range members {
		ev, _ := m.Snapshot()
		all = append(all, ev...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time < all[j].Time })
	confirmedAccept := map[key]int64{} // the time of the confirmation
	intents := map[key]string{}        // the last intent sent, until confirmed
	lastCount := map[key]int16{}
	var confirmedAccepts, confirmedRejects, unconfirmedAccepts, redelivered int64
	for _, e := range all {
		k := key{e.Partition, e.Offset}
		switch e.Ev {
		case "rec":
			if at, ok := confirmedAccept[k]; ok {
				t.Fatalf("queue-%d offset %d was delivered again (count %d) after its accept was confirmed at %d", e.Partition, e.Offset, e.Count, at)
			}
			if e.Count <= lastCount[k] || e.Count > limit {
				t.Fatalf("queue-%d offset %d delivered with count %d after count %d (limit %d)", e.Partition, e.Offset, e.Count, lastCount[k], limit)
			}
			if e.Count > 1 {
				redelivered++
			}
			lastCount[k] = e.Count
			delete(intents, k)
		case "intent":
			intents[k] = e.Ack
		case "acked":
			delete(intents, k)
			switch e.Ack {
			case "accept":
				if _, dup := confirmedAccept[k]; dup {
					t.Fatalf("queue-%d offset %d: accept confirmed twice", e.Partition, e.Offset)
				}
				confirmedAccept[k] = e.Time
				out.accepted[k] = true
				confirmedAccepts++
			case "reject":
				out.rejected[k] = true
				confirmedRejects++
			}
		case "refused":
			delete(intents, k)
		}
	}
	for _, a := range intents {
		if a == "accept" {
			unconfirmedAccepts++
		}
	}
	t.Logf("%d records: %d accepted, %d archived; members confirmed %d accepts and %d rejects, %d accepts unconfirmed (killed or cut off); %d redeliveries seen",
		records, accepted, archived, confirmedAccepts, confirmedRejects, unconfirmedAccepts, redelivered)
	if accepted < confirmedAccepts || accepted > confirmedAccepts+unconfirmedAccepts {
		t.Fatalf("the group counts %d accepted; the members confirmed %d and may have had %d more applied", accepted, confirmedAccepts, unconfirmedAccepts)
	}
	if archived < confirmedRejects {
		t.Fatalf("the group counts %d archived, fewer than the %d rejects confirmed", archived, confirmedRejects)
	}
	if redelivered == 0 {
		t.Fatal("no record was delivered twice, though a share of them were released")
	}
	return out
}

// TestShareGroupLocksAndAcks: records held by a consumer that stops
// acknowledging go to another after the lock duration, with their delivery
// count raised; the first consumer's late acknowledgements, and
// acknowledgements of records never acquired, are refused and change
// nothing. The configuration and reset commands are checked too.
func TestShareGroupLocksAndAcks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "locks", 1, 3)
	itest.ConfigureShareGroup(t, ctx, c, "lg", map[string]string{shares.ConfigAutoOffsetReset: "earliest", shares.ConfigLockDurationMs: "1500"})
	itest.ProduceValues(t, c, "locks", "l", 20)
	consumer := func(name string) *client.ShareConsumer {
		sc, err := client.NewShareConsumer(client.ShareConsumerConfig{Metadata: c.MetadataURLs(), Offsets: c.OffsetsURLs(),
			Group: "lg", Topic: "locks", MemberID: name, MaxRecords: 10, MaxWait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sc.Close(context.Background()) })
		return sc
	}
	a, b := consumer("a"), consumer("b")
	acquiredAt := time.Now() // no later than the coordinator's clock when it locked them
	held, err := a.Poll(ctx)
	if err != nil || len(held) != 10 || held[0].Offset != 0 || held[0].DeliveryCount != 1 {
		t.Fatalf("a's first poll: %d records (%v), want offsets 0-9 at delivery 1", len(held), err)
	}
	second, err := b.Poll(ctx)
	if err != nil || len(second) != 10 || second[0].Offset != 10 {
		t.Fatalf("b's first poll: %d records (%v), want offsets 10-19", len(second), err)
	}
	for _, r := range second {
		b.Acknowledge(r, shares.AckAccept)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// b acknowledges a's records: refused.
	b.Acknowledge(held[0], shares.AckAccept)
	var refused *client.AckRefusedError
	if err := b.Commit(ctx); !errors.As(err, &refused) || protocol.CodeOf(refused.Refused[groups.TP{Topic: "locks"}]) != protocol.InvalidRecordState {
		t.Fatalf("acknowledging another consumer's record: %v", err)
	}
	// Records never acquired, and accepted ones acknowledged again.
	sh := shares.NewClient(c.OffsetsURLs())
	before, err := sh.Describe(ctx, "lg")
	if err != nil {
		t.Fatal(err)
	}
	for _, ack := range []shares.Ack{{Topic: "locks", FirstOffset: 20, LastOffset: 25, Type: shares.AckAccept}, {Topic: "locks", FirstOffset: 10, LastOffset: 10, Type: shares.AckAccept}} {
		resp, err := sh.Ack(ctx, "lg", shares.AckRequest{MemberID: "b", Acks: []shares.Ack{ack}})
		if err != nil || len(resp.Results) != 1 || protocol.Code(resp.Results[0].ErrorCode) != protocol.InvalidRecordState {
			t.Fatalf("acknowledging %d-%d: %+v, %v", ack.FirstOffset, ack.LastOffset, resp, err)
		}
	}
	// b waits for a's records; they come once a's lock expired.
	var redelivered []client.ShareRecord
	for len(redelivered) < 10 && ctx.Err() == nil {
		recs, err := b.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		redelivered = append(redelivered, recs...)
	}
	after := time.Since(acquiredAt)
	if after < 1500*time.Millisecond || redelivered[0].Offset != 0 || redelivered[0].DeliveryCount != 2 {
		t.Fatalf("b got a's records after %v, first %d at delivery %d; want offset 0 at delivery 2 after the 1.5 s lock", after, redelivered[0].Offset, redelivered[0].DeliveryCount)
	}
	t.Logf("records of a consumer that stopped acknowledging went to another after %v (lock 1.5 s)", after)
	mid, err := sh.Describe(ctx, "lg")
	if err != nil {
		t.Fatal(err)
	}
	if mid.Partitions[0].Accepted != before.Partitions[0].Accepted || mid.Partitions[0].StartOffset != 0 {
		t.Fatalf("refused acknowledgements changed the state: %+v then %+v", before.Partitions[0], mid.Partitions[0])
	}
	// a's acknowledgement is late: refused, the records stay b's.
	for _, r := range held {
		a.Acknowledge(r, shares.AckAccept)
	}
	if err := a.Commit(ctx); !errors.As(err, &refused) {
		t.Fatalf("a's late acknowledgement: %v", err)
	}
	for _, r := range redelivered {
		b.Acknowledge(r, shares.AckAccept)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := sh.Describe(ctx, "lg")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.StartOffset != 20 || p.Accepted != 20 || p.Deliveries != 30 || p.Lag != 0 {
		t.Fatalf("at the end: %+v; want start 20, 20 accepted, 30 deliveries, no lag", p)
	}
	// The offsets leader exports the same figures.
	leader := itest.OffsetsLeader(t, c)
	resp, err := http.Get("http://" + leader.AdminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sluice_offsets_share_group_accepted_total{group="lg",partition="0",topic="locks"} 20`,
		`sluice_offsets_share_group_deliveries_total{group="lg",partition="0",topic="locks"} 30`,
		`sluice_offsets_share_group_lag{group="lg",partition="0",topic="locks"} 0`} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("the offsets leader's metrics lack %s", want)
		}
	}
	if _, err := sh.Reset(ctx, "lg", shares.ResetRequest{Topic: "locks", To: groups.ResetOffset, Offset: 5}); err != nil {
		t.Fatal(err)
	}
	again, err := a.Poll(ctx)
	if err != nil || len(again) == 0 || again[0].Offset != 5 || again[0].DeliveryCount != 1 {
		t.Fatalf("after a reset to 5: %d records (%v)", len(again), err)
	}

	// sluicectl: list, describe, a refused reset and delete while a holds
	// records, then both once it left.
	if out := itest.MustSluicectl(t, c, "share-group", "list"); !strings.Contains(out, "lg") {
		t.Fatalf("share-group list:\n%s", out)
	}
	out := itest.MustSluicectl(t, c, "share-group", "describe", "lg")
	for _, want := range []string{"share.record.lock.duration.ms=1500", "ACQUIRED", "Members holding records: a"} {
		if !strings.Contains(out, want) {
			t.Fatalf("share-group describe lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"share-group", "reset-offsets", "lg", "--topic", "locks", "--to-latest"}, {"share-group", "delete", "lg"}} {
		if _, stderr, code := itest.Sluicectl(t, c, "", args...); code == 0 || !strings.Contains(stderr, "NON_EMPTY_GROUP") {
			t.Fatalf("%v while a holds records: exit %d, %s", args, code, stderr)
		}
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if out := itest.MustSluicectl(t, c, "share-group", "reset-offsets", "lg", "--topic", "locks", "--to-latest"); !strings.Contains(out, "20") {
		t.Fatalf("share-group reset-offsets --to-latest:\n%s", out)
	}
	d, err = sh.Describe(ctx, "lg")
	if err != nil || d.Partitions[0].StartOffset != 20 || d.Partitions[0].Available != 0 {
		t.Fatalf("after reset-offsets --to-latest: %+v, %v", d, err)
	}
	itest.MustSluicectl(t, c, "share-group", "config", "lg", "share.delivery.count.limit=3")
	if d, err := sh.Describe(ctx, "lg"); err != nil || d.Config[shares.ConfigDeliveryLimit] != "3" {
		t.Fatalf("after config: %+v, %v", d, err)
	}
	if _, stderr, code := itest.Sluicectl(t, c, "", "share-group", "config", "lg", "share.delivery.count.limit=99"); code == 0 || !strings.Contains(stderr, "INVALID_CONFIG") {
		t.Fatalf("an out-of-range delivery limit: exit %d, %s", code, stderr)
	}
	itest.MustSluicectl(t, c, "share-group", "delete", "lg")
	if _, err := sh.Describe(ctx, "lg"); protocol.CodeOf(err) != protocol.GroupIDNotFound {
		t.Fatalf("describe after delete: %v", err)
	}
}

// listOffset asks a partition's leader for an offset (protocol.TimestampLatest:
// the high watermark).
func listOffset(t *testing.T, ctx context.Context, c *localcluster.Cluster, topic string, p int32, ts int64) int64 {
	t.Helper()
	pool := storageclient.NewPool("test-list-offset")
	defer pool.Close()
	off, err := client.ListOffset(ctx, client.NewMetadata(client.NewAdmin(c.MetadataURLs())), pool, topic, p, ts)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

// TestShareGroupHTTPWithCurl drives the frontend's queue API with curl:
// two members acquire disjoint records, acknowledge them (one releases a
// record, which the other then gets at delivery 2), and a bad
// acknowledgement is refused with INVALID_RECORD_STATE.
func TestShareGroupHTTPWithCurl(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	itest.NeedTool(t, "curl", "curl")
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	itest.CreateTopic(t, ctx, c, "httpq", 2, 3)
	itest.ProduceValues(t, c, "httpq", "h", 10)
	curl := func(out any, path string, body string) {
		t.Helper()
		args := []string{"-sS", "-X", "POST", c.FrontendURL() + path}
		if body != "" {
			args = append(args, "-H", "Content-Type: application/json", "-d", body)
		}
		b, err := exec.CommandContext(ctx, "curl", args...).Output()
		if err != nil {
			t.Fatalf("curl %s: %v", path, err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("curl %s answered %s: %v", path, b, err)
		}
	}
	type shared struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		Offset        int64  `json:"offset"`
		DeliveryCount int16  `json:"delivery_count"`
		Value         string `json:"value"`
	}
	type acquired struct {
		MemberID    string   `json:"member_id"`
		LockUntilMs int64    `json:"lock_until_ms"`
		Records     []shared `json:"records"`
		ErrorCode   int      `json:"error_code"`
		Error       string   `json:"error"`
	}
	curl(&struct{}{}, "/v1/share-groups/hq/config", `{"set":{"share.auto.offset.reset":"earliest"}}`)
	var a, b acquired
	curl(&a, "/v1/share-groups/hq/records?topic=httpq&max=6&member=alice", "")
	curl(&b, "/v1/share-groups/hq/records?topic=httpq&max=6", "")
	if a.MemberID != "alice" || len(a.Records) != 6 || a.LockUntilMs <= time.Now().Add(-time.Minute).UnixMilli() {
		t.Fatalf("alice acquired %+v", a)
	}
	if b.MemberID == "" || len(b.Records) != 4 {
		t.Fatalf("the second member acquired %+v; want the other 4 records and a member id", b)
	}
	seen := map[string]bool{}
	for _, r := range append(a.Records, b.Records...) {
		if seen[r.Value] || r.DeliveryCount != 1 || r.Topic != "httpq" {
			t.Fatalf("record %+v delivered twice or at the wrong count", r)
		}
		seen[r.Value] = true
	}
	ack := func(member string, r shared, typ string) shares.AckResponse {
		var resp shares.AckResponse
		body := fmt.Sprintf(`{"member_id":%q,"acks":[{"topic":"httpq","partition":%d,"first_offset":%d,"last_offset":%d,"type":%s}]}`,
			member, r.Partition, r.Offset, r.Offset, typ)
		curl(&resp, "/v1/share-groups/hq/acks", body)
		return resp
	}
	// alice releases her first record and accepts the rest; the second
	// member acknowledging alice's record is refused.
	if r := ack(b.MemberID, a.Records[1], "1"); len(r.Results) != 1 || protocol.Code(r.Results[0].ErrorCode) != protocol.InvalidRecordState {
		t.Fatalf("acknowledging another member's record: %+v", r)
	}
	if r := ack("alice", a.Records[0], "2"); r.Results[0].ErrorCode != 0 {
		t.Fatalf("release: %+v", r)
	}
	for _, rec := range a.Records[1:] {
		if r := ack("alice", rec, "1"); r.Results[0].ErrorCode != 0 {
			t.Fatalf("accept: %+v", r)
		}
	}
	if r := ack("alice", a.Records[1], "1"); protocol.Code(r.Results[0].ErrorCode) != protocol.InvalidRecordState {
		t.Fatalf("accepting a record twice: %+v", r)
	}
	var again acquired
	curl(&again, "/v1/share-groups/hq/records?topic=httpq&member="+b.MemberID+"&wait_ms=2000", "")
	if len(again.Records) != 1 || again.Records[0].Value != a.Records[0].Value || again.Records[0].DeliveryCount != 2 {
		t.Fatalf("after alice released a record the other member got %+v", again)
	}
	var bad acquired
	curl(&bad, "/v1/share-groups/hq/records?topic=no-such-topic", "")
	if bad.ErrorCode != int(protocol.UnknownTopicOrPartition) {
		t.Fatalf("acquiring from a missing topic: %+v", bad)
	}
	var d shares.Description
	b2, err := exec.CommandContext(ctx, "curl", "-sS", c.FrontendURL()+"/v1/share-groups/hq").Output()
	if err != nil || json.Unmarshal(b2, &d) != nil {
		t.Fatalf("describe through the frontend: %s, %v", b2, err)
	}
	var accepted int64
	for _, p := range d.Partitions {
		accepted += p.Accepted
	}
	if accepted != 5 {
		t.Fatalf("the group counts %d accepted, want 5: %+v", accepted, d)
	}
}
