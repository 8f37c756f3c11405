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
		{Principal: "a", Topic: "x", Operation: "describe"},
	} {
		if ValidateACL(bad) == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if ValidateACL(ACL{Principal: "a", Topic: "x", Pattern: PatternLiteral, Operation: OpProduce, Deny: true}) != nil {
		t.Fatal("a literal deny refused")
	}
}
