package ctl

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

func TestFormatPlaceholders(t *testing.T) {
	rec := &record.Record{Offset: 42, Timestamp: 1700000000000, Key: []byte("k"), Value: []byte("v"),
		Headers: []record.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}}}
	for _, tc := range []struct{ format, want string }{
		{`%s\n`, "v\n"},
		{`%t/%p/%o %k=%s\t%T %h`, "orders/3/42 k=v\t1700000000000 a=1,b=2"},
		{`100%% %S %K`, "100% 1 1"},
		{`\\`, `\`},
	} {
		f, err := parseFormat(tc.format)
		if err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		if got := string(f.append(nil, "orders", 3, rec)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.format, got, tc.want)
		}
	}
	for _, bad := range []string{`%x`, `\q`} {
		if _, err := parseFormat(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"topic", "create"},
		{"topic", "create", "x", "--partitions", "0"},
		{"topic", "list", "-o", "yaml"},
		{"consume", "t", "--from-beginning", "--offset", "3"},
		{"consume", "t", "--isolation", "serializable"},
		{"txn", "list", "-o", "yaml"},
		{"txn", "describe"},
		{"produce", "t", "--acks", "some"},
		{"produce", "t", "--compression", "brotli"},
		{"produce", "t", "--linger", "-1s"},
	} {
		var out, errb bytes.Buffer
		if code := Main(args, strings.NewReader(""), &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}

func TestProducerConfigFromFlags(t *testing.T) {
	env := Env{Frontend: "127.0.0.1:1,127.0.0.1:2"}
	cfg, err := producerConfig(env, "sluicectl", "leader", "zstd", 0)
	if err != nil || cfg.Acks != protocol.AcksLeader || !cfg.DisableIdempotence || cfg.Compression != record.CodecZstd || cfg.Linger >= 0 || len(cfg.Frontends) != 2 {
		t.Fatalf("leader/zstd/no linger: %+v, %v", cfg, err)
	}
	cfg, err = producerConfig(env, "etl", "all", "none", 20*time.Millisecond)
	if err != nil || cfg.Acks != protocol.AcksAll || cfg.DisableIdempotence || cfg.Linger != 20*time.Millisecond || cfg.ClientID != "etl" {
		t.Fatalf("all: %+v, %v", cfg, err)
	}
}

func TestUnreachableClusterExitsOneWithReason(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"--metadata", "http://127.0.0.1:1", "topic", "list"}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "list topics") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

func TestParseArgsInterleaved(t *testing.T) {
	fs := newTestFlagSet()
	n := fs.Int("partitions", 1, "")
	pos, err := parseArgs(fs, []string{"a", "--partitions", "3", "b"})
	if err != nil || *n != 3 || len(pos) != 2 || pos[0] != "a" || pos[1] != "b" {
		t.Fatalf("pos %v n %d err %v", pos, *n, err)
	}
}

func newTestFlagSet() *flag.FlagSet { return flag.NewFlagSet("t", flag.ContinueOnError) }

// TestEveryCommandInUsageRuns: each command the usage names is one
// dispatch runs, and each command dispatch runs is in the usage (help and
// version aside: dispatch answers help, Run version).
func TestEveryCommandInUsageRuns(t *testing.T) {
	listed := map[string]bool{}
	section := strings.SplitN(usage, "COMMAND ...\n\n", 2)
	if len(section) != 2 {
		t.Fatal("the usage has no list of commands after its synopsis")
	}
	list, _, _ := strings.Cut(section[1], "\n\n") // the list ends at a blank line
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue // not a command's first line
		}
		f := strings.Fields(line)
		if _, ok := commands[f[0]]; ok || f[0] == "version" {
			listed[f[0]] = true
			continue
		}
		for _, sub := range strings.Split(f[1], "|") {
			name := f[0] + " " + sub
			if _, ok := commands[name]; !ok {
				t.Errorf("the usage names %q, which no command runs", name)
			}
			listed[name] = true
		}
	}
	if len(listed) < len(commands)-1 {
		t.Fatalf("read %d commands from the usage, want %d", len(listed), len(commands)-1)
	}
	for name := range commands {
		if !listed[name] && name != "help" {
			t.Errorf("command %q is missing from the usage", name)
		}
	}
}
