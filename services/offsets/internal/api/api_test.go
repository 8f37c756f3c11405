package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/sluicemq/sluice/services/offsets/internal/store"
)

func startServer(t *testing.T, path string) (*Server, string) {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New("127.0.0.1:0", st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Stop(context.Background()); _ = st.Close() })
	return s, "http://" + s.Addr()
}

func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewBufferString(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestCommitAndFetchOverHTTPAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offsets.db")
	s, base := startServer(t, path)
	if code, b := call(t, "POST", base+"/v1/groups/g1/offsets", `{"offsets":[{"topic":"orders","partition":2,"offset":100}]}`); code != 200 {
		t.Fatalf("commit: %d %s", code, b)
	}
	if code, b := call(t, "POST", base+"/v1/groups/g1/offsets", `{"offsets":[{"topic":"orders","partition":2,"offset":-5}]}`); code != 400 {
		t.Fatalf("negative offset: %d %s", code, b)
	}
	if code, b := call(t, "POST", base+"/v1/groups/g1/offsets", `{"offsets":`); code != 400 || !bytes.Contains(b, []byte("malformed")) {
		t.Fatalf("malformed: %d %s", code, b)
	}
	_ = s.Stop(context.Background())
	_ = s.st.Close()

	_, base = startServer(t, path)
	code, b := call(t, "GET", base+"/v1/groups/g1/offsets?topic=orders", "")
	var resp OffsetsResponse
	if code != 200 || json.Unmarshal(b, &resp) != nil || len(resp.Offsets) != 1 || resp.Offsets[0].Offset != 100 || resp.Offsets[0].Partition != 2 {
		t.Fatalf("fetch after restart: %d %s", code, b)
	}
	if code, b := call(t, "GET", base+"/v1/groups", ""); code != 200 || !bytes.Contains(b, []byte(`"g1"`)) {
		t.Fatalf("groups: %d %s", code, b)
	}
	if code, _ := call(t, "DELETE", base+"/v1/groups/g1", ""); code != 200 {
		t.Fatalf("delete: %d", code)
	}
	if code, b := call(t, "GET", base+"/v1/groups/g1/offsets", ""); code != 200 || !bytes.Contains(b, []byte(`"offsets":[]`)) {
		t.Fatalf("after delete: %d %s", code, b)
	}
	if code, _ := call(t, "GET", base+"/v2/nothing", ""); code != 404 {
		t.Fatalf("unknown route: %d", code)
	}
}
