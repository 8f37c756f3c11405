package app

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/dev/testkit"
	"github.com/sluicemq/sluice/libs/dev/testkit/fakecluster"
	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/groups"
	"github.com/sluicemq/sluice/libs/record"
	"github.com/sluicemq/sluice/libs/server/service"
	"github.com/sluicemq/sluice/services/frontend/internal/config"
	"github.com/sluicemq/sluice/services/frontend/internal/httpapi"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestWiring starts the whole frontend with fx against a fake metadata
// service and a fake storage node, produces through it and stops it.
func TestWiring(t *testing.T) {
	st, err := fakecluster.NewStorage()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	md := fakecluster.NewMetadata(cluster.Node{ID: 1, Addr: st.Addr()})
	defer md.Close()
	md.AddTopic("t", 1)
	offsets := fakecluster.NewOffsets("")
	defer offsets.Close()
	offsets.Describe(groups.Description{Group: "readers", State: groups.StateEmpty})

	c, err := config.Parse([]string{
		"-http-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-metadata", md.URL(),
		"-offsets", offsets.URL(), "-log-level", "error", "-id", "fe-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	var (
		srv   *httpapi.Server
		admin *service.Admin
	)
	app := fxtest.New(t, append(Options(c), service.Module(), fx.NopLogger, fx.Populate(&srv, &admin))...)
	app.RequireStart()

	testkit.Eventually(t, 5*time.Second, func() error {
		if code, body := get(t, "http://"+admin.Addr()+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("not ready: %d %s", code, body)
		}
		return nil
	})
	resp, err := http.Post("http://"+srv.Addr()+"/v1/topics/t/records", "application/json", strings.NewReader(`{"records":[{"value":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `{"offsets":[{"partition":0,"offset":0}]}` {
		t.Fatalf("produce: %d %s", resp.StatusCode, b)
	}
	useRoutes(t, "http://"+srv.Addr(), offsets)
	_, metrics := get(t, "http://"+admin.Addr()+"/metrics")
	for _, m := range []string{
		`sluice_frontend_produce_requests_total{status="200"} 2`,
		`sluice_frontend_produce_records_total{result="ok"} 2`,
		"sluice_frontend_produce_bytes_total",
		"sluice_frontend_produce_duration_seconds_count 2",
		"sluice_frontend_inflight_bytes 0",
		"sluice_frontend_throttled_total 0",
		"sluice_frontend_produce_retries_total 0",
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
	app.RequireStop()
}

// useRoutes goes through the routes beyond the record produce: a batches
// body, a fetch, the groups relay, a producer id and the console.
func useRoutes(t *testing.T, base string, offsets *fakecluster.Offsets) {
	t.Helper()
	batch := record.NewBuilder(record.CodecNone)
	batch.Append(record.Record{Timestamp: 1, Value: []byte("from the sdk")})
	bb, err := batch.Build()
	if err != nil {
		t.Fatal(err)
	}
	body := frontendapi.AppendBatches(nil, []frontendapi.PartitionBatch{{Partition: 0, Batch: bb}})
	if code, b := post(t, base+"/v1/topics/t/records", frontendapi.ContentTypeBatches, body); code != http.StatusOK || b != `{"results":[{"partition":0,"base_offset":1}]}` {
		t.Fatalf("batches: %d %s", code, b)
	}
	code, got := get(t, base+"/v1/topics/t/partitions/0/records?offset=0&max_wait_ms=0")
	if code != http.StatusOK || !strings.Contains(got, `"value":"hello"`) || !strings.Contains(got, `"value":"from the sdk"`) || !strings.Contains(got, `"next_offset":2`) {
		t.Fatalf("fetch: %d %s", code, got)
	}
	if code, got := get(t, base+"/v1/groups"); code != http.StatusOK || !strings.Contains(got, `"group":"readers"`) {
		t.Fatalf("groups: %d %s", code, got)
	}
	if r, _ := offsets.LastRequest(); r == nil || r.URL.Path != "/v1/groups" {
		t.Fatalf("the offsets service got %v", r)
	}
	if code, got := post(t, base+"/v1/producers", "application/json", []byte(`{}`)); code != http.StatusOK || !strings.Contains(got, `"producer_id"`) {
		t.Fatalf("producers: %d %s", code, got)
	}
	if code, got := get(t, base+"/console"); code != http.StatusOK || !strings.Contains(got, `<a href="/console/topics/t">t</a>`) {
		t.Fatalf("console: %d %s", code, got)
	}
}

func post(t *testing.T, url, contentType string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestParseErrorsNameTheFlag(t *testing.T) {
	for _, args := range [][]string{{"-max-records", "0"}, {"-max-in-flight-bytes", "1"}, {"-offsets", ","}, {"-fetch-timeout", "-1s"},
		{"-console-refresh", "1500ms"}, {"-console-timeout", "0s"}} {
		if _, err := Parse(args); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: err %v", args, err)
		}
	}
}
