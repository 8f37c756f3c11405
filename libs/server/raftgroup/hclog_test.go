package raftgroup

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHCLogger(log, hclog.Warn).Named("transport").With("peer", "2")
	h.Info("hidden")
	h.Warn("failed to contact", "id", "3", "odd")
	h.Error("boom")
	out := buf.String()
	if strings.Contains(out, "hidden") {
		t.Fatalf("info line passed a warn filter:\n%s", out)
	}
	for _, want := range []string{"level=WARN", `msg="failed to contact"`, "logger=raft.transport", "peer=2", "id=3", "extra=odd", "level=ERROR", "msg=boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
