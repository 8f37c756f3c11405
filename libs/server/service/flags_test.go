package service

import (
	"strings"
	"testing"
	"time"
)

func TestFlagsFallBackToEnvironment(t *testing.T) {
	env := map[string]string{"SLUICE_SEGMENT_BYTES": "4096", "SLUICE_WAIT": "3s", "SLUICE_NAME": "from-env"}
	fs := NewFlagSet("x")
	fs.lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var seg int64
	var wait time.Duration
	var name string
	fs.Int64(&seg, "segment-bytes", 1, "")
	fs.Duration(&wait, "wait", time.Second, "")
	fs.String(&name, "name", "def", "")
	if err := fs.Parse([]string{"-name", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if seg != 4096 || wait != 3*time.Second || name != "from-flag" {
		t.Fatalf("seg %d wait %v name %q", seg, wait, name)
	}
}

func TestBadValuesNameTheFlag(t *testing.T) {
	fs := NewFlagSet("x")
	fs.lookupEnv = func(k string) (string, bool) {
		if k == "SLUICE_PORT_COUNT" {
			return "many", true
		}
		return "", false
	}
	var n int
	fs.Int(&n, "port-count", 1, "")
	err := fs.Parse(nil)
	if err == nil || !strings.Contains(err.Error(), "-port-count") || !strings.Contains(err.Error(), "SLUICE_PORT_COUNT") {
		t.Fatalf("err = %v", err)
	}
	fs = NewFlagSet("y")
	fs.Int(&n, "port-count", 1, "")
	if err := fs.Parse([]string{"-port-count", "x"}); err == nil || !strings.Contains(err.Error(), "port-count") {
		t.Fatalf("err = %v", err)
	}
	if err := fs.Parse([]string{"stray"}); err == nil {
		t.Fatal("stray argument accepted")
	}
}

func TestCommonValidate(t *testing.T) {
	ok := Common{AdminAddr: "127.0.0.1:1", LogLevel: "info", LogFormat: "json"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		c    Common
		flag string
	}{
		{Common{AdminAddr: "nope", LogLevel: "info", LogFormat: "json"}, "admin-addr"},
		{Common{AdminAddr: "127.0.0.1:1", LogLevel: "chatty", LogFormat: "json"}, "log-level"},
		{Common{AdminAddr: "127.0.0.1:1", LogLevel: "info", LogFormat: "xml"}, "log-format"},
	} {
		if err := c.c.Validate(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: err = %v", c.c, err)
		}
	}
}
