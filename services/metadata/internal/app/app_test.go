package app

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/metadata/internal/api"
	"github.com/sluicemq/sluice/services/metadata/internal/fsm"
)

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Raft.ID != "1" || cfg.API.Addr != "127.0.0.1:7070" || cfg.Raft.RaftAddr != "127.0.0.1:7071" ||
		cfg.Common.AdminAddr != "127.0.0.1:7072" || cfg.Raft.DataDir != "./data/metadata" || cfg.Raft.Bootstrap ||
		cfg.Controller.SessionTimeout != 3*time.Second || cfg.Controller.PreferredLeaderInterval != 5*time.Second ||
		cfg.Raft.HTTPAddr != cfg.API.Addr || cfg.Controller.ProducerIDBlockSize != 1000 {
		t.Fatalf("defaults = %+v", cfg)
	}
}

func TestParseConfigPeersAndEnv(t *testing.T) {
	t.Setenv("SLUICE_SESSION_TIMEOUT", "9s")
	t.Setenv("SLUICE_PREFERRED_LEADER_INTERVAL", "0")
	cfg, err := ParseConfig([]string{"-id", "b", "-bootstrap", "-raft-addr", "0.0.0.0:7071",
		"-peers", "a=m1:7071=m1:7070, b=m2:7071=m2:7070,c=m3:7071=m3:7070"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Raft.Peers) != 3 || cfg.Raft.Peers[1].HTTPAddr != "m2:7070" || !cfg.Raft.Bootstrap || cfg.Controller.SessionTimeout != 9*time.Second ||
		cfg.Controller.PreferredLeaderInterval != 0 {
		t.Fatalf("config = %+v", cfg)
	}
}

func TestParseConfigErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		flag string
	}{
		{[]string{"-http-addr", "nope"}, "-http-addr"},
		{[]string{"-raft-addr", "nope"}, "-raft-addr"},
		{[]string{"-admin-addr", "nope"}, "-admin-addr"},
		{[]string{"-session-timeout", "1ms"}, "-session-timeout"},
		{[]string{"-session-timeout", "soon"}, "-session-timeout"},
		{[]string{"-preferred-leader-interval", "-1s"}, "-preferred-leader-interval"},
		{[]string{"-preferred-leader-interval", "often"}, "-preferred-leader-interval"},
		{[]string{"-peers", "a=b"}, "-peers"},
		{[]string{"-peers", "2=h:1=h:2"}, "-peers"}, // this member (-id 1) is missing
		{[]string{"-peers", "1=h:1=h:2,1=h:3=h:4"}, "-peers"},
		{[]string{"-id", ""}, "-id"},
		{[]string{"-data-dir", ""}, "-data-dir"},
		{[]string{"-raft-addr", "0.0.0.0:7071"}, "-raft-addr"}, // not advertisable without -peers
		{[]string{"-raft-log-level", "loud"}, "-raft-log-level"},
		{[]string{"-producer-id-block-size", "-1"}, "-producer-id-block-size"},
		{[]string{"-producer-id-block-size", "many"}, "-producer-id-block-size"},
		{[]string{"-authorize"}, "-authorize"}, // without -tls-ca
	}
	for _, tc := range tests {
		_, err := ParseConfig(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("ParseConfig(%q) = %v; want an error naming %s", tc.args, err, tc.flag)
		}
	}
}

// TestWiring starts the whole fx graph of the binary on free ports and uses
// it through the HTTP API.
func TestWiring(t *testing.T) {
	cfg, err := ParseConfig([]string{"-bootstrap", "-data-dir", filepath.Join(t.TempDir(), "md"),
		"-http-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-log-level", "error"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		srv   *api.Server
		ready *service.Readiness
	)
	app := fxtest.New(t, append(Options(cfg), service.Module(), fx.NopLogger, fx.Populate(&srv, &ready))...)
	app.RequireStart()
	defer app.RequireStop()

	testkit.Eventually(t, 20*time.Second, ready.Check) // fails with what is not ready
	c := cluster.NewClient([]string{srv.Addr()})
	ctx := context.Background()
	if _, err := c.Register(ctx, cluster.RegisterRequest{ID: 1, Addr: "127.0.0.1:9001"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, cluster.CreateTopicRequest{Name: "wired", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if tp, err := c.DescribeTopic(ctx, "wired"); err != nil || tp.Name != "wired" {
		t.Fatalf("describe = %+v, %v", tp, err)
	}
	if r, err := c.InitProducerID(ctx); err != nil || r.ProducerID != fsm.FirstProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerID = %+v, %v", r, err)
	}
}
