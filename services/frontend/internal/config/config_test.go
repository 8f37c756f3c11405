package config

import (
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Addr != "127.0.0.1:8080" || c.Common.AdminAddr != "127.0.0.1:8081" || c.Metadata != "http://127.0.0.1:7070" ||
		c.HTTP.MaxBodyBytes != 8<<20 || c.Produce.MaxRecords != 10000 || c.Produce.Timeout != 30*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if c.NodeID == "" {
		t.Error("node id not defaulted to the host name")
	}
	if c.Offsets != "http://127.0.0.1:7080,http://127.0.0.1:7083,http://127.0.0.1:7086" || c.Produce.MaxInFlightBytes != 256<<20 ||
		c.Fetch.Timeout != 10*time.Second || c.Fetch.RetryBackoff != c.Produce.RetryBackoff {
		t.Fatalf("defaults %+v", c)
	}
	if c.Produce.Linger != 2*time.Millisecond || c.Produce.BatchMaxBytes != 1<<20 {
		t.Fatalf("batching defaults: linger %v, batch max %d", c.Produce.Linger, c.Produce.BatchMaxBytes)
	}
}

func TestFlagsAndEnvironment(t *testing.T) {
	t.Setenv("SLUICE_MAX_RECORDS", "5")
	t.Setenv("SLUICE_PRODUCE_TIMEOUT", "2s")
	c, err := Parse([]string{"-http-addr", "0.0.0.0:9999", "-node-id", "fe-1", "-max-body-bytes", "4096", "-produce-timeout", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Addr != "0.0.0.0:9999" || c.NodeID != "fe-1" || c.HTTP.MaxBodyBytes != 4096 || c.Produce.MaxRecords != 5 || c.Produce.Timeout != 3*time.Second {
		t.Fatalf("parsed %+v", c)
	}
	t.Setenv("SLUICE_OFFSETS", "127.0.0.1:1,https://offsets.example:443/")
	c, err = Parse([]string{"-max-in-flight-bytes", "16777216", "-fetch-timeout", "2s", "-retry-backoff", "7ms"})
	if err != nil || c.Offsets != "127.0.0.1:1,https://offsets.example:443/" || c.Produce.MaxInFlightBytes != 16<<20 ||
		c.Fetch.Timeout != 2*time.Second || c.Fetch.RetryBackoff != 7*time.Millisecond {
		t.Fatalf("parsed %+v %v", c, err)
	}
	t.Setenv("SLUICE_BATCH_MAX_BYTES", "65536")
	c, err = Parse([]string{"-linger", "0"})
	if err != nil || c.Produce.Linger != 0 || c.Produce.BatchMaxBytes != 64<<10 {
		t.Fatalf("batching flags: %+v %v", c.Produce, err)
	}
	if c, err := Parse([]string{"-id", "fe-2"}); err != nil || c.NodeID != "fe-2" {
		t.Fatalf("-id alias: %+v %v", c.NodeID, err)
	}
}

func TestValidationNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-http-addr", "nope"}, "-http-addr"},
		{[]string{"-admin-addr", "nope"}, "-admin-addr"},
		{[]string{"-metadata", " , "}, "-metadata"},
		{[]string{"-max-body-bytes", "10"}, "-max-body-bytes"},
		{[]string{"-max-records", "0"}, "-max-records"},
		{[]string{"-produce-timeout", "0s"}, "-produce-timeout"},
		{[]string{"-produce-retries", "-1"}, "-produce-retries"},
		{[]string{"-retry-backoff", "1s", "-retry-backoff-max", "10ms"}, "-retry-backoff-max"},
		{[]string{"-metadata-watch-wait", "0s"}, "-metadata-watch-wait"},
		{[]string{"-log-level", "loud"}, "-log-level"},
		{[]string{"-max-records", "many"}, "-max-records"},
		{[]string{"-offsets", ""}, "-offsets"},
		{[]string{"-offsets", "ftp://x:1"}, "-offsets"},
		{[]string{"-offsets", "http://x:1/v1"}, "-offsets"},
		{[]string{"-max-in-flight-bytes", "1000"}, "-max-in-flight-bytes"},
		{[]string{"-max-in-flight-bytes", "4096", "-max-body-bytes", "8192"}, "-max-in-flight-bytes"},
		{[]string{"-max-in-flight-bytes", "lots"}, "-max-in-flight-bytes"},
		{[]string{"-fetch-timeout", "0s"}, "-fetch-timeout"},
		{[]string{"-linger", "-1ms"}, "-linger"},
		{[]string{"-linger", "1m"}, "-linger"},
		{[]string{"-linger", "2s", "-produce-timeout", "1s"}, "-linger"},
		{[]string{"-batch-max-bytes", "100"}, "-batch-max-bytes"},
		{[]string{"-batch-max-bytes", "2147483647"}, "-batch-max-bytes"},
	} {
		_, err := Parse(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: err %v, want one naming %s", tc.args, err, tc.flag)
		}
	}
}
