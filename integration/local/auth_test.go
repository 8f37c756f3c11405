package local

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/localcluster"
)

// TestAuthWithUsersAndACLs runs a frontend with -require-auth: principals
// made with `sluicectl user create` authenticate with their tokens, an
// admin creates and deletes topics, a user with a produce ACL produces to
// its topic only, and every refusal has its code: no token or a wrong one,
// another topic, an admin route. Refusals are logged by the frontend.
func TestAuthWithUsersAndACLs(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := startClusterConfig(t, localcluster.Config{Storage: 1, Extra: map[string][]string{"frontend": {"-require-auth"}}})
	root := strings.TrimSpace(must(t, c, "user", "create", "root", "--admin"))
	alice := strings.TrimSpace(must(t, c, "user", "create", "alice"))
	if len(root) != 64 || len(alice) != 64 || root == alice {
		t.Fatalf("tokens %q and %q", root, alice)
	}
	must(t, c, "acl", "add", "--user", "alice", "--topic", "orders", "--operation", "produce")
	if out := must(t, c, "acl", "list"); !strings.Contains(out, "alice") || !strings.Contains(out, "produce") {
		t.Fatalf("acl list: %s", out)
	}

	as := func(token, stdin string, args ...string) (string, string, int) {
		return sluicectl(t, c, stdin, append([]string{"--token", token}, args...)...)
	}
	// The frontend learns the principals from its metadata watch.
	eventually(t, 30*time.Second, func() error {
		if _, errOut, code := as(root, "", "topic", "create", "orders", "--partitions", "1", "--replication-factor", "1"); code != 0 {
			return fmt.Errorf("admin topic create: exit %d: %s", code, errOut)
		}
		return nil
	})
	if _, errOut, code := as(root, "", "topic", "create", "audit", "--partitions", "1", "--replication-factor", "1"); code != 0 {
		t.Fatalf("admin topic create: %s", errOut)
	}
	eventually(t, 30*time.Second, func() error {
		if _, errOut, code := as(alice, "allowed\n", "produce", "orders"); code != 0 {
			return fmt.Errorf("alice producing to orders: exit %d: %s", code, errOut)
		}
		return nil
	})
	for _, c := range []struct {
		name, token, want string
		args              []string
	}{
		{"another topic", alice, "TOPIC_AUTHORIZATION_FAILED", []string{"produce", "audit"}},
		{"an admin route", alice, "CLUSTER_AUTHORIZATION_FAILED", []string{"topic", "delete", "orders"}},
		{"no token", "", "SASL_AUTHENTICATION_FAILED", []string{"topic", "delete", "orders"}},
		{"a wrong token", strings.Repeat("0", 64), "SASL_AUTHENTICATION_FAILED", []string{"topic", "delete", "orders"}},
	} {
		_, errOut, code := as(c.token, "denied\n", c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, %s; want %s", c.name, code, errOut, c.want)
		}
	}
	if _, errOut, code := as(root, "", "topic", "delete", "audit"); code != 0 {
		t.Fatalf("admin topic delete: %s", errOut)
	}
	got := strings.TrimSpace(must(t, c, "consume", "orders", "--from-beginning", "--exit-at-end"))
	if got != "allowed" {
		t.Fatalf("orders holds %q", got)
	}
	log, _ := os.ReadFile(c.Proc("frontend").LogPath)
	if n := strings.Count(string(log), `"request denied"`); n < 2 {
		t.Fatalf("%d denials logged by the frontend", n)
	}
}
