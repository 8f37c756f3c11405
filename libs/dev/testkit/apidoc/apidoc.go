// Package apidoc checks the HTTP API reference, docs/http-api.md, against a
// service's route table, so that a route added without documentation (or
// removed with its entry left behind) fails the service's tests.
//
// The reference has one level-2 section per service ("## Frontend"), and in
// it one heading per route (level 3 to 6) whose whole text is the route's
// method and pattern as the table writes them: "#### GET /v1/topics/{topic}",
// with ANY for a route of every method. Headings inside fenced code blocks
// do not count.
package apidoc

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/server/service"
)

// Entry is the heading text of a route's entry: its method (ANY when it
// answers every method) and its pattern.
func Entry(r service.Route) string {
	m := r.Method
	if m == "" {
		m = "ANY"
	}
	return m + " " + r.Pattern
}

// entryHeading matches a heading that documents a route.
var entryHeading = regexp.MustCompile(`^#{3,6} ([A-Z]+ /\S*)$`)

// Problems compares section of the Markdown text md with routes: a route
// without an entry, an entry no route has, an entry written twice, or a
// missing section is one problem each, in the order found.
func Problems(md []byte, section string, routes []service.Route) []string {
	entries := map[string]int{} // entry -> line number
	var problems []string
	found, in, fence := false, false, false
	for i, line := range strings.Split(string(md), "\n") {
		line = strings.TrimRight(line, " \r")
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if title, ok := strings.CutPrefix(line, "## "); ok {
			in = title == section
			found = found || in
			continue
		}
		m := entryHeading.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		if first, dup := entries[m[1]]; dup {
			problems = append(problems, fmt.Sprintf("line %d: %q is documented again (first at line %d)", i+1, m[1], first))
			continue
		}
		entries[m[1]] = i + 1
	}
	if !found {
		return []string{fmt.Sprintf("no section %q (a line %q)", section, "## "+section)}
	}
	for _, r := range routes {
		e := Entry(r)
		if _, ok := entries[e]; !ok {
			problems = append(problems, fmt.Sprintf("route %s has no entry: add a heading %q to section %q", e, "#### "+e, section))
		}
		delete(entries, e)
	}
	stale := slices.SortedFunc(maps.Keys(entries), func(a, b string) int { return entries[a] - entries[b] })
	for _, e := range stale {
		problems = append(problems, fmt.Sprintf("line %d: %q is not a route of the table", entries[e], e))
	}
	return problems
}

// CheckRoutes fails t with every problem of section of the Markdown file at
// path (relative to the test's directory) against routes.
func CheckRoutes(t testing.TB, path, section string, routes []service.Route) {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the HTTP API reference: %v", err)
	}
	for _, p := range Problems(md, section, routes) {
		t.Errorf("%s: %s", path, p)
	}
}
