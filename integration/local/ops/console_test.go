package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicemq/sluice/integration/internal/itest"
	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/groups"
)

// chromiumTimeout bounds one headless Chromium run; on expiry its whole
// process group is killed.
const chromiumTimeout = 60 * time.Second

// runChromium runs headless Chromium with args after the common flags, in a
// fresh profile and HOME, and returns its standard output. It fails the test
// when Chromium fails or outlives chromiumTimeout (then its process group is
// killed: Chromium's helpers included).
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	home := t.TempDir()
	common := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(home, "profile"),
		"--no-first-run", "--no-default-browser-check", "--disable-dev-shm-usage", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
	}
	cmd := exec.CommandContext(ctx, bin, append(common, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second // helpers holding the output pipes do not hold Wait up
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("chromium %v did not finish within %v and was killed; stderr:\n%s", args, chromiumTimeout, tail(errOut.Bytes(), 4000))
	}
	if err != nil {
		t.Fatalf("chromium %v: %v; stderr:\n%s", args, err, tail(errOut.Bytes(), 4000))
	}
	return out.Bytes()
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// dumpDOM loads url in headless Chromium and returns the DOM it rendered.
func dumpDOM(t *testing.T, bin, url string) string {
	t.Helper()
	var dom string
	for attempt := 1; attempt <= 3; attempt++ {
		dom = string(runChromium(t, bin, "--dump-dom", url))
		if strings.TrimSpace(dom) != "" {
			break
		}
		// Headless chromium on a loaded machine now and then exits 0
		// without printing the page: nothing was rendered, not even an
		// error, so ask it again.
		t.Logf("chromium printed nothing for %s (attempt %d)", url, attempt)
	}
	if !strings.Contains(dom, "Sluice console") {
		t.Fatalf("%s did not render a console page:\n%s", url, dom)
	}
	return dom
}

// artifactsDir is where the test leaves screenshots: $SLUICE_ARTIFACTS, else
// integration/artifacts (ignored by git).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLUICE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves a 1280x900 PNG of url under the artifacts directory and
// logs its path.
func screenshot(t *testing.T, bin, url, name string) {
	t.Helper()
	path := filepath.Join(artifactsDir(t), name)
	_ = os.Remove(path)
	runChromium(t, bin, "--screenshot="+path, "--window-size=1280,900", url)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 10_000 {
		t.Fatalf("screenshot %s of %s is not a PNG of a page (%d bytes)", path, url, len(b))
	}
	t.Logf("screenshot of %s: %s", url, path)
}

// domRow returns the table row of dom whose opening tag holds attr, "" when
// none does.
func domRow(dom, attr string) string {
	return regexp.MustCompile(`(?s)<tr[^>]*` + regexp.QuoteMeta(attr) + `[^>]*>.*?</tr>`).FindString(dom)
}

// produceToPartitions sends n records to each partition of topic through the
// frontend, with acks=all.
func produceToPartitions(t *testing.T, frontend, topic string, partitions, n int) {
	t.Helper()
	var recs []map[string]any
	for p := 0; p < partitions; p++ {
		for i := 0; i < n; i++ {
			recs = append(recs, map[string]any{"value": fmt.Sprintf("p%d-%d", p, i), "partition": p})
		}
	}
	r := itest.PostJSON(t, frontend+"/v1/topics/"+topic+"/records?acks=all", map[string]any{"records": recs})
	if len(r.Offsets) != len(recs) {
		t.Fatalf("produce: %d answers for %d records", len(r.Offsets), len(recs))
	}
	for _, o := range r.Offsets {
		if o.ErrorCode != 0 {
			t.Fatalf("produce: %s", o.Error)
		}
	}
}

// TestConsoleInBrowser: the frontend's /console pages, rendered by headless
// Chromium against a real cluster, show a topic with its partitions and
// leaders and a consumer group with the exact lag the test set up; the
// overview, the topic page and the group page are saved as screenshots.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	bin := itest.NeedTool(t, "chromium", "chromium")
	c := itest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const topic, group, perPartition = "console-orders", "console-readers", 10
	itest.CreateTopic(t, ctx, c, topic, 3, 3)
	produceToPartitions(t, c.FrontendURL(), topic, 3, perPartition)
	// Committed 4, 10 and 7 of 10: lags 6, 0 and 3, 9 in all.
	committed := []int64{4, 10, 7}
	wantLag := []int64{6, 0, 3}
	const wantTotal = 9
	gc := groups.NewClient(c.OffsetsURLs())
	var offs []groups.Offset
	for p, o := range committed {
		offs = append(offs, groups.Offset{Topic: topic, Partition: int32(p), Offset: o})
	}
	if err := gc.Commit(ctx, group, groups.CommitRequest{Offsets: offs}); err != nil {
		t.Fatal(err)
	}
	// The offsets service reads the log ends from the leaders: wait until it
	// sees every record.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := gc.Describe(ctx, group)
		if err == nil && d.TotalLag == wantTotal {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group lag never reached %d: %+v, %v", wantTotal, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	described, err := cluster.NewClient(c.MetadataURLs()).DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}

	base := c.FrontendURL() + "/console"
	overview := dumpDOM(t, bin, base)
	if strings.Contains(overview, `role="alert"`) {
		t.Errorf("error banner on the overview of a healthy cluster:\n%s", overview)
	}
	if !strings.Contains(overview, `id="nodes-alive">3 of 3`) || !strings.Contains(overview, `id="offline">0`) {
		t.Fatalf("overview health:\n%s", overview)
	}
	row := domRow(overview, `data-topic="`+topic+`"`)
	for _, want := range []string{`href="/console/topics/` + topic + `"`, `<td class="num">3</td><td class="num">3</td>`, `<td class="num">30</td>`} {
		if !strings.Contains(row, want) {
			t.Fatalf("overview row of %s lacks %q: %q", topic, want, row)
		}
	}

	topicDOM := dumpDOM(t, bin, base+"/topics/"+topic)
	for _, p := range described.Partitions {
		r := domRow(topicDOM, fmt.Sprintf(`id="partition-%d"`, p.ID))
		if !strings.Contains(r, fmt.Sprintf(`data-leader="%d"`, p.Leader)) || !strings.Contains(r, fmt.Sprintf(`<td class="num">%d</td>`, perPartition)) {
			t.Fatalf("partition %d (leader %d, %d records) on the topic page: %q", p.ID, p.Leader, perPartition, r)
		}
	}

	// The page shows what the offsets service answered within the console's
	// look-up timeout; on a loaded machine one rendering may come without
	// the group (a banner says why), and the page reloads itself: so does
	// the test, for a while.
	var groupsRow, groupsDOM string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		groupsDOM = dumpDOM(t, bin, base+"/groups")
		groupsRow = domRow(groupsDOM, `data-group="`+group+`"`)
		if groupsRow != "" || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(groupsRow, fmt.Sprintf(`data-total-lag="%d"`, wantTotal)) {
		t.Fatalf("groups page row of %s: %q\n%s", group, groupsRow, groupsDOM)
	}
	groupDOM := dumpDOM(t, bin, base+"/groups/"+group)
	if !strings.Contains(groupDOM, fmt.Sprintf(`id="total-lag" data-lag="%d">%d<`, wantTotal, wantTotal)) {
		t.Fatalf("group page total lag:\n%s", groupDOM)
	}
	for p, lag := range wantLag {
		r := domRow(groupDOM, fmt.Sprintf(`data-partition="%d"`, p))
		want := fmt.Sprintf(`<td class="num">%d</td><td class="num">%d</td><td class="num">%d</td>`, committed[p], perPartition, lag)
		if !strings.Contains(r, fmt.Sprintf(`data-lag="%d"`, lag)) || !strings.Contains(r, want) {
			t.Fatalf("partition %d on the group page, want committed %d, end %d, lag %d: %q", p, committed[p], perPartition, lag, r)
		}
	}

	screenshot(t, bin, base, "console-overview.png")
	screenshot(t, bin, base+"/topics/"+topic, "console-topic.png")
	screenshot(t, bin, base+"/groups/"+group, "console-group.png")
}
