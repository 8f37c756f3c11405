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
