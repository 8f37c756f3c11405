package app

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/service"
	"github.com/sluicemq/sluice/services/frontend/internal/config"
	"github.com/sluicemq/sluice/services/frontend/internal/fakecluster"
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

	c, err := config.Parse([]string{
		"-http-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0", "-metadata", md.URL(),
		"-log-level", "error", "-id", "fe-test",
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

	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := get(t, "http://"+admin.Addr()+"/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %d %s", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Post("http://"+srv.Addr()+"/v1/topics/t/records", "application/json", strings.NewReader(`{"records":[{"value":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `{"offsets":[{"partition":0,"offset":0}]}` {
		t.Fatalf("produce: %d %s", resp.StatusCode, b)
	}
	_, metrics := get(t, "http://"+admin.Addr()+"/metrics")
	for _, m := range []string{
		`sluice_frontend_produce_requests_total{status="200"} 1`,
		`sluice_frontend_produce_records_total{result="ok"} 1`,
		"sluice_frontend_produce_bytes_total",
		"sluice_frontend_produce_duration_seconds_count 1",
		"sluice_frontend_produce_retries_total 0",
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
	app.RequireStop()
}

func TestParseErrorsNameTheFlag(t *testing.T) {
	if _, err := Parse([]string{"-max-records", "0"}); err == nil || !strings.Contains(err.Error(), "-max-records") {
		t.Fatalf("err %v", err)
	}
}
