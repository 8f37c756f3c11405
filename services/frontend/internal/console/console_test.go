package console

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/shares"
)

// row returns the HTML of the first table row whose opening tag holds attr.
func row(t *testing.T, p answer, attr string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr[^>]*` + regexp.QuoteMeta(attr) + `[^>]*>.*?</tr>`).FindString(p.body)
	if m == "" {
		t.Fatalf("no row with %s in:\n%s", attr, p.body)
	}
	return m
}

// TestOverview: the overview shows the cluster, its nodes with addresses,
// and each topic with its partitions, replication factor, and the size and
// records its leaders report ("—" when none reports).
func TestOverview(t *testing.T) {
	e := newEnv(t, 2)
	e.md.AddTopic("orders", 1, 2)
	e.md.AddTopic("audit", 1)
	e.produce(t, 0, "orders", 0, 3)
	e.produce(t, 1, "orders", 1, 2)
	e.startWatching(t)

	p := e.get(t, "/console")
	if p.status != http.StatusOK {
		t.Fatalf("status %d: %s", p.status, p.body)
	}
	if ct := p.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("content security policy %q", csp)
	}
	p.mustContain(t, `<meta http-equiv="refresh" content="5">`, "Cluster fake", `id="nodes-alive">2 of 2`,
		e.nodes[0].Addr(), e.nodes[1].Addr(), "public.example:9001", `id="partitions">3`, `id="under-replicated">0`, `id="offline">0`)
	if strings.Contains(p.body, "banner") && strings.Contains(p.body, `role="alert"`) {
		t.Fatalf("error banner on a healthy cluster:\n%s", p.body)
	}
	orders := row(t, p, `data-topic="orders"`)
	for _, want := range []string{`<a href="/console/topics/orders">orders</a>`, `<td class="num">2</td>`, `<td class="num">5</td>`, " B</td>"} {
		if !strings.Contains(orders, want) {
			t.Fatalf("orders row lacks %q: %s", want, orders)
		}
	}
	// The fake node holds no log of audit until something touches it: no
	// leader reports the partition.
	// Neither topic is tiered: no remote bytes ("—") either.
	if audit := row(t, p, `data-topic="audit"`); strings.Count(audit, "—") != 3 {
		t.Fatalf("audit row should show unknown size and records, and no remote bytes: %s", audit)
	}
	if strings.Index(p.body, `data-topic="audit"`) > strings.Index(p.body, `data-topic="orders"`) {
		t.Fatal("topics are not in name order")
	}
	for _, forbidden := range []string{"<script", "<link", "<img", "http://", "https://"} {
		if strings.Contains(p.body, forbidden) {
			t.Fatalf("page holds %q: it must load nothing", forbidden)
		}
	}
}

// TestTopicPage: every partition with its leader, epoch, replicas, ISR and
// the leader's log range, high watermark and size; under-replicated and
// offline partitions are marked; every replica with its lag behind the
// leader; config values are escaped.
func TestTopicPage(t *testing.T) {
	e := newEnv(t, 2)
	e.md.Update(func(s *cluster.Snapshot) {
		s.Topics = append(s.Topics, cluster.Topic{Name: "orders", ID: "t-1", ReplicationFactor: 2,
			Config: map[string]string{"retention.ms": "1000", "note": "<script>alert(1)</script>"},
			Partitions: []cluster.Partition{
				{ID: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 4},
				{ID: 1, Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 1},
				{ID: 2, Replicas: []int32{1, 2}, ISR: []int32{}, Leader: -1, LeaderEpoch: 7},
			}})
	})
	e.produce(t, 0, "orders", 0, 4)
	e.produce(t, 1, "orders", 0, 1) // the follower of partition 0 is 3 behind
	e.produce(t, 1, "orders", 1, 6)
	e.startWatching(t)

	p := e.get(t, "/console/topics/orders")
	if p.status != http.StatusOK {
		t.Fatalf("status %d: %s", p.status, p.body)
	}
	p.mustContain(t, `<span id="topic-name">orders</span>`, "t-1", "retention.ms", "&lt;script&gt;alert(1)&lt;/script&gt;")
	if strings.Contains(p.body, "<script>") {
		t.Fatal("a config value reached the page unescaped")
	}
	p0 := row(t, p, `id="partition-0"`)
	for _, want := range []string{`class="ok"`, `data-leader="1"`, `<td class="num">4</td>`, "<td>1, 2</td><td>1, 2</td>", " B</td>"} {
		if !strings.Contains(p0, want) {
			t.Fatalf("partition 0 lacks %q: %s", want, p0)
		}
	}
	if p1 := row(t, p, `id="partition-1"`); !strings.Contains(p1, `class="under-replicated"`) || !strings.Contains(p1, `<td class="num">6</td>`) {
		t.Fatalf("partition 1 should be under-replicated with 6 records: %s", p1)
	}
	if p2 := row(t, p, `id="partition-2"`); !strings.Contains(p2, `class="offline"`) || !strings.Contains(p2, "none") || !strings.Contains(p2, "not reported by the leader") {
		t.Fatalf("partition 2 should be offline without a leader: %s", p2)
	}
	replicas := regexp.MustCompile(`(?s)<table id="replicas">.*?</table>`).FindString(p.body)
	follower := regexp.MustCompile(`(?s)<tr[^>]*>\s*<td class="num">0</td><td class="num">2</td>.*?</tr>`).FindString(replicas)
	if !strings.Contains(follower, "follower") || !strings.HasSuffix(strings.TrimSpace(strings.TrimSuffix(follower, "</tr>")), `<td class="num">3</td>`) {
		t.Fatalf("the follower of partition 0 should be 3 behind: %q", follower)
	}
}

// TestGroupPages: the groups with their total lag, and a group's partitions
// (in order, with committed offset, log end, lag, owner) and members.
func TestGroupPages(t *testing.T) {
	e := newEnv(t, 1)
	e.offsets.Describe(groups.Description{Group: "readers", State: groups.StateStable, GroupEpoch: 3, Assignor: groups.AssignorSticky,
		Members: []groups.MemberDescription{{MemberID: "m-1", ClientID: "app", MemberEpoch: 3, Topics: []string{"orders"},
			Assignment: []groups.TopicPartitions{{Topic: "orders", Partitions: []int32{1, 0}}}}},
		Partitions: []groups.PartitionLag{
			{Topic: "orders", Partition: 1, Owner: "m-1", Committed: 5, LogStart: 0, LogEnd: 9, Lag: 4},
			{Topic: "orders", Partition: 0, Owner: "m-1", Committed: 7, LogStart: 0, LogEnd: 10, Lag: 3},
		}, TotalLag: 7})
	e.offsets.Describe(groups.Description{Group: "idle", State: groups.StateEmpty, Members: []groups.MemberDescription{},
		Partitions: []groups.PartitionLag{{Topic: "audit", Partition: 0, Committed: 2, LogStart: -1, LogEnd: -1, Lag: -1, Error: "LEADER_NOT_AVAILABLE"}}})

	list := e.get(t, "/console/groups")
	if list.status != http.StatusOK {
		t.Fatalf("status %d: %s", list.status, list.body)
	}
	if r := row(t, list, `data-group="readers"`); !strings.Contains(r, `data-total-lag="7"`) || !strings.Contains(r, "stable") {
		t.Fatalf("readers row: %s", r)
	}
	row(t, list, `data-group="idle"`)
	if strings.Index(list.body, `data-group="idle"`) > strings.Index(list.body, `data-group="readers"`) {
		t.Fatal("groups are not in name order")
	}

	g := e.get(t, "/console/groups/readers")
	if g.status != http.StatusOK {
		t.Fatalf("status %d: %s", g.status, g.body)
	}
	g.mustContain(t, `id="total-lag" data-lag="7">7<`, "<code>m-1</code>", "orders: 0, 1", "sticky")
	p0, p1 := row(t, g, `data-partition="0"`), row(t, g, `data-partition="1"`)
	if !strings.Contains(p0, `data-lag="3"`) || !strings.Contains(p0, `<td class="num">7</td><td class="num">10</td><td class="num">3</td>`) {
		t.Fatalf("partition 0: %s", p0)
	}
	if !strings.Contains(p1, `data-lag="4"`) || strings.Index(g.body, `data-partition="1"`) < strings.Index(g.body, `data-partition="0"`) {
		t.Fatalf("partition 1 (after 0): %s", p1)
	}
	idle := e.get(t, "/console/groups/idle")
	if r := row(t, idle, `data-topic="audit"`); !strings.Contains(r, "—") || !strings.Contains(r, "LEADER_NOT_AVAILABLE") {
		t.Fatalf("a partition whose end is unknown: %s", r)
	}
	idle.mustContain(t, "No active members.")
}

func TestShareGroupPages(t *testing.T) {
	e := newEnv(t, 1)
	cfg := shares.DefaultConfig()
	cfg.DeadLetterTopic = "jobs-dlt"
	e.shares.descs["workers"] = shares.Description{Group: "workers", Config: cfg.Map(), Members: []string{"w-1"},
		Partitions: []shares.PartitionState{{Topic: "jobs", Partition: 0, StartOffset: 40, EndOffset: 52, HighWatermark: 60, Lag: 18,
			Acquired: 7, Available: 2, Delayed: 1, Accepted: 35, Archived: 5, DeadLetterPending: 2, Deliveries: 61}}}
	list := e.get(t, "/console/share-groups")
	if list.status != http.StatusOK {
		t.Fatalf("status %d: %s", list.status, list.body)
	}
	row(t, list, `data-group="workers"`)
	g := e.get(t, "/console/share-groups/workers")
	if g.status != http.StatusOK {
		t.Fatalf("status %d: %s", g.status, g.body)
	}
	g.mustContain(t, `id="total-lag" data-lag="18">18<`, `id="in-flight">12<`, "jobs-dlt", "share.record.lock.duration.ms")
	r := row(t, g, `data-partition="0"`)
	if !strings.Contains(r, `<td class="num">7</td><td class="num">2</td><td class="num">1</td>`) || !strings.Contains(r, `data-accepted="35"`) {
		t.Fatalf("partition row: %s", r)
	}
	if missing := e.get(t, "/console/share-groups/nope"); missing.status != http.StatusNotFound {
		t.Fatalf("an unknown share group: status %d", missing.status)
	}
}

// TestNotFound: unknown topics, groups and pages are 404 pages that say
// what is missing; /console/topics leads to the overview's topic list.
func TestNotFound(t *testing.T) {
	e := newEnv(t, 1)
	e.startWatching(t)
	for _, tc := range []struct{ path, says string }{
		{"/console/topics/nope", "There is no topic named nope in this cluster."},
		{"/console/topics/bad%20name", "may hold only ASCII letters"},
		{"/console/groups/nope", "There is no consumer group named nope"},
		{"/console/groups/bad%20name", "must be 1 to 249 characters"},
		{"/console/elsewhere", "There is no console page at /console/elsewhere."},
		{"/console/topics/orders/more", "There is no console page"},
	} {
		p := e.get(t, tc.path)
		if p.status != http.StatusNotFound || !strings.Contains(p.body, tc.says) {
			t.Fatalf("%s: %d, want 404 saying %q:\n%s", tc.path, p.status, tc.says, p.body)
		}
		if strings.Contains(p.body, "http-equiv") {
			t.Fatalf("%s: a 404 page must not reload itself", tc.path)
		}
	}
	if p := e.get(t, "/console/topics"); p.status != http.StatusFound || !strings.HasSuffix(p.header.Get("Location"), "/console#topics") {
		t.Fatalf("/console/topics: %d to %q", p.status, p.header.Get("Location"))
	}
}

// TestReadOnly: only GET and HEAD are served; any other method is a 405
// naming the allowed ones.
func TestReadOnly(t *testing.T) {
	e := newEnv(t, 1)
	e.startWatching(t)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, path := range []string{"/console", "/console/topics/orders", "/console/groups/g"} {
			p := e.do(t, method, path)
			if p.status != http.StatusMethodNotAllowed || p.header.Get("Allow") != "GET, HEAD" || !strings.Contains(p.body, "read-only") {
				t.Fatalf("%s %s: %d allow %q:\n%s", method, path, p.status, p.header.Get("Allow"), p.body)
			}
		}
	}
	p := e.do(t, http.MethodHead, "/console")
	if p.status != http.StatusOK || p.body != "" || !strings.HasPrefix(p.header.Get("Content-Type"), "text/html") {
		t.Fatalf("HEAD: %d %q %q", p.status, p.header.Get("Content-Type"), p.body)
	}
}

// TestStorageNodeDown: a storage node that refuses connections, and one that
// never answers, are named in banners; the page still renders, within the
// look-up timeout, with what the others reported.
func TestStorageNodeDown(t *testing.T) {
	e := newEnv(t, 2)
	silent := silentNode(t)
	e.md.Update(func(s *cluster.Snapshot) { s.Nodes = append(s.Nodes, cluster.Node{ID: 3, Addr: silent, Alive: true}) })
	e.md.AddTopic("orders", 1, 2, 3)
	e.produce(t, 0, "orders", 0, 3)
	e.nodes[1].Close()
	e.startWatching(t)

	start := time.Now()
	p := e.get(t, "/console")
	if took := time.Since(start); took > 4*testLookupTimeout {
		t.Fatalf("the overview took %v with a silent node (look-up timeout %v)", took, testLookupTimeout)
	}
	if p.status != http.StatusOK {
		t.Fatalf("status %d: %s", p.status, p.body)
	}
	p.mustContain(t, `role="alert">Storage node 2: describe replicas on `, `role="alert">Storage node 3: describe replicas on `+silent)
	if r := row(t, p, `data-topic="orders"`); !strings.Contains(r, "(1 of 3 partitions)") {
		t.Fatalf("orders should show the one partition reported: %s", r)
	}
	topic := e.get(t, "/console/topics/orders")
	if topic.status != http.StatusOK || !strings.Contains(row(t, topic, `id="partition-1"`), "not reported by the leader") {
		t.Fatalf("topic page: %d:\n%s", topic.status, topic.body)
	}
	topic.mustContain(t, `role="alert">Storage node 3`)
}

// TestOffsetsDown: an offsets service that fails, or never answers, makes
// the group pages 503 pages that name it, within the look-up timeout.
func TestOffsetsDown(t *testing.T) {
	e := newEnv(t, 1)
	for _, hang := range []bool{false, true} {
		e.offsets.SetDown(!hang)
		e.offsets.SetHang(hang)
		for _, path := range []string{"/console/groups", "/console/groups/readers"} {
			start := time.Now()
			p := e.get(t, path)
			if took := time.Since(start); took > 4*testLookupTimeout {
				t.Fatalf("%s took %v (look-up timeout %v)", path, took, testLookupTimeout)
			}
			if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, `role="alert">Offsets service: `) {
				t.Fatalf("%s (hang %v): %d:\n%s", path, hang, p.status, p.body)
			}
			if hang && !strings.Contains(p.body, "deadline exceeded") {
				t.Fatalf("%s: the banner should say the look-up timed out:\n%s", path, p.body)
			}
		}
	}
}

// TestMetadataDown: without any snapshot the pages are 503s naming the
// metadata service; with one held, the overview shows it under a banner,
// and a topic missing from it is a 503, not a 404 (it may exist).
func TestMetadataDown(t *testing.T) {
	e := newEnv(t, 1)
	e.md.SetDown(true)
	for _, path := range []string{"/console", "/console/topics/orders"} {
		p := e.get(t, path)
		if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "Metadata service: no answer and no cluster model") {
			t.Fatalf("%s: %d:\n%s", path, p.status, p.body)
		}
	}

	e.md.SetDown(false)
	e.md.AddTopic("orders", 1)
	e.startWatching(t)
	e.md.SetDown(true)
	testkit.Eventually(t, 10*time.Second, func() error {
		p := e.get(t, "/console")
		if !strings.Contains(p.body, "Metadata service: no answer") {
			return fmt.Errorf("no banner for a metadata service that is down:\n%s", p.body)
		}
		if p.status != http.StatusOK || !strings.Contains(p.body, "as this frontend last saw it") || !strings.Contains(p.body, `data-topic="orders"`) {
			t.Fatalf("overview from the held snapshot: %d:\n%s", p.status, p.body)
		}
		return nil
	})
	p := e.get(t, "/console/topics/created-later")
	if p.status != http.StatusServiceUnavailable || !strings.Contains(p.body, "it may have been created since") {
		t.Fatalf("unknown topic while metadata is down: %d:\n%s", p.status, p.body)
	}
}
