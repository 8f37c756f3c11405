package cluster

import (
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/protocol"
)

func TestAuthorize(t *testing.T) {
	s := &Snapshot{
		Principals: []Principal{{Name: "alice", TokenSHA256: strings.Repeat("a", 64)}, {Name: "root", TokenSHA256: strings.Repeat("b", 64), Admin: true}},
		ACLs:       []ACL{{Principal: "alice", Topic: "orders", Operation: OpConsume}, {Principal: "alice", Topic: "*", Operation: OpProduce}},
	}
	alice, _ := s.Principal("alice")
	root, _ := s.Principal("root")
	cases := []struct {
		name string
		p    *Principal
		who  string
		need Need
		want protocol.Code
	}{
		{"read", alice, "alice", Need{Read: true}, protocol.None},
		{"read unknown", nil, "bob", Need{Read: true}, protocol.ClusterAuthorizationFailed},
		{"consume granted", alice, "alice", Need{Op: OpConsume, Topics: []string{"orders"}}, protocol.None},
		{"consume denied", alice, "alice", Need{Op: OpConsume, Topics: []string{"orders", "audit"}}, protocol.TopicAuthorizationFailed},
		{"produce wildcard", alice, "alice", Need{Op: OpProduce, Topics: []string{"audit"}}, protocol.None},
		{"group some topic", alice, "alice", Need{Op: OpConsume, Group: true}, protocol.None},
		{"group unknown", nil, "bob", Need{Op: OpConsume, Group: true}, protocol.GroupAuthorizationFailed},
		{"topic unknown", nil, "bob", Need{Op: OpProduce, Topics: []string{"orders"}}, protocol.TopicAuthorizationFailed},
		{"admin denied", alice, "alice", Need{Admin: true}, protocol.ClusterAuthorizationFailed},
		{"admin granted", root, "root", Need{Admin: true}, protocol.None},
		{"admin consumes", root, "root", Need{Op: OpConsume, Topics: []string{"audit"}}, protocol.None},
		{"service only", root, "root", Need{Service: true}, protocol.ClusterAuthorizationFailed},
	}
	for _, c := range cases {
		err := s.Authorize(c.p, c.who, c.need)
		if got := protocol.CodeOf(err); got != c.want {
			t.Errorf("%s: got %v (%v), want %v", c.name, got, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), c.who) {
			t.Errorf("%s: the reason %q does not name %s", c.name, err, c.who)
		}
	}
}

func TestRedacted(t *testing.T) {
	s := &Snapshot{Version: 3, Principals: []Principal{{Name: "root", TokenSHA256: strings.Repeat("b", 64), Admin: true}},
		ACLs: []ACL{{Principal: "root", Topic: "*", Operation: OpConsume}}}
	user := s.Redacted(false)
	if user.Version != 3 || user.Principals != nil || user.ACLs != nil {
		t.Fatalf("a user's view: %+v", user)
	}
	admin := s.Redacted(true)
	if len(admin.Principals) != 1 || admin.Principals[0].TokenSHA256 != "" || !admin.Principals[0].Admin || len(admin.ACLs) != 1 {
		t.Fatalf("an admin's view: %+v", admin)
	}
	if s.Principals[0].TokenSHA256 == "" {
		t.Fatal("redacting changed the original")
	}
}

