package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
)

func principal(name, sha string, admin bool) Command {
	return Command{Type: TypeSetPrincipal, SetPrincipal: &SetPrincipal{Principal: cluster.Principal{Name: name, TokenSHA256: sha, Admin: admin}}}
}

func acl(who, topic, op string, del bool) Command {
	return Command{Type: TypeSetACL, SetACL: &SetACL{ACL: cluster.ACL{Principal: who, Topic: topic, Operation: op}, Delete: del}}
}

func TestPrincipalsAndACLs(t *testing.T) {
	h := newHarness()
	shaA, shaB := strings.Repeat("a", 64), strings.Repeat("b", 64)
	h.applyAll(t, principal("alice", shaA, false), principal("root", shaB, true),
		acl("alice", "orders", cluster.OpProduce, false), acl("alice", "*", cluster.OpConsume, false))
	v := h.View()
	alice, ok := v.PrincipalByToken(shaA)
	if !ok || alice.Name != "alice" {
		t.Fatalf("by token: %+v %v", alice, ok)
	}
	for _, c := range []struct {
		op, topic string
		want      bool
	}{{cluster.OpProduce, "orders", true}, {cluster.OpProduce, "audit", false}, {cluster.OpConsume, "audit", true}} {
		if got := v.Allowed(alice, c.op, c.topic); got != c.want {
			t.Errorf("alice %s %s: %v", c.op, c.topic, got)
		}
	}
	root, _ := v.PrincipalByToken(shaB)
	if !v.Allowed(root, cluster.OpProduce, "anything") {
		t.Error("an admin is refused")
	}
	for name, cmd := range map[string]Command{
		"short hash":        principal("bob", "abc", false),
		"same token":        principal("bob", shaA, false),
		"empty name":        principal("", strings.Repeat("c", 64), false),
		"unknown principal": acl("nobody", "orders", cluster.OpProduce, false),
		"bad operation":     acl("alice", "orders", "cluster_action", false),
		"bad topic":         acl("alice", "bad topic", cluster.OpProduce, false),
	} {
		if r := h.apply(t, cmd); !errors.Is(r.Err, ErrInvalidPrincipal) && !errors.Is(r.Err, ErrUnknownPrincipal) {
			t.Errorf("%s: %v", name, r.Err)
		}
	}
	if got := snapshotRoundTrip(t, h.FSM).View(); len(got.Principals) != 2 || len(got.ACLs) != 2 {
		t.Fatalf("after a snapshot: %+v %+v", got.Principals, got.ACLs)
	}
	// Deleting a principal deletes its ACLs.
	h.applyAll(t, Command{Type: TypeSetPrincipal, SetPrincipal: &SetPrincipal{Principal: cluster.Principal{Name: "alice"}, Delete: true}})
	if v := h.View(); len(v.Principals) != 1 || len(v.ACLs) != 0 {
		t.Fatalf("after deleting alice: %+v %+v", v.Principals, v.ACLs)
	}
}
