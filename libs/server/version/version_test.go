package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestStringNamesTheBuild(t *testing.T) {
	s := String("sluice-x")
	for _, want := range []string{"sluice-x ", Version, "(commit ", runtime.Version()} {
		if !strings.Contains(s, want) {
			t.Fatalf("%q lacks %q", s, want)
		}
	}
}

func TestAsked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"-version"}, true},
		{[]string{"--version"}, true},
		{[]string{"-data-dir", "x", "--version"}, true},
		{[]string{"-versions"}, false},
		{[]string{"version"}, false},
	} {
		if got := Asked(tc.args); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.args, got, tc.want)
		}
	}
}
