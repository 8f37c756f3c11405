package httpapi

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/cluster"
)

// TestRouteTable: what each route of the frontend needs of its principal.
func TestRouteTable(t *testing.T) {
	routes := (&Server{}).newRoutes()
	for _, tc := range []struct {
		method, path string
		want         cluster.Need
	}{
		{http.MethodGet, "/v1/cluster", cluster.Need{Read: true}},
		{http.MethodGet, "/v1/topics", cluster.Need{Read: true}},
		{http.MethodGet, "/v1/topics/orders", cluster.Need{Read: true}},
		{http.MethodPost, "/v1/topics", cluster.Need{Admin: true}},
		{http.MethodDelete, "/v1/topics/orders", cluster.Need{Op: cluster.OpDelete, Topics: []string{"orders"}}},
		{http.MethodPatch, "/v1/topics/orders/config", cluster.Need{Op: cluster.OpAlterConfigs, Topics: []string{"orders"}}},
		{http.MethodPost, "/v1/topics/orders/partitions", cluster.Need{Op: cluster.OpAlter, Topics: []string{"orders"}}},
		{http.MethodPost, "/v1/topics/orders/partitions/1/reassignment", cluster.Need{Cluster: cluster.OpAlter}},
		{http.MethodPost, "/v1/topics/orders/records", cluster.Need{Op: cluster.OpProduce, Topics: []string{"orders"}}},
		{http.MethodGet, "/v1/topics/orders/partitions/1/records", cluster.Need{Op: cluster.OpConsume, Topics: []string{"orders"}}},
		{http.MethodPost, "/v1/producers", cluster.Need{Op: cluster.OpProduce}},
		{http.MethodPut, "/v1/quotas", cluster.Need{Cluster: cluster.OpAlterConfigs}},
		{http.MethodDelete, "/v1/nodes/3/decommission", cluster.Need{Cluster: cluster.OpAlter}},
		{http.MethodGet, "/v1/groups", cluster.Need{Describe: true, Group: true}},
		{http.MethodGet, "/v1/groups/g", cluster.Need{Describe: true, Group: true, GroupName: "g"}},
		{http.MethodPost, "/v1/groups/g/heartbeat", cluster.Need{Op: cluster.OpConsume, Group: true, GroupName: "g"}},
		{http.MethodDelete, "/v1/groups/g", cluster.Need{DeleteGroup: true, GroupName: "g"}},
		{http.MethodGet, "/console/topics", cluster.Need{Admin: true}},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(tc.method)
		ctx.Request.SetRequestURI(tc.path)
		r, p, _ := routes.Lookup(tc.method, tc.path)
		if r == nil {
			t.Errorf("%s %s: no route", tc.method, tc.path)
			continue
		}
		if got := r.NeedFor(&ctx, p); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s: %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
	// Creating a topic: the body's name, for a create ACL (no body: an admin).
	var create fasthttp.RequestCtx
	create.Request.SetBodyString(`{"name":"orders","partitions":1}`)
	if r, p, _ := routes.Lookup(http.MethodPost, "/v1/topics"); !reflect.DeepEqual(r.NeedFor(&create, p), cluster.Need{Op: cluster.OpCreate, Topics: []string{"orders"}}) {
		t.Errorf("creating orders: %+v", r.NeedFor(&create, p))
	}
	if r, _, allowed := routes.Lookup(http.MethodPut, "/v1/topics/orders"); r != nil || len(allowed) != 2 {
		t.Errorf("PUT a topic: %v, allowed %v", r, allowed)
	}
}
