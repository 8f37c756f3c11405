package api

import (
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/services/metadata/internal/raftnode"
)

// TestRouteTable: what each route needs, and which run on the leader (every
// change; reads are answered where they arrive).
func TestRouteTable(t *testing.T) {
	routes := (&Server{}).newRoutes()
	for _, tc := range []struct {
		method, path string
		want         cluster.Need
	}{
		{http.MethodGet, "/v1/cluster", cluster.Need{Read: true}},
		{http.MethodGet, "/v1/topics", cluster.Need{Read: true}},
		{http.MethodGet, "/v1/topics/orders", cluster.Need{Read: true}},
		{http.MethodPost, "/v1/topics", cluster.Need{Op: cluster.OpCreate}}, // the body names orders
		{http.MethodDelete, "/v1/topics/orders", cluster.Need{Op: cluster.OpDelete}},
		{http.MethodPut, "/v1/principals", cluster.Need{Admin: true}},
		{http.MethodPut, "/v1/acls", cluster.Need{Cluster: cluster.OpAlter}},
		{http.MethodPost, "/v1/nodes/3/decommission", cluster.Need{Cluster: cluster.OpAlter}},
		{http.MethodPost, "/v1/producers", cluster.Need{Op: cluster.OpProduce}},
		{http.MethodPost, "/v1/nodes/heartbeat", cluster.Need{Service: true}},
		{http.MethodPost, "/v1/partitions/alter", cluster.Need{Service: true}},
		{http.MethodPost, raftnode.ApplyPath, cluster.Need{Service: true}},
		{http.MethodPatch, "/v1/topics/orders/config", cluster.Need{Op: cluster.OpAlterConfigs, Topics: []string{"orders"}}},
		{http.MethodPost, "/v1/topics/orders/partitions", cluster.Need{Op: cluster.OpAlter, Topics: []string{"orders"}}},
		{http.MethodDelete, "/v1/topics/orders/partitions/0/reassignment", cluster.Need{Cluster: cluster.OpAlter}},
		{http.MethodPut, "/v1/cluster/config", cluster.Need{Cluster: cluster.OpAlterConfigs}},
		{http.MethodPost, "/v1/frontends/register", cluster.Need{Service: true}},
		{http.MethodGet, "/v1/topics/orders/partitions/0/remote", cluster.Need{Read: true}},
		{http.MethodPost, "/v1/remote/segments", cluster.Need{Service: true}},
		{http.MethodPost, "/v1/remote/drop", cluster.Need{Service: true}},
		{http.MethodGet, "/v1/remote/garbage", cluster.Need{Service: true}},
		{http.MethodPost, "/v1/remote/garbage/clear", cluster.Need{Service: true}},
	} {
		r, p, _ := routes.Lookup(tc.method, tc.path)
		if r == nil {
			t.Errorf("%s %s: no route", tc.method, tc.path)
			continue
		}
		var ctx fasthttp.RequestCtx
		ctx.Request.SetBodyString(`{"name":"orders","partitions":1}`)
		got := r.NeedFor(&ctx, p)
		if r.Leader == (tc.method == http.MethodGet || tc.path == raftnode.ApplyPath) {
			t.Errorf("%s %s: leader %v", tc.method, tc.path, r.Leader)
		}
		if got.Read != tc.want.Read || got.Admin != tc.want.Admin || got.Service != tc.want.Service || got.Op != tc.want.Op {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}
