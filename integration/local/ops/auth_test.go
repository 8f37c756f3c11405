package ops

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/dev/localcluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
)

// TestAuthWithUsersAndACLs runs a frontend with -require-auth: principals
// made with `sluicectl user create` authenticate with their tokens, an
// admin creates and deletes topics, a user with a produce ACL produces to
// its topic only, and every refusal has its code: no token or a wrong one,
// another topic, an admin route. Consumer groups: a user may use its own
// group, not one reading a topic it may not consume. Refusals are logged by
// the frontend.
func TestAuthWithUsersAndACLs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	c := itest.StartClusterConfig(t, localcluster.Config{Storage: 1, Extra: map[string][]string{"frontend": {"-require-auth"}}})
	root := strings.TrimSpace(itest.MustSluicectl(t, c, "user", "create", "root", "--admin"))
	alice := strings.TrimSpace(itest.MustSluicectl(t, c, "user", "create", "alice"))
	if len(root) != 64 || len(alice) != 64 || root == alice {
		t.Fatalf("tokens %q and %q", root, alice)
	}
	itest.MustSluicectl(t, c, "acl", "add", "--user", "alice", "--topic", "orders", "--operation", "produce")
	if out := itest.MustSluicectl(t, c, "acl", "list"); !strings.Contains(out, "alice") || !strings.Contains(out, "produce") {
		t.Fatalf("acl list: %s", out)
	}

	as := func(token, stdin string, args ...string) (string, string, int) {
		return itest.Sluicectl(t, c, stdin, append([]string{"--token", token}, args...)...)
	}
	// The frontend learns the principals from its metadata watch.
	testkit.Eventually(t, 30*time.Second, func() error {
		if _, errOut, code := as(root, "", "topic", "create", "orders", "--partitions", "1", "--replication-factor", "1"); code != 0 {
			return fmt.Errorf("admin topic create: exit %d: %s", code, errOut)
		}
		return nil
	})
	if _, errOut, code := as(root, "", "topic", "create", "audit", "--partitions", "1", "--replication-factor", "1"); code != 0 {
		t.Fatalf("admin topic create: %s", errOut)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
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
		{"a topic she may not delete", alice, "TOPIC_AUTHORIZATION_FAILED", []string{"topic", "delete", "orders"}},
		{"an admin route", alice, "CLUSTER_AUTHORIZATION_FAILED", []string{"quota", "set", "--client-id", "x", "--produce-bytes-per-sec", "1000"}},
		{"no token", "", "SASL_AUTHENTICATION_FAILED", []string{"topic", "delete", "orders"}},
		{"a wrong token", strings.Repeat("0", 64), "SASL_AUTHENTICATION_FAILED", []string{"topic", "delete", "orders"}},
	} {
		_, errOut, code := as(c.token, "denied\n", c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, %s; want %s", c.name, code, errOut, c.want)
		}
	}
	// Groups: a principal may not use the group of a topic it cannot read
	// (the offsets service checks the group's topics for the frontend).
	itest.MustSluicectl(t, c, "acl", "add", "--user", "alice", "--topic", "orders", "--operation", "consume")
	groupCall := func(token, method, path, body string) (int, string) {
		req, err := http.NewRequest(method, c.FrontendURL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := groupCall(root, http.MethodPost, "/v1/groups/auditors/offsets", `{"offsets":[{"topic":"audit","partition":0,"offset":0}]}`); status != 200 {
		t.Fatalf("admin commit for auditors: %d %s", status, body)
	}
	testkit.Eventually(t, 30*time.Second, func() error { // the offsets service learns alice's consume ACL from its metadata watch
		if status, body := groupCall(alice, http.MethodPost, "/v1/groups/order-readers/offsets", `{"offsets":[{"topic":"orders","partition":0,"offset":0}]}`); status != 200 {
			return fmt.Errorf("alice committing for her own group: %d %s", status, body)
		}
		return nil
	})
	for _, g := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/groups/auditors", ""},
		{http.MethodGet, "/v1/groups/auditors/offsets", ""},
		{http.MethodPost, "/v1/groups/auditors/offsets", `{"offsets":[{"topic":"orders","partition":0,"offset":0}]}`},
	} {
		if status, body := groupCall(alice, g.method, g.path, g.body); status != 403 || !strings.Contains(body, `"error_code":30`) {
			t.Errorf("alice %s %s, a group reading audit: %d %s; want 403 GROUP_AUTHORIZATION_FAILED", g.method, g.path, status, body)
		}
	}
	if status, body := groupCall(alice, http.MethodGet, "/v1/groups/order-readers", ""); status != 200 {
		t.Errorf("alice describing her own group: %d %s", status, body)
	}
	if _, errOut, code := as(root, "", "topic", "delete", "audit"); code != 0 {
		t.Fatalf("admin topic delete: %s", errOut)
	}
	got := strings.TrimSpace(itest.MustSluicectl(t, c, "consume", "orders", "--from-beginning", "--exit-at-end"))
	if got != "allowed" {
		t.Fatalf("orders holds %q", got)
	}
	log, _ := os.ReadFile(c.Proc("frontend").LogPath)
	if n := strings.Count(string(log), `"request denied"`); n < 2 {
		t.Fatalf("%d denials logged by the frontend", n)
	}
}
