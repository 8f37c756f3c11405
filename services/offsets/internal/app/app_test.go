package app

import (
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/sluicemq/sluice/libs/server/service"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-http-addr", "nonsense"}, "http-addr"},
		{[]string{"-raft-addr", "nonsense"}, "raft-addr"},
		{[]string{"-log-level", "loud"}, "log-level"},
		{[]string{"-metadata", " , "}, "metadata"},
		{[]string{"-session-timeout", "10h"}, "session-timeout"},
		{[]string{"-heartbeat-interval", "0s"}, "heartbeat-interval"},
		{[]string{"-offsets-retention", "-1h"}, "offsets-retention"},
		{[]string{"-offsets-retention", "1m"}, "offsets-retention"}, // shorter than a session may be
		{[]string{"-peers", "1=x"}, "peers"},
		{[]string{"-authorize"}, "authorize"}, // without -tls-ca
		{[]string{"-transaction-max-timeout", "0s"}, "transaction-max-timeout"},
	} {
		_, err := Parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: err = %v, want one naming -%s", tc.args, err, tc.flag)
		}
	}
}

func TestWiringStartsAndStops(t *testing.T) {
	opts, err := Parse([]string{"-http-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0",
		"-data-dir", filepath.Join(t.TempDir(), "o"), "-bootstrap", "-metadata", "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	app := fxtest.New(t, append(opts, service.Module(), fx.NopLogger)...)
	app.RequireStart()
	app.RequireStop()
}
