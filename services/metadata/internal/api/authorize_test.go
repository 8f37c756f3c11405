package api

import (
	"net/http"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

func TestNeedOf(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         cluster.Need
	}{
		{http.MethodGet, "/v1/cluster", cluster.Need{Read: true}},
		{http.MethodGet, "/v1/topics", cluster.Need{Read: true}},
		{http.MethodGet, "/v1/topics/orders", cluster.Need{Read: true}},
		{http.MethodPost, "/v1/topics", cluster.Need{Admin: true}},
		{http.MethodDelete, "/v1/topics/orders", cluster.Need{Admin: true}},
		{http.MethodPut, "/v1/principals", cluster.Need{Admin: true}},
		{http.MethodPut, "/v1/acls", cluster.Need{Admin: true}},
		{http.MethodPost, "/v1/nodes/3/decommission", cluster.Need{Admin: true}},
		{http.MethodPost, "/v1/producers", cluster.Need{Op: cluster.OpProduce}},
		{http.MethodPost, "/v1/nodes/heartbeat", cluster.Need{Service: true}},
		{http.MethodPost, "/v1/partitions/alter", cluster.Need{Service: true}},
		{http.MethodPost, raftnode.ApplyPath, cluster.Need{Service: true}},
	} {
		got := needOf(tc.method, tc.path)
		if got.Read != tc.want.Read || got.Admin != tc.want.Admin || got.Service != tc.want.Service || got.Op != tc.want.Op {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}
