package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/protocol"
)

func tokenSHA(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TestAuthAndACLs: with -require-auth every route needs a principal's
// bearer token, and each decision follows the ACLs: produce and fetch per
// topic, groups and producer ids for principals with some ACL of the kind,
// reads for anyone authenticated, the rest (topic changes, the console) for
// admins only. Each is allowed and denied once.
func TestAuthAndACLs(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, http: func(c *Config) { c.RequireAuth = true }})
	e.md.AddTopic("orders", 1)
	e.md.AddTopic("audit", 1)
	e.md.Update(func(s *cluster.Snapshot) {
		s.Principals = []cluster.Principal{{Name: "alice", TokenSHA256: tokenSHA("alice-token")}, {Name: "root", TokenSHA256: tokenSHA("root-token"), Admin: true},
			{Name: "nobody", TokenSHA256: tokenSHA("nobody-token")}}
		s.ACLs = []cluster.ACL{{Principal: "alice", Topic: "orders", Operation: cluster.OpProduce}, {Principal: "alice", Topic: "orders", Operation: cluster.OpConsume}}
	})
	testkit.WaitFor(t, 5*time.Second, "the principals in the frontend's metadata", func() bool {
		s := e.srv.cache.Snapshot()
		return s != nil && len(s.Principals) == 3
	})
	body := []byte(`{"records":[{"value":"v"}]}`)
	for _, c := range []struct {
		name, token, method, path string
		body                      []byte
		status                    int
		code                      protocol.Code
	}{
		{"no token", "", http.MethodPost, "/v1/topics/orders/records", body, 401, protocol.SaslAuthenticationFailed},
		{"unknown token", "guess", http.MethodPost, "/v1/topics/orders/records", body, 401, protocol.SaslAuthenticationFailed},
		{"produce allowed", "alice-token", http.MethodPost, "/v1/topics/orders/records", body, 200, 0},
		{"produce denied", "alice-token", http.MethodPost, "/v1/topics/audit/records", body, 403, protocol.TopicAuthorizationFailed},
		{"fetch allowed", "alice-token", http.MethodGet, "/v1/topics/orders/partitions/0/records?offset=0&max_wait_ms=0", nil, 200, 0},
		{"fetch denied", "alice-token", http.MethodGet, "/v1/topics/audit/partitions/0/records?offset=0&max_wait_ms=0", nil, 403, protocol.TopicAuthorizationFailed},
		{"read for anyone", "nobody-token", http.MethodGet, "/v1/topics", nil, 200, 0},
		{"a group read denied", "nobody-token", http.MethodGet, "/v1/groups/g", nil, 403, protocol.GroupAuthorizationFailed},
		{"a listing of groups for anyone known", "nobody-token", http.MethodGet, "/v1/groups", nil, 200, 0},
		{"commit on another topic denied", "alice-token", http.MethodPost, "/v1/groups/g/offsets",
			[]byte(`{"offsets":[{"topic":"audit","partition":0,"offset":1}]}`), 403, protocol.TopicAuthorizationFailed},
		{"group delete denied", "alice-token", http.MethodDelete, "/v1/groups/g", nil, 403, protocol.GroupAuthorizationFailed},
		{"producer id denied", "nobody-token", http.MethodPost, "/v1/producers", []byte(`{}`), 403, protocol.TopicAuthorizationFailed},
		{"a topic she may not delete", "alice-token", http.MethodDelete, "/v1/topics/orders", nil, 403, protocol.TopicAuthorizationFailed},
		{"admin route denied", "alice-token", http.MethodPut, "/v1/quotas", []byte(`{"client_id":"x"}`), 403, protocol.ClusterAuthorizationFailed},
		{"console denied", "alice-token", http.MethodGet, "/console", nil, 403, protocol.ClusterAuthorizationFailed},
		{"admin produces anywhere", "root-token", http.MethodPost, "/v1/topics/audit/records", body, 200, 0},
		{"admin route allowed", "root-token", http.MethodDelete, "/v1/topics/audit", nil, 200, 0},
	} {
		var hdr []string
		if c.token != "" {
			hdr = []string{"Authorization", "Bearer " + c.token}
		}
		r := e.do(t, c.method, c.path, "application/json", c.body, hdr...)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
			continue
		}
		if c.code != 0 {
			var eb cluster.ErrorBody
			r.json(t, &eb)
			if eb.ErrorCode != int16(c.code) {
				t.Errorf("%s: code %d, want %v", c.name, eb.ErrorCode, c.code)
			}
		}
	}
	// The model as each sees it: never a token hash; principals and ACLs
	// only for an admin.
	for token, principals := range map[string]int{"alice-token": 0, "root-token": 3} {
		var snap cluster.Snapshot
		e.do(t, http.MethodGet, "/v1/cluster", "", nil, "Authorization", "Bearer "+token).json(t, &snap)
		if len(snap.Principals) != principals || (principals == 0) != (snap.ACLs == nil) {
			t.Errorf("%s sees %d principals and %d ACLs, want %d principals", token, len(snap.Principals), len(snap.ACLs), principals)
		}
		for _, p := range snap.Principals {
			if p.TokenSHA256 != "" {
				t.Errorf("%s sees the token hash of %s", token, p.Name)
			}
		}
	}
}

// TestUnauthenticatedBodiesHoldNoBudget: with -require-auth a request
// without a valid token is refused from its headers, before its body is
// admitted: it never holds the in-flight budget.
func TestUnauthenticatedBodiesHoldNoBudget(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, http: func(c *Config) { c.RequireAuth = true }})
	e.md.AddTopic("t", 1)
	c, err := net.Dial("tcp", e.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A large body announced; only the first 8 KiB (what fasthttp reads
	// ahead) sent.
	fmt.Fprintf(c, "POST /v1/topics/t/records HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", 1<<20, strings.Repeat("x", 8<<10))
	if status, _ := readAnswer(t, c); status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", status)
	}
	if n := testutil.ToFloat64(e.producer.Metrics().InFlightBytes); n != 0 {
		t.Fatalf("%v bytes of the budget held by an unauthenticated request", n)
	}
}
