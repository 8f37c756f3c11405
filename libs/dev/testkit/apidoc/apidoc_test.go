package apidoc

import (
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluicemq/sluice/libs/server/service"
)

func TestProblems(t *testing.T) {
	h := func(*fasthttp.RequestCtx, service.Params) {}
	routes := []service.Route{
		{Method: "GET", Pattern: "/v1/topics", Handle: h},
		{Method: "POST", Pattern: "/v1/topics/{topic}/records", Handle: h},
		{Pattern: "/v1/groups/{rest...}", Handle: h},
	}
	const md = `# Reference
## Frontend
### Topics
#### GET /v1/topics
#### POST /v1/topics/{topic}/records
#### ANY /v1/groups/{rest...}
## Metadata
#### GET /v1/cluster
`
	for _, tc := range []struct {
		name, md, section string
		want              []string // substrings of each problem, in order
	}{
		{"complete", md, "Frontend", nil},
		{"missing", strings.Replace(md, "#### POST /v1/topics/{topic}/records\n", "", 1), "Frontend",
			[]string{"route POST /v1/topics/{topic}/records has no entry"}},
		{"another section's entry does not count", md, "Metadata", []string{
			"route GET /v1/topics has no entry", "route POST /v1/topics/{topic}/records has no entry",
			"route ANY /v1/groups/{rest...} has no entry", `line 8: "GET /v1/cluster" is not a route`}},
		{"stale", md + "## Frontend\n#### DELETE /v1/topics\n", "Frontend", []string{`line 10: "DELETE /v1/topics" is not a route`}},
		{"twice", strings.Replace(md, "### Topics\n", "### Topics\n#### GET /v1/topics\n", 1), "Frontend",
			[]string{`line 5: "GET /v1/topics" is documented again (first at line 4)`}},
		{"code blocks do not count", strings.Replace(md, "#### GET /v1/topics\n", "```\n#### GET /v1/topics\n## Metadata\n```\n", 1), "Frontend",
			[]string{"route GET /v1/topics has no entry"}},
		{"no section", md, "Offsets", []string{`no section "Offsets"`}},
	} {
		got := Problems([]byte(tc.md), tc.section, routes)
		if len(got) != len(tc.want) || !slices.EqualFunc(got, tc.want, strings.Contains) {
			t.Errorf("%s: %q, want problems with %q", tc.name, got, tc.want)
		}
	}
}
