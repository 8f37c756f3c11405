package groups

import (
	"net/http"
	"slices"
	"testing"
)

func TestNeedOf(t *testing.T) {
	for _, tc := range []struct {
		method, path, topic, body string
		admin                     bool
		topics                    []string
	}{
		{http.MethodPost, "/v1/groups/g/heartbeat", "", `{"member_epoch":0,"topics":["a","b"]}`, false, []string{"a", "b"}},
		{http.MethodPost, "/v1/groups/g/offsets", "", `{"offsets":[{"topic":"a","partition":0,"offset":3}]}`, false, []string{"a"}},
		{http.MethodPost, "/v1/groups/g/reset-offsets", "", `{"topic":"a","to":"earliest"}`, false, []string{"a"}},

		{http.MethodPost, "/v1/groups/g/heartbeat", "", `not json`, false, nil},
	} {
		n := NeedOf(tc.method, tc.path, tc.topic, []byte(tc.body))
		if n.Admin != tc.admin || !slices.Equal(n.Topics, tc.topics) || !tc.admin && (n.Op != "consume" || !n.Group) {
			t.Errorf("%s %s topic=%s %s: %+v", tc.method, tc.path, tc.topic, tc.body, n)
		}
	}
	// Reading a group needs describe on it (and on the topic asked about),
	// as Kafka's DescribeGroups and OffsetFetch; a listing, a known principal.
	for _, tc := range []struct {
		path, topic, group string
		topics             []string
	}{
		{"/v1/groups/g/offsets", "a", "g", []string{"a"}},
		{"/v1/groups/g/offsets", "", "g", nil},
		{"/v1/groups/g", "", "g", nil},
		{"/v1/groups", "", "", nil},
	} {
		n := NeedOf(http.MethodGet, tc.path, tc.topic, nil)
		if !n.Describe || !n.Group || n.Op != "" || n.GroupName != tc.group || !slices.Equal(n.Topics, tc.topics) {
			t.Errorf("GET %s topic=%s: %+v", tc.path, tc.topic, n)
		}
	}
	// Deleting a group: an admin or a delete ACL on it (Kafka's DELETE).
	if n := NeedOf(http.MethodDelete, "/v1/groups/g", "", nil); !n.DeleteGroup || n.GroupName != "g" || n.Admin || n.Op != "" {
		t.Errorf("DELETE /v1/groups/g: %+v", n)
	}
}
