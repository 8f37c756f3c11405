package app

import (
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/sluicemq/sluice/libs/service"
)

func TestParseRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-http-addr", "nonsense"},
		{"-log-level", "loud"},
		{"-data-dir", ""},
	} {
		_, err := Parse(args)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%v: err = %v, want one naming the flag", args, err)
		}
	}
}

func TestWiringStartsAndStops(t *testing.T) {
	opts, err := Parse([]string{"-http-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-data-dir", filepath.Join(t.TempDir(), "o")})
	if err != nil {
		t.Fatal(err)
	}
	app := fxtest.New(t, append(opts, service.Module(), fx.NopLogger)...)
	app.RequireStart()
	app.RequireStop()
}
