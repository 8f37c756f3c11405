package service

import (
	"net/http"
	"slices"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestRouterLookup(t *testing.T) {
	h := func(*fasthttp.RequestCtx, Params) {}
	rt := NewRouter(
		Route{Method: http.MethodGet, Pattern: "/v1/topics", Handle: h},
		Route{Method: http.MethodPost, Pattern: "/v1/topics", Handle: h},
		Route{Method: http.MethodGet, Pattern: "/v1/topics/{topic}", Handle: h},
		Route{Method: http.MethodGet, Pattern: "/v1/topics/{topic}/partitions/{partition}/records", Handle: h},
		Route{Pattern: "/v1/groups/{rest...}", Handle: h},
	)
	for _, tc := range []struct {
		method, path string
		pattern      string // "" when none matches
		params       Params
		allowed      []string
	}{
		{"GET", "/v1/topics", "/v1/topics", nil, nil},
		{"POST", "/v1/topics", "/v1/topics", nil, nil},
		{"DELETE", "/v1/topics", "", nil, []string{"GET", "POST"}},
		{"GET", "/v1/topics/orders", "/v1/topics/{topic}", Params{{"topic", "orders"}}, nil},
		{"GET", "/v1/topics/", "", nil, nil},
		{"GET", "/v1/topics/orders/", "", nil, nil},
		{"GET", "/v1/topics/orders/partitions/2/records", "/v1/topics/{topic}/partitions/{partition}/records",
			Params{{"topic", "orders"}, {"partition", "2"}}, nil},
		{"GET", "/v1/topics/orders/partitions//records", "", nil, nil},
		{"GET", "/v1/topics/orders/partitions/2/records/x", "", nil, nil},
		{"PUT", "/v1/groups/g/offsets", "/v1/groups/{rest...}", Params{{"rest", "g/offsets"}}, nil},
		{"GET", "/v1/groups/", "/v1/groups/{rest...}", Params{{"rest", ""}}, nil},
		{"GET", "/v1/groups", "", nil, nil},
		{"GET", "/v2/topics", "", nil, nil},
		{"GET", "", "", nil, nil},
	} {
		r, p, allowed := rt.Lookup(tc.method, tc.path)
		got := ""
		if r != nil {
			got = r.Pattern
		}
		if got != tc.pattern || !slices.Equal(p, tc.params) || !slices.Equal(allowed, tc.allowed) {
			t.Errorf("%s %s: %q %v %v, want %q %v %v", tc.method, tc.path, got, p, allowed, tc.pattern, tc.params, tc.allowed)
		}
	}
	if rt.Routes()[2].Method != http.MethodGet {
		t.Fatal("Routes does not return the table in order")
	}
}

func TestRouterRefusesBadPatterns(t *testing.T) {
	h := func(*fasthttp.RequestCtx, Params) {}
	for _, pattern := range []string{"v1/topics", "/v1/{rest...}/x", "/v1/{}", "/v1/a{b}"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("pattern %q was taken", pattern)
				}
			}()
			NewRouter(Route{Pattern: pattern, Handle: h})
		}()
	}
}
