package local

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/loadcheck"
	"github.com/sluicemq/sluice/libs/client"
	"github.com/sluicemq/sluice/libs/storageclient"
)

// dashboard is the part of deploy/grafana/sluice.json the test reads.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID          int    `json:"id"`
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Datasource  *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardMetricsExist: every panel of the Grafana dashboard is
// described and queries the templated Prometheus data source, and every
// metric its queries name is served by some process of a running cluster
// after a small workload (a renamed metric breaks this test, not the
// dashboard in production).
func TestDashboardMetricsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	raw, err := os.ReadFile("../../deploy/grafana/sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without title, uid or panels")
	}
	ids := map[int]bool{}
	names := map[string]bool{}
	metric := regexp.MustCompile(`sluice_[a-z_]+`)
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Fatalf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Description == "" || p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Fatalf("panel %q: needs a description, the ${datasource} data source and queries", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range metric.FindAllString(tg.Expr, -1) {
				names[n] = true
			}
		}
	}

	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createReplicated(t, ctx, c, "dash", 3, "2")
	p := quietProducer(t, c.FrontendURLs())
	l := loadcheck.NewKeyedLoad()
	l.SendN(t, p, "dash", 10, 2000)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A group with a committed offset, so that the lag series exist.
	if _, errOut, code := sluicectl(t, c, "", "consume", "dash", "--group", "dashboard", "--from-beginning", "--max-messages", "10"); code != 0 {
		t.Fatalf("consume: exit %d: %s", code, errOut)
	}
	// An error answer, so that the per-code error series exists.
	pool := storageclient.NewPool("dashboard-test")
	defer pool.Close()
	r := client.NewPartitionReader(client.NewMetadata(client.NewAdmin(c.MetadataURLs())), pool, "dash", 0, 1<<40, client.ReaderConfig{MaxWait: 10 * time.Millisecond})
	if _, err := r.Fetch(ctx); err == nil {
		t.Fatal("a fetch far past the log end succeeded")
	}

	served := map[string]bool{}
	for _, proc := range c.Procs {
		resp, err := http.Get("http://" + proc.AdminAddr + "/metrics")
		if err != nil {
			t.Fatalf("%s: %v", proc.Name, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
				served[f[2]] = true
			}
		}
		resp.Body.Close()
	}
	var missing []string
	for n := range names {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if !served[n] && !served[base] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("the dashboard queries metrics no process serves: %v", missing)
	}
	t.Logf("%d panels, %d metrics, all served", len(d.Panels), len(names))
}
