package bench

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/tools/internal/ctl"
)

func noEnv(string) string { return "" }

func TestParseDefaults(t *testing.T) {
	c, err := Parse([]string{"produce"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeProduce || c.Records != 1_000_000 || c.Duration != 0 || c.Warmup != 0 || c.Partitions != 4 ||
		c.ReplicationFactor != 0 || c.RecordSize != 100 || c.Producers != 1 || c.Consumers != 1 || c.Rate != 0 {
		t.Fatalf("amounts: %+v", c)
	}
	if c.Acks != protocol.AcksAll || !c.Idempotent || c.Compression != record.CodecNone || c.Linger != 5*time.Millisecond ||
		c.BatchSize != 1<<20 || c.Body != BodySDK || c.JSONBatch != 1000 || c.Keys.Kind != KeysNone || c.Progress != ProgressAuto {
		t.Fatalf("producing: %+v", c)
	}
	if strings.Join(c.Frontends, ",") != ctl.DefaultFrontend || strings.Join(c.Metadata, ",") != ctl.DefaultFrontend ||
		strings.Join(c.Offsets, ",") != ctl.DefaultOffsets {
		t.Fatalf("addresses: frontends %v metadata %v offsets %v", c.Frontends, c.Metadata, c.Offsets)
	}
	if !strings.HasPrefix(c.Group, "sluice-bench-") || c.Topic != "sluice-bench" {
		t.Fatalf("group %q topic %q", c.Group, c.Topic)
	}
}

func TestParseRelations(t *testing.T) {
	c, err := Parse([]string{"produce", "--duration", "10s"}, noEnv)
	if err != nil || c.Records != 0 || c.Duration != 10*time.Second || c.Warmup != 2*time.Second {
		t.Fatalf("--duration: records %d warmup %v, %v", c.Records, c.Warmup, err)
	}
	c, err = Parse([]string{"consume", "--duration", "10s"}, noEnv)
	if err != nil || c.Warmup != 0 {
		t.Fatalf("consume --duration: warmup %v, %v", c.Warmup, err)
	}
	c, err = Parse([]string{"produce", "--duration", "10s", "--warmup", "0s"}, noEnv)
	if err != nil || c.Warmup != 0 {
		t.Fatalf("explicit --warmup 0: %v, %v", c.Warmup, err)
	}
	c, err = Parse([]string{"produce", "--acks", "leader", "--compression", "zstd", "--linger", "0s", "--keys", "fixed:10"}, noEnv)
	if err != nil || c.Idempotent || c.Acks != protocol.AcksLeader || c.Compression != record.CodecZstd || c.Keys != (KeySpec{Kind: KeysFixed, N: 10}) {
		t.Fatalf("leader: %+v, %v", c, err)
	}
	if pc := c.producerConfig(); pc.Linger >= 0 || !pc.DisableIdempotence || pc.Acks != protocol.AcksLeader {
		t.Fatalf("--linger 0 must send at once, leader without idempotence: %+v", pc)
	}
	// Flags after, before and between; --size is --record-size.
	c, err = Parse([]string{"--size", "64", "e2e", "--metadata", "m1:1,m2:2", "--frontends", "http://f:1/"}, noEnv)
	if err != nil || c.Mode != ModeE2E || c.RecordSize != 64 || len(c.Metadata) != 2 || c.Metadata[0] != "http://m1:1" || c.Frontends[0] != "http://f:1" {
		t.Fatalf("interleaved: %+v, %v", c, err)
	}
	c, err = Parse([]string{"share", "--consumers", "16", "--group-config", "share.max.fetch.records=1000", "--duration", "5s"}, noEnv)
	if err != nil || c.Mode != ModeShare || c.Consumers != 16 || c.Warmup != 0 || c.GroupConfig["share.max.fetch.records"] != "1000" {
		t.Fatalf("share: %+v, %v", c, err)
	}
	if set, err := shareGroupConfig(c.GroupConfig); err != nil || set["share.auto.offset.reset"] != "earliest" || set["share.max.fetch.records"] != "1000" {
		t.Fatalf("share group settings: %v, %v; want the given value and share.auto.offset.reset=earliest", set, err)
	}
	env := map[string]string{"SLUICE_FRONTEND": "http://e:8080", "SLUICE_OFFSETS": "o:1"}
	c, err = Parse([]string{"e2e"}, func(k string) string { return env[k] })
	if err != nil || c.Frontends[0] != "http://e:8080" || c.Metadata[0] != "http://e:8080" || c.Offsets[0] != "http://o:1" {
		t.Fatalf("environment: %+v, %v", c, err)
	}
}

func TestParseErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "mode"},
		{[]string{"fly"}, "mode"},
		{[]string{"produce", "consume"}, "mode"},
		{[]string{"produce", "--nope"}, "-nope"},
		{[]string{"produce", "--records", "x"}, "-records"},
		{[]string{"produce", "--records", "0"}, "--records"},
		{[]string{"produce", "--records", "5", "--duration", "1s"}, "--duration"},
		{[]string{"produce", "--duration", "-1s"}, "--duration"},
		{[]string{"produce", "--duration", "0s"}, "--duration"},
		{[]string{"produce", "--rate", "-1"}, "--rate"},
		{[]string{"produce", "--warmup", "-1s"}, "--warmup"},
		{[]string{"consume", "--warmup", "1s"}, "--warmup"},
		{[]string{"produce", "--partitions", "0"}, "--partitions"},
		{[]string{"produce", "--replication-factor", "-1"}, "--replication-factor"},
		{[]string{"produce", "--producers", "0"}, "--producers"},
		{[]string{"e2e", "--consumers", "0"}, "--consumers"},
		{[]string{"produce", "--consumers", "2"}, "--consumers"},
		{[]string{"consume", "--rate", "10"}, "--rate"},
		{[]string{"produce", "--grace", "1s"}, "--grace"},
		{[]string{"e2e", "--grace", "-1s"}, "--grace"},
		{[]string{"produce", "--record-size", "-1"}, "--record-size"},
		{[]string{"e2e", "--record-size", "7"}, "--record-size"},
		{[]string{"produce", "--record-size", "2000000"}, "--record-size"},
		{[]string{"produce", "--size", "1", "--record-size", "2"}, "--size"},
		{[]string{"produce", "--acks", "some"}, "--acks"},
		{[]string{"produce", "--acks", "leader", "--idempotence"}, "--idempotence"},
		{[]string{"produce", "--compression", "brotli"}, "--compression"},
		{[]string{"produce", "--keys", "fixed:0"}, "--keys"},
		{[]string{"produce", "--keys", "sometimes"}, "--keys"},
		{[]string{"produce", "--body", "xml"}, "--body"},
		{[]string{"produce", "--body", "json", "--linger", "1ms"}, "--linger"},
		{[]string{"produce", "--body", "json", "--compression", "gzip"}, "--compression"},
		{[]string{"produce", "--json-batch", "10"}, "--json-batch"},
		{[]string{"produce", "--body", "json", "--json-batch", "0"}, "--json-batch"},
		{[]string{"produce", "--batch-size", "10"}, "--batch-size"},
		{[]string{"produce", "--txn-records", "-1"}, "--txn-records"},
		{[]string{"produce", "--txn-records", "100", "--acks", "leader"}, "--txn-records"},
		{[]string{"produce", "--body", "json", "--txn-records", "100"}, "--txn-records"},
		{[]string{"produce", "--protocol", "kafka", "--txn-records", "100", "--acks", "leader"}, "--txn-records"},
		{[]string{"produce", "--linger", "-1ms"}, "--linger"},
		{[]string{"produce", "--delivery-timeout", "0s"}, "--delivery-timeout"},
		{[]string{"produce", "--progress", "sometimes"}, "--progress"},
		{[]string{"produce", "--topic", "bad topic!"}, "--topic"},
		{[]string{"e2e", "--group", "bad group!"}, "--group"},
		{[]string{"produce", "--replication-factor", "1", "--config", "min.insync.replicas=3"}, "--config"},
		{[]string{"produce", "--config", "nokv"}, "-config"},
		{[]string{"produce", "--frontends", " , "}, "--frontends"},
		{[]string{"e2e", "--offsets", ","}, "--offsets"},
		{[]string{"consume", "--group-config", "share.max.fetch.records=10"}, "--group-config"},
		{[]string{"share", "--group-config", "share.max.fetch.records=0"}, "--group-config"},
		{[]string{"share", "--group-config", "share.max.fetch.records=3000"}, "--group-config"}, // above the window of 2000
		{[]string{"share", "--group-config", "nope=1"}, "--group-config"},
		{[]string{"share", "--rate", "10"}, "--rate"},
		{[]string{"share", "--protocol", "kafka"}, "--protocol"},
	} {
		_, err := Parse(tc.args, noEnv)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want a usage error naming %s", tc.args, err, tc.want)
		}
	}
}

func TestMainUsageExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"produce", "--records", "0"}, &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "--records") || !strings.Contains(errb.String(), "sluice-bench -h") || out.Len() != 0 {
		t.Fatalf("bad flag: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := Main([]string{"-h"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "--json-batch") {
		t.Fatalf("-h: exit %d, stdout %q", code, out.String())
	}
}

func TestMainUnreachableClusterExitsOne(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"produce", "--frontends", "http://127.0.0.1:1", "--records", "10", "--progress", "off"}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "topic") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