// TestACLDenyAndPrefix: a prefixed ACL covers the topics starting with its
// name; a deny covering a topic wins over every allow, for its operation
// only; an admin is never denied; "some topic" counts allows alone.
func TestACLDenyAndPrefix(t *testing.T) {
	s := &Snapshot{ACLs: []ACL{
		{Principal: "alice", Topic: "team-", Pattern: PatternPrefixed, Operation: OpConsume},
		{Principal: "alice", Topic: "team-secret", Operation: OpConsume, Deny: true},
		{Principal: "alice", Topic: "*", Operation: OpProduce},
		{Principal: "alice", Topic: "audit", Pattern: PatternPrefixed, Operation: OpProduce, Deny: true},
		{Principal: "bob", Topic: "x", Operation: OpConsume, Deny: true},
	}}
	alice, bob, root := &Principal{Name: "alice"}, &Principal{Name: "bob"}, &Principal{Name: "root", Admin: true}
	for _, tc := range []struct {
		p     *Principal
		op, t string
		want  bool
	}{
		{alice, OpConsume, "team-a", true},
		{alice, OpConsume, "team-", true},
		{alice, OpConsume, "team-secret", false},
		{alice, OpConsume, "team-secrets", true}, // the deny is literal
		{alice, OpConsume, "other", false},
		{alice, OpProduce, "team-secret", true}, // the deny is of consume
		{alice, OpProduce, "audit-log", false},
		{alice, OpProduce, "orders", true},
		{bob, OpConsume, "x", false},
		{root, OpConsume, "team-secret", true},
	} {
		if got := s.Allowed(tc.p, tc.op, tc.t); got != tc.want {
			t.Errorf("%s %s %s: %v, want %v", tc.p.Name, tc.op, tc.t, got, tc.want)
		}
	}
	if !s.AllowedSome(alice, OpConsume) || s.AllowedSome(bob, OpConsume) {
		t.Fatal("AllowedSome counts a deny as an allow, or misses an allow")
	}
	for _, bad := range []ACL{
		{Principal: "a", Topic: "*", Pattern: PatternPrefixed, Operation: OpConsume},
		{Principal: "a", Topic: "x", Pattern: "wildcard", Operation: OpConsume},
		{Principal: "a", Topic: "no spaces", Pattern: PatternPrefixed, Operation: OpConsume},
		{Principal: "a", Topic: "x", Operation: "cluster_action"},
		{Principal: "a", Resource: ResourceGroup, Topic: "g", Operation: OpAlter},
		{Principal: "a", Resource: ResourceGroup, Topic: "g", Operation: OpProduce},
		{Principal: "a", Resource: ResourceTransactionalID, Topic: "t", Operation: OpDelete},
	} {
		if ValidateACL(bad) == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if ValidateACL(ACL{Principal: "a", Topic: "x", Pattern: PatternLiteral, Operation: OpProduce, Deny: true}) != nil {
		t.Fatal("a literal deny refused")
	}
}

// TestGroupAndTransactionalIDACLs: without an ACL of the resource type the
// rule before them holds (consume on some topic for groups, produce for
// transactional ids); with one, the type's ACLs decide, prefixes and
// denies included; Authorize names the refusal's code; a group or
// transactional id ACL is no topic right.
func TestGroupAndTransactionalIDACLs(t *testing.T) {
	s := &Snapshot{ACLs: []ACL{
		{Principal: "old", Topic: "t", Operation: OpConsume},
		{Principal: "old", Topic: "t", Operation: OpProduce},
		{Principal: "ana", Topic: "t", Operation: OpConsume},
		{Principal: "ana", Topic: "t", Operation: OpProduce},
		{Principal: "ana", Resource: ResourceGroup, Topic: "ana-", Pattern: PatternPrefixed, Operation: OpConsume},
		{Principal: "ana", Resource: ResourceGroup, Topic: "ana-private", Operation: OpConsume, Deny: true},
		{Principal: "ana", Resource: ResourceTransactionalID, Topic: "ana-tx", Operation: OpProduce},
		{Principal: "only-groups", Resource: ResourceGroup, Topic: "*", Operation: OpConsume},
	}}
	old, ana, onlyGroups := &Principal{Name: "old"}, &Principal{Name: "ana"}, &Principal{Name: "only-groups"}
	for _, tc := range []struct {
		p              *Principal
		resource, name string
		want           bool
	}{
		{old, ResourceGroup, "anything", true},
		{old, ResourceTransactionalID, "anything", true},
		{ana, ResourceGroup, "ana-readers", true},
		{ana, ResourceGroup, "ana-private", false},
		{ana, ResourceGroup, "bob-readers", false},
		{ana, ResourceGroup, "", true},
		{ana, ResourceTransactionalID, "ana-tx", true},
		{ana, ResourceTransactionalID, "ana-tx2", false},
		{onlyGroups, ResourceGroup, "g", true},
		{onlyGroups, ResourceTransactionalID, "x", false}, // no produce on any topic
	} {
		if got := s.AllowedResource(tc.p, tc.resource, tc.name); got != tc.want {
			t.Errorf("%s %s %q: %v, want %v", tc.p.Name, tc.resource, tc.name, got, tc.want)
		}
	}
	if s.Allowed(onlyGroups, OpConsume, "g") || s.AllowedSome(onlyGroups, OpConsume) {
		t.Fatal("a group ACL counted as a topic right")
	}
	err := s.Authorize(ana, "ana", Need{Op: OpConsume, Group: true, GroupName: "bob-readers"})
	if protocol.CodeOf(err) != protocol.GroupAuthorizationFailed {
		t.Fatalf("ana using bob-readers: %v", err)
	}
	err = s.Authorize(ana, "ana", Need{Op: OpProduce, TransactionalID: "bob-tx"})
	if protocol.CodeOf(err) != protocol.TransactionalIDAuthorizationFailed {
		t.Fatalf("ana using bob-tx: %v", err)
	}
	if err := s.Authorize(ana, "ana", Need{Op: OpConsume, Group: true, GroupName: "ana-readers", Topics: []string{"t"}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []ACL{
		{Principal: "a", Resource: ResourceGroup, Topic: "g", Operation: OpProduce},
		{Principal: "a", Resource: ResourceTransactionalID, Topic: "x", Operation: OpConsume},
		{Principal: "a", Resource: "cluster", Topic: "kafka-cluster", Operation: OpConsume},
		{Principal: "a", Resource: ResourceGroup, Topic: "", Operation: OpConsume},
	} {
		if ValidateACL(bad) == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestACLHosts: an ACL naming a host applies to requests from it alone, a
// deny as well as an allow; a principal whose address is unknown gets none
// of them; the stored form of "*" is "".
func TestACLHosts(t *testing.T) {
	s := &Snapshot{ACLs: []ACL{
		{Principal: "ana", Topic: "t", Operation: OpConsume, Host: "10.0.0.1"},
		{Principal: "ana", Topic: "u", Operation: OpConsume},
		{Principal: "ana", Topic: "u", Operation: OpConsume, Deny: true, Host: "10.0.0.2"},
	}}
	ana := &Principal{Name: "ana"}
	for _, tc := range []struct {
		host, topic string
		want        bool
	}{
		{"10.0.0.1", "t", true},
		{"10.0.0.2", "t", false},
		{"", "t", false},
		{"10.0.0.1", "u", true},
		{"10.0.0.2", "u", false},
	} {
		if got := s.Allowed(ana.At(tc.host), OpConsume, tc.topic); got != tc.want {
			t.Errorf("from %q on %s: %v, want %v", tc.host, tc.topic, got, tc.want)
		}
	}
	if ana.Host != "" {
		t.Fatal("At changed the principal it copies")
	}
	if n := (ACL{Principal: "a", Topic: "t", Operation: OpConsume, Host: "*"}).Normalized(); n.Host != "" {
		t.Fatalf("host * stored as %q", n.Host)
	}
	if ValidateACL(ACL{Principal: "a", Topic: "t", Operation: OpConsume, Host: "example.com"}) == nil {
		t.Fatal("a host name accepted: Kafka's hosts are addresses")
	}
}

// TestDescribeACLs: a describe ACL shows a topic without reading it;
// produce and consume imply describe, and a deny of consume leaves it; a
// deny of describe hides it whatever the allows.
func TestDescribeACLs(t *testing.T) {
	s := &Snapshot{ACLs: []ACL{
		{Principal: "mon", Topic: "*", Operation: OpDescribe},
		{Principal: "mon", Topic: "secret", Operation: OpDescribe, Deny: true},
		{Principal: "app", Topic: "orders", Operation: OpConsume},
		{Principal: "app", Topic: "orders", Operation: OpConsume, Deny: true, Host: "10.0.0.9"},
	}}
	mon, app := &Principal{Name: "mon"}, &Principal{Name: "app"}
	switch {
	case !s.Describes(mon, "orders") || s.Allowed(mon, OpConsume, "orders"):
		t.Fatal("a describe ACL: not shown, or read")
	case s.Describes(mon, "secret"):
		t.Fatal("a describe deny did not hide the topic")
	case !s.Describes(app, "orders") || s.Describes(app, "other"):
		t.Fatal("consume does not imply describe, or implies it elsewhere")
	case !s.Describes(app.At("10.0.0.9"), "orders") || s.Allowed(app.At("10.0.0.9"), OpConsume, "orders"):
		t.Fatal("a consume deny hid the topic, or did not deny reading it")
	}
}

// TestCreateACLs: a create ACL lets a principal create the topics it
// covers, and shows nothing (CREATE does not imply DESCRIBE); creating a
// topic needs an admin when the body names no valid topic.
func TestCreateACLs(t *testing.T) {
	s := &Snapshot{ACLs: []ACL{{Principal: "team", Topic: "team-", Pattern: PatternPrefixed, Operation: OpCreate}}}
	team := &Principal{Name: "team"}
	if err := s.Authorize(team, "team", CreateTopicNeed([]byte(`{"name":"team-new"}`))); err != nil {
		t.Fatal(err)
	}
	if err := s.Authorize(team, "team", CreateTopicNeed([]byte(`{"name":"other"}`))); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed {
		t.Fatalf("creating other: %v", err)
	}
	if n := CreateTopicNeed([]byte(`{"name":`)); !n.Admin {
		t.Fatalf("a body that does not parse: %+v", n)
	}
	if s.Describes(team, "team-new") || s.Allowed(team, OpProduce, "team-new") {
		t.Fatal("a create ACL let the principal see or write the topic")
	}
}

// TestDeleteACLs: a delete ACL lets a principal delete (or truncate) the
// topics it covers, and implies describing them, as Kafka's DELETE does.
func TestDeleteACLs(t *testing.T) {
	s := &Snapshot{ACLs: []ACL{{Principal: "team", Topic: "team-", Pattern: PatternPrefixed, Operation: OpDelete}}}
	team := &Principal{Name: "team"}
	switch {
	case !s.Allowed(team, OpDelete, "team-old") || s.Allowed(team, OpDelete, "other"):
		t.Fatal("a prefixed delete ACL covers the wrong topics")
	case !s.Describes(team, "team-old") || s.Allowed(team, OpConsume, "team-old"):
		t.Fatal("a delete ACL does not imply describe, or implies reading")
	}
	if ValidateACL(ACL{Principal: "team", Resource: ResourceTransactionalID, Topic: "x", Operation: OpDelete}) == nil {
		t.Fatal("a transactional id delete ACL accepted")
	}
}

// TestAlterAndConfigACLs: alter (adding partitions) implies describe;
// alter_configs implies describe_configs but not describe; a deny of
// describe_configs wins over an alter_configs allow, and a deny of
// alter_configs leaves describe_configs to its own ACLs.
func TestAlterAndConfigACLs(t *testing.T) {
	ops := &Principal{Name: "ops"}
	s := &Snapshot{ACLs: []ACL{
		{Principal: "ops", Topic: "team-", Pattern: PatternPrefixed, Operation: OpAlter},
		{Principal: "ops", Topic: "team-", Pattern: PatternPrefixed, Operation: OpAlterConfigs},
		{Principal: "ops", Topic: "team-secret", Operation: OpDescribeConfigs, Deny: true},
		{Principal: "ops", Topic: "cfg", Operation: OpAlterConfigs},
		{Principal: "ops", Topic: "shown", Operation: OpDescribeConfigs},
		{Principal: "ops", Topic: "shown", Operation: OpAlterConfigs, Deny: true},
	}}
	for _, tc := range []struct {
		op, topic string
		want      bool
	}{
		{OpAlter, "team-a", true},
		{OpAlterConfigs, "team-a", true},
		{OpDescribeConfigs, "team-a", true}, // implied by alter_configs
		{OpDescribeConfigs, "team-secret", false},
		{OpAlterConfigs, "team-secret", true},
		{OpAlter, "other", false},
		{OpDescribeConfigs, "cfg", true},
		{OpDescribeConfigs, "shown", true},
		{OpAlterConfigs, "shown", false},
		{OpDelete, "team-a", false},
	} {
		if got := s.Allowed(ops, tc.op, tc.topic); got != tc.want {
			t.Errorf("%s on %s: %v, want %v", tc.op, tc.topic, got, tc.want)
		}
	}
	if !s.Describes(ops, "team-a") {
		t.Error("alter does not imply describe")
	}
	if s.Describes(ops, "cfg") {
		t.Error("alter_configs implies describe; in Kafka it does not")
	}
	for _, op := range []string{OpAlter, OpAlterConfigs, OpDescribeConfigs} {
		if err := ValidateACL(ACL{Principal: "ops", Topic: "t", Operation: op}); err != nil {
			t.Errorf("a topic ACL for %s refused: %v", op, err)
		}
	}
	if err := s.Authorize(ops, "ops", Need{Op: OpAlter, Topics: []string{"team-a", "other"}}); protocol.CodeOf(err) != protocol.TopicAuthorizationFailed ||
		!strings.Contains(err.Error(), "alter on topic other") {
		t.Fatalf("adding partitions to team-a and other: %v", err)
	}
}

// TestClusterACLs: cluster ACLs grant operations on the cluster (alter
// implies describe, alter_configs describe_configs, a deny of the
// operation itself wins), create on the cluster creates any topic,
// idempotent_write gets a producer id, and only the cluster's name and
// operations are valid.
func TestClusterACLs(t *testing.T) {
	ops := &Principal{Name: "ops"}
	nobody := &Principal{Name: "nobody"}
	on := func(op string, deny bool) ACL {
		return ACL{Principal: "ops", Resource: ResourceCluster, Topic: ClusterName, Operation: op, Deny: deny}
	}
	s := &Snapshot{ACLs: []ACL{on(OpAlter, false), on(OpAlterConfigs, false), on(OpDescribeConfigs, true), on(OpCreate, false),
		on(OpIdempotentWrite, false), {Principal: "ops", Topic: "t", Operation: OpCreate, Deny: true}}}
	for _, tc := range []struct {
		op   string
		want bool
	}{{OpAlter, true}, {OpDescribe, true}, {OpAlterConfigs, true}, {OpDescribeConfigs, false}, {OpCreate, true}, {OpIdempotentWrite, true}} {
		if got := s.AllowedCluster(ops, tc.op); got != tc.want {
			t.Errorf("%s on the cluster: %v, want %v", tc.op, got, tc.want)
		}
		if s.AllowedCluster(nobody, tc.op) {
			t.Errorf("a principal without ACLs may %s the cluster", tc.op)
		}
	}
	if !s.Allowed(ops, OpCreate, "t") || s.Allowed(nobody, OpCreate, "t") {
		t.Error("create on the cluster does not create any topic (whatever a topic's own deny, as in Kafka)")
	}
	if err := s.Authorize(ops, "ops", Need{Cluster: OpAlter}); err != nil {
		t.Fatal(err)
	}
	if err := s.Authorize(nobody, "nobody", Need{Cluster: OpDescribe}); protocol.CodeOf(err) != protocol.ClusterAuthorizationFailed {
		t.Fatalf("describe on the cluster without an ACL: %v", err)
	}
	if err := s.Authorize(ops, "ops", Need{Op: OpProduce}); err != nil {
		t.Fatalf("a producer id with idempotent_write on the cluster: %v", err)
	}
	if s.Redacted(s.AllowedCluster(ops, OpDescribe)).ACLs == nil {
		t.Error("describe on the cluster does not show the ACLs")
	}
	for _, bad := range []ACL{
		{Principal: "ops", Resource: ResourceCluster, Topic: "other", Operation: OpAlter},
		{Principal: "ops", Resource: ResourceCluster, Topic: ClusterName, Operation: OpConsume},
		{Principal: "ops", Resource: ResourceCluster, Topic: ClusterName, Operation: "cluster_action"},
		{Principal: "ops", Resource: ResourceCluster, Topic: ClusterName, Pattern: PatternPrefixed, Operation: OpAlter},
		{Principal: "ops", Topic: "t", Operation: OpIdempotentWrite},
	} {
		if ValidateACL(bad) == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestGroupDeleteACLs: a delete ACL on groups lets a principal delete them
// (a deny wins), and does not count as a group ACL for using groups: the
// principal uses groups as before it had one.
func TestGroupDeleteACLs(t *testing.T) {
	ops := &Principal{Name: "ops"}
	s := &Snapshot{ACLs: []ACL{
		{Principal: "ops", Topic: "*", Operation: OpConsume},
		{Principal: "ops", Resource: ResourceGroup, Topic: "team-", Pattern: PatternPrefixed, Operation: OpDelete},
		{Principal: "ops", Resource: ResourceGroup, Topic: "team-keep", Operation: OpDelete, Deny: true},
	}}
	for _, tc := range []struct {
		group string
		want  bool
	}{{"team-a", true}, {"team-keep", false}, {"other", false}} {
		if got := s.DeletesGroup(ops, tc.group); got != tc.want {
			t.Errorf("deleting %s: %v, want %v", tc.group, got, tc.want)
		}
		err := s.Authorize(ops, "ops", Need{DeleteGroup: true, GroupName: tc.group})
		if (err == nil) != tc.want || err != nil && protocol.CodeOf(err) != protocol.GroupAuthorizationFailed {
			t.Errorf("authorizing the deletion of %s: %v", tc.group, err)
		}
	}
	if !s.AllowedResource(ops, ResourceGroup, "other") || !s.AllowedResource(ops, ResourceGroup, "") {
		t.Error("a delete ACL on groups took away the use of groups")
	}
	if ValidateACL(ACL{Principal: "ops", Resource: ResourceGroup, Topic: "g", Operation: OpDelete}) != nil ||
		ValidateACL(ACL{Principal: "ops", Resource: ResourceTransactionalID, Topic: "x", Operation: OpDelete}) == nil {
		t.Error("delete is for groups among the other resources")
	}
}

// TestGroupAndTransactionalIDDescribeACLs: a describe ACL on groups or transactional ids lets a
// principal read them and nothing more; using (consume, produce) and, for
// groups, deleting imply it; a deny of describe wins over all of them; a
// listing shows a principal with describe on the cluster every group; a
// read's topics need describe on them; the refusals carry the resource's
// code.
func TestGroupAndTransactionalIDDescribeACLs(t *testing.T) {
	mon := &Principal{Name: "mon"}
	app := &Principal{Name: "app"}
	ops := &Principal{Name: "ops"}
	s := &Snapshot{ACLs: []ACL{
		{Principal: "mon", Topic: "orders", Operation: OpDescribe},
		{Principal: "mon", Resource: ResourceGroup, Topic: "team-", Pattern: PatternPrefixed, Operation: OpDescribe},
		{Principal: "mon", Resource: ResourceGroup, Topic: "team-secret", Operation: OpDescribe, Deny: true},
		{Principal: "mon", Resource: ResourceTransactionalID, Topic: "tx-", Pattern: PatternPrefixed, Operation: OpDescribe},
		{Principal: "app", Topic: "orders", Operation: OpConsume},
		{Principal: "app", Resource: ResourceGroup, Topic: "app-g", Operation: OpConsume},
		{Principal: "app", Resource: ResourceGroup, Topic: "app-hidden", Operation: OpConsume},
		{Principal: "app", Resource: ResourceGroup, Topic: "app-hidden", Operation: OpDescribe, Deny: true},
		{Principal: "app", Resource: ResourceTransactionalID, Topic: "app-tx", Operation: OpProduce},
		{Principal: "ops", Resource: ResourceGroup, Topic: "old", Operation: OpDelete},
		{Principal: "ops", Resource: ResourceCluster, Topic: ClusterName, Operation: OpDescribe},
	}}
	for _, tc := range []struct {
		p              *Principal
		resource, name string
		want           bool
	}{
		{mon, ResourceGroup, "team-a", true},
		{mon, ResourceGroup, "team-secret", false}, // the deny wins
		{mon, ResourceGroup, "app-g", false},
		{mon, ResourceTransactionalID, "tx-1", true},
		{mon, ResourceTransactionalID, "app-tx", false},
		{app, ResourceGroup, "app-g", true},       // consume implies describe
		{app, ResourceGroup, "app-hidden", false}, // unless describe is denied
		{app, ResourceGroup, "team-a", false},
		{app, ResourceTransactionalID, "app-tx", true}, // produce implies describe
		{app, ResourceTransactionalID, "tx-1", false},
		{ops, ResourceGroup, "old", true}, // delete implies describe
		{ops, ResourceGroup, "team-a", false},
		{&Principal{Name: "root", Admin: true}, ResourceGroup, "anything", true},
	} {
		if got := s.DescribesResource(tc.p, tc.resource, tc.name); got != tc.want {
			t.Errorf("%s describing %s %s: %v, want %v", tc.p.Name, tc.resource, tc.name, got, tc.want)
		}
	}
	// Describing grants no use: mon may not join, commit or produce.
	if s.AllowedResource(mon, ResourceGroup, "team-a") || s.AllowedResource(mon, ResourceTransactionalID, "tx-1") {
		t.Error("a describe ACL let its principal use a group or a transactional id")
	}
	if !s.ListsGroup(ops, "team-a") || !s.ListsGroup(mon, "team-a") || s.ListsGroup(mon, "app-g") {
		t.Error("a listing shows the wrong groups: describe on the cluster shows every one, otherwise those described")
	}
	for _, tc := range []struct {
		p    *Principal
		need Need
		code protocol.Code
	}{
		{mon, Need{Describe: true, Group: true, GroupName: "team-a", Topics: []string{"orders"}}, protocol.None},
		{mon, Need{Describe: true, Group: true, GroupName: "team-a", Topics: []string{"orders", "payments"}}, protocol.TopicAuthorizationFailed},
		{mon, Need{Describe: true, Group: true, GroupName: "team-secret"}, protocol.GroupAuthorizationFailed},
		{mon, Need{Describe: true, TransactionalID: "tx-1"}, protocol.None},
		{mon, Need{Describe: true, TransactionalID: "app-tx"}, protocol.TransactionalIDAuthorizationFailed},
		{mon, Need{Describe: true, Group: true}, protocol.None}, // a listing
		{nil, Need{Describe: true, Group: true}, protocol.GroupAuthorizationFailed},
		{nil, Need{Describe: true, TransactionalID: "tx-1"}, protocol.TransactionalIDAuthorizationFailed},
		{mon, Need{Op: OpConsume, Group: true, GroupName: "team-a"}, protocol.GroupAuthorizationFailed},
	} {
		name := "nobody"
		if tc.p != nil {
			name = tc.p.Name
		}
		if got := protocol.CodeOf(s.Authorize(tc.p, name, tc.need)); got != tc.code {
			t.Errorf("%s %+v: %v, want %v", name, tc.need, got, tc.code)
		}
	}
}
