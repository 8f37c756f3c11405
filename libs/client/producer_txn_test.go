package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/libs/txns"
)

// TestTransactionalProducerProtocol: BeginTxn starts the session at the
// coordinator; Send is refused while CommitTxn runs (the record would
// belong to no transaction the caller knows); the next transaction's
// batches carry the epoch End answered, their sequences from 0.
func TestTransactionalProducerProtocol(t *testing.T) {
	f := newFakeFrontend(t, 1)
	release := make(chan struct{})
	endSeen := make(chan txns.EndRequest, 2)
	coord := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/v1/txns/tx/init"):
			fmt.Fprint(w, `{"producer_id":42,"producer_epoch":0}`)
		case strings.HasSuffix(r.URL.Path, "/v1/txns/tx/end"):
			var req txns.EndRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			endSeen <- req
			<-release
			fmt.Fprintf(w, `{"producer_id":42,"producer_epoch":%d}`, req.ProducerEpoch+1)
		default:
			http.Error(w, "no route", http.StatusNotFound)
		}
	}))
	t.Cleanup(coord.Close)
	p := testProducer(t, []string{f.srv.URL}, func(c *ProducerConfig) { c.TransactionalID, c.Offsets = "tx", []string{coord.URL} })
	ctx := context.Background()
	send := func(n int) {
		t.Helper()
		for range n {
			if err := p.Send(ctx, ProducerRecord{Topic: "t", Partition: 0, Value: []byte("v")}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.BeginTxn(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTxn(ctx); !errors.Is(err, ErrTxnInProgress) {
		t.Fatalf("BeginTxn in a transaction: %v", err)
	}
	send(3)
	done := make(chan error, 1)
	go func() { done <- p.CommitTxn(ctx) }()
	if req := <-endSeen; !req.Commit || !req.V2 || req.ProducerID != 42 || req.ProducerEpoch != 0 {
		t.Fatalf("End %+v", req)
	}
	if err := p.Send(ctx, ProducerRecord{Topic: "t", Partition: 0, Value: []byte("late")}, nil); !errors.Is(err, ErrTxnEnding) {
		t.Fatalf("Send while the transaction commits: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTxn(ctx); err != nil {
		t.Fatal(err)
	}
	send(2)
	if err := p.AbortTxn(ctx); err != nil {
		t.Fatal(err)
	}
	if req := <-endSeen; req.Commit || req.ProducerEpoch != 1 {
		t.Fatalf("the second transaction's End %+v", req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := [][2]int64{{0, 0}, {1, 0}}; !slices.Equal(f.stamps[0], want) {
		t.Fatalf("batches stamped (epoch, base sequence) %v, want %v", f.stamps[0], want)
	}
}
