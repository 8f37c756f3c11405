package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicemq/sluice/libs/cluster"
	"github.com/sluicemq/sluice/libs/frontendapi"
	"github.com/sluicemq/sluice/libs/protocol"
	"github.com/sluicemq/sluice/libs/record"
)

// fakeFrontend stands in for a frontend and the partition leaders behind it
// (the real ones are services of their own; integration/ runs them): it
// serves topic metadata, producer ids and batches bodies, storing records per
// partition with the leader's idempotence rule (a batch whose producer id,
// epoch and sequence it already stored is answered with its first offsets;
// one of an epoch older than the producer's latest is refused).
type fakeFrontend struct {
	t   *testing.T
	srv *httptest.Server

	mu         sync.Mutex
	partitions int                       // of topic t
	describes  int                       // topic metadata requests answered
	logs       map[int32][]record.Record // stored records per partition
	seen       map[[4]int64]int64        // (partition, producer id, epoch, base sequence) -> base offset
	epochs     map[[2]int64]int16        // (partition, producer id) -> latest epoch stored
	seqs       map[int32][]int64         // per partition, the base sequence of each stored batch
	stamps     map[int32][][2]int64      // per partition, (epoch, base sequence) of each stored batch
	nextPID    int64
	failNext   map[int32]int // partition -> answers of NOT_LEADER_OR_FOLLOWER still to give
	refuseNext map[int32]int // partition -> refusals for good (INVALID_RECORD) still to give
	// timeoutNext: partition -> answers of REQUEST_TIMED_OUT still to give;
	// a request with one is answered 504 with every batch's result, as a
	// frontend whose -produce-timeout passed answers.
	timeoutNext map[int32]int
	requests    int
	maxBody     int           // the largest batches body seen
	block       chan struct{} // when set, batches requests wait on it
}

func newFakeFrontend(t *testing.T, partitions int) *fakeFrontend {
	f := &fakeFrontend{t: t, partitions: partitions, logs: map[int32][]record.Record{}, seen: map[[4]int64]int64{}, epochs: map[[2]int64]int16{},
		seqs: map[int32][]int64{}, stamps: map[int32][][2]int64{}, failNext: map[int32]int{}, refuseNext: map[int32]int{}, timeoutNext: map[int32]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeFrontend) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/producers":
		f.mu.Lock()
		f.nextPID++
		id := f.nextPID
		f.mu.Unlock()
		json.NewEncoder(w).Encode(cluster.InitProducerIDResponse{ProducerID: id})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/topics/"):
		name := strings.TrimPrefix(r.URL.Path, "/v1/topics/")
		if name != "t" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(cluster.ErrorBody{ErrorCode: int16(protocol.UnknownTopicOrPartition), Error: "no topic " + name})
			return
		}
		f.mu.Lock()
		f.describes++
		n := f.partitions
		f.mu.Unlock()
		json.NewEncoder(w).Encode(cluster.Topic{Name: name, Partitions: make([]cluster.Partition, n)})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/topics/t/records":
		f.produce(w, r)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeFrontend) produce(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Content-Type") != frontendapi.ContentTypeBatches {
		f.t.Errorf("content type %q", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Error(err)
		return
	}
	var batches []frontendapi.PartitionBatch
	f.mu.Lock()
	block := f.block
	f.requests++
	f.maxBody = max(f.maxBody, len(body))
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	batches, err = frontendapi.DecodeBatches(body)
	if err != nil {
		f.t.Errorf("decode: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var resp frontendapi.BatchesResponse
	timedOut := false
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, pb := range batches {
		res := frontendapi.BatchResult{Partition: pb.Partition}
		if f.timeoutNext[pb.Partition] > 0 {
			f.timeoutNext[pb.Partition]--
			res.ErrorCode, res.Error = int16(protocol.RequestTimedOut), "no answer from the leader in time"
			resp.Results = append(resp.Results, res)
			timedOut = true
			continue
		}
		if f.failNext[pb.Partition] > 0 {
			f.failNext[pb.Partition]--
			res.ErrorCode, res.Error = int16(protocol.NotLeaderOrFollower), "leader moved"
			resp.Results = append(resp.Results, res)
			continue
		}
		if f.refuseNext[pb.Partition] > 0 {
			f.refuseNext[pb.Partition]--
			res.ErrorCode, res.Error = int16(protocol.InvalidRecord), "refused"
			resp.Results = append(resp.Results, res)
			continue
		}
		it := record.NewIterator(pb.Batch)
		var recs []record.Record
		a := arena{size: len(pb.Batch)}
		for it.Next() {
			recs = append(recs, a.record(it.Record()))
		}
		if it.Err() != nil {
			res.ErrorCode, res.Error = int16(protocol.CorruptRecord), it.Err().Error()
			resp.Results = append(resp.Results, res)
			continue
		}
		h := it.Batch()
		key := [4]int64{int64(pb.Partition), h.ProducerID, int64(h.ProducerEpoch), int64(h.BaseSequence)}
		pid := [2]int64{int64(pb.Partition), h.ProducerID}
		if latest, ok := f.epochs[pid]; ok && h.ProducerID >= 0 && h.ProducerEpoch < latest {
			res.ErrorCode, res.Error = int16(protocol.InvalidProducerEpoch), "an older epoch"
		} else if base, dup := f.seen[key]; dup && h.ProducerID >= 0 {
			res.BaseOffset = base
		} else {
			res.BaseOffset = int64(len(f.logs[pb.Partition]))
			f.seen[key] = res.BaseOffset
			f.epochs[pid] = h.ProducerEpoch
			f.seqs[pb.Partition] = append(f.seqs[pb.Partition], int64(h.BaseSequence), int64(len(recs)))
			f.stamps[pb.Partition] = append(f.stamps[pb.Partition], [2]int64{int64(h.ProducerEpoch), int64(h.BaseSequence)})
			f.logs[pb.Partition] = append(f.logs[pb.Partition], recs...)
		}
		resp.Results = append(resp.Results, res)
	}
	if timedOut {
		w.WriteHeader(http.StatusGatewayTimeout)
		json.NewEncoder(w).Encode(struct {
			cluster.ErrorBody
			frontendapi.BatchesResponse
		}{cluster.ErrorBody{ErrorCode: int16(protocol.RequestTimedOut), Error: "produce request timed out"}, resp})
		return
	}
	json.NewEncoder(w).Encode(resp)
}

// batchesRequests returns how many batches requests reached the fake (held
// ones included).
func (f *fakeFrontend) batchesRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *fakeFrontend) stored() map[int32][]record.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int32][]record.Record{}
	for p, l := range f.logs {
		out[p] = append([]record.Record(nil), l...)
	}
	return out
}
